# Run by `cmake --install` (deploy/install.cmake): the parts of the install whose paths depend on
# the prefix given at install time. Inputs: CMAKE_INSTALL_PREFIX, $ENV{DESTDIR}, and
# AQUIFER_SOURCE_DIR, AQUIFER_MOUNT_HELPER_DIR, AQUIFER_BINDIR, AQUIFER_DOCDIR (relative).
set(dest "$ENV{DESTDIR}")
set(prefix "${CMAKE_INSTALL_PREFIX}")
set(bindir "${prefix}/${AQUIFER_BINDIR}")
set(docdir "${prefix}/${AQUIFER_DOCDIR}")
if(prefix STREQUAL "/usr")
  set(etc "/etc/aquifer")  # as GNUInstallDirs does for /usr
else()
  set(etc "${prefix}/etc/aquifer")
endif()

# mount(8)'s helpers: links to the installed aquifer-mount.
file(MAKE_DIRECTORY "${dest}${AQUIFER_MOUNT_HELPER_DIR}")
foreach(link mount.aquifer mount.fuse.aquifer)
  file(CREATE_LINK "${bindir}/aquifer-mount" "${dest}${AQUIFER_MOUNT_HELPER_DIR}/${link}" SYMBOLIC)
  message(STATUS "Installing: ${dest}${AQUIFER_MOUNT_HELPER_DIR}/${link} -> ${bindir}/aquifer-mount")
endforeach()

# The units in deploy/systemd name the default install (/usr/local/bin, /etc/aquifer,
# /usr/share/doc/aquifer); the installed copies name this one.
file(GLOB units "${AQUIFER_SOURCE_DIR}/deploy/systemd/*")
file(MAKE_DIRECTORY "${dest}${prefix}/lib/systemd/system")
foreach(unit ${units})
  get_filename_component(name "${unit}" NAME)
  file(READ "${unit}" text)
  string(REPLACE "/usr/local/bin/" "${bindir}/" text "${text}")
  string(REPLACE "/etc/aquifer/" "${etc}/" text "${text}")
  string(REPLACE "/usr/share/doc/aquifer/" "${docdir}/" text "${text}")
  file(WRITE "${dest}${prefix}/lib/systemd/system/${name}" "${text}")
  message(STATUS "Installing: ${dest}${prefix}/lib/systemd/system/${name}")
endforeach()

# Configs: an operator's edited file survives a reinstall, so copy only where none is.
file(MAKE_DIRECTORY "${dest}${etc}")
foreach(pair "aquifer-meta.toml:aquifer-meta.toml" "aquifer-data.toml:aquifer-data.toml"
             "aquifer-mount.conf:mount-datasets.conf")
  string(REPLACE ":" ";" parts "${pair}")
  list(GET parts 0 from)
  list(GET parts 1 to)
  if(EXISTS "${dest}${etc}/${to}")
    message(STATUS "Kept: ${dest}${etc}/${to} (already there)")
  else()
    file(COPY_FILE "${AQUIFER_SOURCE_DIR}/deploy/${from}" "${dest}${etc}/${to}")
    message(STATUS "Installing: ${dest}${etc}/${to}")
  endif()
endforeach()
