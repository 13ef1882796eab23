# `cmake --install build [--prefix /usr]`: the four programs, the mount(8) helpers, the systemd
# units, configs and the docs, where Debian expects them (docs/operations.md "Install"):
#
#   PREFIX/bin/aquifer-meta, aquifer-data, aquifer-mount, aquifer
#   /sbin/mount.fuse.aquifer, /sbin/mount.aquifer -> PREFIX/bin/aquifer-mount
#       (mount(8) looks for helpers only in /sbin, /sbin/fs.d and /sbin/fs, whatever the prefix;
#       AQUIFER_MOUNT_HELPER_DIR changes it)
#   PREFIX/lib/systemd/system/*.service|*.timer|*.mount, their paths naming this install
#   ETC/aquifer/*.toml and mount-datasets.conf, only where no file is there yet (ETC is /etc for
#       the /usr prefix, PREFIX/etc otherwise)
#   PREFIX/share/doc/aquifer: README.md, LICENSE, docs/*, examples/ (the configs)
# DESTDIR applies to all of it. The paths that depend on the prefix are worked out when
# installing (install_paths.cmake), so `--prefix` at install time is honoured.
include(GNUInstallDirs)
set(AQUIFER_MOUNT_HELPER_DIR "/sbin" CACHE PATH
    "where mount(8) finds mount.fuse.aquifer (it searches /sbin only)")

install(TARGETS aquifer-meta aquifer-data aquifer-mount aquifer
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${CMAKE_SOURCE_DIR}/deploy/aquifer-meta.toml ${CMAKE_SOURCE_DIR}/deploy/aquifer-data.toml
              ${CMAKE_SOURCE_DIR}/deploy/aquifer-cluster.toml ${CMAKE_SOURCE_DIR}/deploy/aquifer-mount.conf
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)
install(FILES ${CMAKE_SOURCE_DIR}/README.md ${CMAKE_SOURCE_DIR}/LICENSE
        DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(CODE "
  set(AQUIFER_SOURCE_DIR \"${CMAKE_SOURCE_DIR}\")
  set(AQUIFER_MOUNT_HELPER_DIR \"${AQUIFER_MOUNT_HELPER_DIR}\")
  set(AQUIFER_BINDIR \"${CMAKE_INSTALL_BINDIR}\")
  set(AQUIFER_DOCDIR \"${CMAKE_INSTALL_DOCDIR}\")")
install(SCRIPT ${CMAKE_SOURCE_DIR}/deploy/install_paths.cmake)
