"""POSIX behaviours through an Aquifer mount: errno table, rename flags, truncate holes,
O_APPEND, fallocate, unlink while open, utimensat ns/UTIME_NOW/UTIME_OMIT, FIFOs, statfs,
aquifer.layout, hard links, umask. Usage: posix_checks.py MOUNTDIR. Exits non-zero on failure."""
import ctypes, errno, os, stat, sys, time

M = sys.argv[1]
libc = ctypes.CDLL(None, use_errno=True)
checks = 0


def p(*parts):
    return os.path.join(M, *parts)


def expect_errno(err, fn, *args):
    global checks
    try:
        fn(*args)
    except OSError as e:
        assert e.errno == err, f"{fn.__name__}{args}: errno {errno.errorcode.get(e.errno)} != {errno.errorcode[err]}"
        checks += 1
        return
    raise AssertionError(f"{fn.__name__}{args} succeeded, expected {errno.errorcode[err]}")


def ok(cond, what):
    global checks
    assert cond, what
    checks += 1


def renameat2(a, b, flags):
    AT_FDCWD = -100
    r = libc.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), flags)
    if r != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


os.mkdir(p("d"))
with open(p("d", "f"), "w") as f:
    f.write("x")
os.mkdir(p("d", "sub"))
# --- errno table
expect_errno(errno.ENOENT, os.stat, p("missing"))
expect_errno(errno.ENOENT, os.open, p("missing", "x"), os.O_RDONLY)
expect_errno(errno.EEXIST, os.mkdir, p("d"))
expect_errno(errno.EEXIST, os.open, p("d", "f"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
expect_errno(errno.ENOTEMPTY, os.rmdir, p("d"))
expect_errno(errno.ENAMETOOLONG, os.open, p("n" * 256), os.O_CREAT | os.O_WRONLY)
expect_errno(errno.ENAMETOOLONG, os.mkdir, p("n" * 256))
expect_errno(errno.EISDIR, os.open, p("d"), os.O_WRONLY)
expect_errno(errno.EISDIR, os.unlink, p("d"))
expect_errno(errno.ENOTDIR, os.stat, p("d", "f", "x"))
expect_errno(errno.ENOTDIR, os.rmdir, p("d", "f"))
expect_errno(errno.ENOTDIR, os.listdir, p("d", "f"))
expect_errno(errno.EPERM, os.link, p("d"), p("dirlink"))
expect_errno(errno.ENODATA, os.getxattr, p("d", "f"), "user.none")
fd = os.open(p("d", "name255_" + "n" * 247), os.O_CREAT | os.O_WRONLY, 0o644)
os.close(fd)
ok(len("name255_" + "n" * 247) == 255, "255 name")
# --- rename flags
with open(p("a"), "w") as f:
    f.write("A")
with open(p("b"), "w") as f:
    f.write("B")
expect_errno(errno.EEXIST, renameat2, p("a"), p("b"), 1)  # RENAME_NOREPLACE
renameat2(p("a"), p("b"), 2)  # RENAME_EXCHANGE
ok(open(p("a")).read() == "B" and open(p("b")).read() == "A", "exchange swapped contents")
renameat2(p("a"), p("c"), 1)
ok(not os.path.exists(p("a")) and open(p("c")).read() == "B", "noreplace to a free name")
os.rename(p("c"), p("b"))  # plain rename replaces
ok(open(p("b")).read() == "B", "rename replaces")
expect_errno(errno.EINVAL, os.rename, p("d"), p("d", "sub", "inside"))
# --- truncate up and down, holes read as zeros
path = p("t")
with open(path, "wb") as f:
    f.write(b"\xaa" * 5_000_000)
os.truncate(path, 1_000_001)
os.truncate(path, 6_000_000)
data = open(path, "rb").read()
ok(len(data) == 6_000_000, "size after truncate up")
ok(data[:1_000_001] == b"\xaa" * 1_000_001, "kept prefix")
ok(data[1_000_001:] == bytes(6_000_000 - 1_000_001), "zeros after truncate down then up")
with open(path, "r+b") as f:
    f.truncate(10)
    f.seek(20)
    f.write(b"z")
ok(open(path, "rb").read() == b"\xaa" * 10 + bytes(10) + b"z", "hole written past end")
# --- O_APPEND from two descriptors
fa = os.open(p("ap"), os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
fb = os.open(p("ap"), os.O_WRONLY | os.O_APPEND)
os.write(fa, b"one,")
os.write(fb, b"two,")
os.write(fa, b"three")
os.close(fa); os.close(fb)
ok(open(p("ap"), "rb").read() == b"one,two,three", "O_APPEND")
# --- fallocate mode 0 extends; other modes are refused
fd = os.open(p("fa"), os.O_CREAT | os.O_RDWR, 0o644)
os.posix_fallocate(fd, 0, 3_000_000)
ok(os.fstat(fd).st_size == 3_000_000, "fallocate extends")
FALLOC_FL_PUNCH_HOLE, FALLOC_FL_KEEP_SIZE = 2, 1
r = libc.fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, ctypes.c_long(0), ctypes.c_long(4096))
ok(r != 0 and ctypes.get_errno() == errno.EOPNOTSUPP, "punch hole refused with EOPNOTSUPP")
os.close(fd)
ok(open(p("fa"), "rb").read() == bytes(3_000_000), "fallocated bytes read as zeros")
# --- unlink while open: still readable and writable until the last close
with open(p("u"), "wb") as f:
    f.write(b"keep me" * 1000)
fd = os.open(p("u"), os.O_RDWR)
os.unlink(p("u"))
ok(not os.path.exists(p("u")), "name gone")
ok(os.pread(fd, 7, 7000 - 7) == b"keep me", "read after unlink")
os.pwrite(fd, b"more", 7000)
ok(os.pread(fd, 11, 6993) == b"keep memore", "write after unlink")
ok(os.fstat(fd).st_size == 7004, "size after write to unlinked file")
os.close(fd)
# --- utimensat with nanoseconds, UTIME_NOW and UTIME_OMIT
path = p("times")
open(path, "w").close()
os.utime(path, ns=(1_234_567_891_123_456_789, 987_654_321_987_654_321))
st = os.stat(path)
ok(st.st_atime_ns == 1_234_567_891_123_456_789 and st.st_mtime_ns == 987_654_321_987_654_321, f"ns times {st}")


class Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


UTIME_NOW, UTIME_OMIT = (1 << 30) - 1, (1 << 30) - 2
ts = (Timespec * 2)(Timespec(0, UTIME_OMIT), Timespec(0, UTIME_NOW))
before = time.time_ns()
ok(libc.utimensat(-100, path.encode(), ts, 0) == 0, "utimensat OMIT/NOW")
st = os.stat(path)
ok(st.st_atime_ns == 1_234_567_891_123_456_789, "UTIME_OMIT kept atime")
ok(abs(st.st_mtime_ns - before) < 5_000_000_000, "UTIME_NOW set mtime to now")
# --- FIFO, symlink, hard link, chmod/chown, umask
os.mkfifo(p("fifo"), 0o640)
ok(stat.S_ISFIFO(os.stat(p("fifo")).st_mode), "mkfifo")
pid = os.fork()
if pid == 0:
    with open(p("fifo"), "w") as w:
        w.write("through the fifo")
    os._exit(0)
ok(open(p("fifo")).read() == "through the fifo", "fifo data")
os.waitpid(pid, 0)
os.symlink("d/f", p("sl"))
ok(os.readlink(p("sl")) == "d/f" and open(p("sl")).read() == "x", "symlink")
os.link(p("d", "f"), p("hl"))
ok(os.stat(p("hl")).st_nlink == 2 and os.stat(p("hl")).st_ino == os.stat(p("d", "f")).st_ino, "hard link")
os.unlink(p("d", "f"))
ok(os.stat(p("hl")).st_nlink == 1 and open(p("hl")).read() == "x", "link survives unlink")
os.chmod(p("hl"), 0o4711)
ok(stat.S_IMODE(os.stat(p("hl")).st_mode) == 0o4711, "chmod")
os.chown(p("hl"), 1234, 5678)
ok(os.stat(p("hl")).st_uid == 1234 and os.stat(p("hl")).st_gid == 5678, "chown")
old = os.umask(0o027)
os.mkdir(p("um"), 0o777)
fd = os.open(p("um", "f"), os.O_CREAT | os.O_WRONLY, 0o666)
os.close(fd)
os.umask(old)
ok(stat.S_IMODE(os.stat(p("um")).st_mode) == 0o750, "umask on mkdir")
ok(stat.S_IMODE(os.stat(p("um", "f")).st_mode) == 0o640, "umask on create")
# --- xattrs and the virtual layout attribute
os.setxattr(p("hl"), "user.k", b"v1")
expect_errno(errno.EEXIST, os.setxattr, p("hl"), "user.k", b"v2", os.XATTR_CREATE)
expect_errno(errno.ENODATA, os.setxattr, p("hl"), "user.other", b"v2", os.XATTR_REPLACE)
os.setxattr(p("hl"), "user.k", b"v3", os.XATTR_REPLACE)
ok(os.getxattr(p("hl"), "user.k") == b"v3", "xattr replace")
ok("user.k" in os.listxattr(p("hl")), "listxattr")
os.removexattr(p("hl"), "user.k")
expect_errno(errno.ENODATA, os.getxattr, p("hl"), "user.k")
layout = os.getxattr(p("t"), "aquifer.layout").decode()
ok("k=" in layout and "m=" in layout, f"aquifer.layout: {layout}")
# --- statfs, directory listing with . and ..
sv = os.statvfs(M)
ok(sv.f_blocks > 0 and sv.f_bavail <= sv.f_blocks and sv.f_namemax == 255, f"statvfs {sv}")
names = set(os.listdir(p("d")))
ok(names == {"sub", "name255_" + "n" * 247}, f"listdir {names}")
# --- a directory's attributes are current right after each change made through this mount
# (the mount answers the kernel's GETATTR from the attributes the change returned)
os.mkdir(p("da"))
os.mkdir(p("db"))
def dst(name):
    return os.stat(p(name))
a0 = dst("da")
os.mkdir(p("da", "s1"))
a1 = dst("da")
ok(a1.st_nlink == a0.st_nlink + 1 and a1.st_mtime_ns > a0.st_mtime_ns, f"mkdir updates parent {a0} {a1}")
open(p("da", "f1"), "w").close()
a2 = dst("da")
ok(a2.st_mtime_ns > a1.st_mtime_ns and a2.st_ctime_ns > a1.st_ctime_ns, "create updates parent times")
b0 = dst("db")
os.rename(p("da", "s1"), p("db", "s1"))
a3, b1 = dst("da"), dst("db")
ok(a3.st_nlink == a2.st_nlink - 1 and b1.st_nlink == b0.st_nlink + 1, "rename of a dir moves nlink")
ok(a3.st_mtime_ns > a2.st_mtime_ns and b1.st_mtime_ns > b0.st_mtime_ns, "rename updates both parents")
os.rmdir(p("db", "s1"))
b2 = dst("db")
ok(b2.st_nlink == b0.st_nlink and b2.st_mtime_ns > b1.st_mtime_ns, "rmdir updates parent")
os.unlink(p("da", "f1"))
ok(dst("da").st_mtime_ns > a3.st_mtime_ns, "unlink updates parent mtime")
os.chmod(p("da"), 0o711)
ok(stat.S_IMODE(dst("da").st_mode) == 0o711, "chmod of a dir seen at once")
c0 = dst("da").st_ctime_ns
os.setxattr(p("da"), "user.dirattr", b"1")
ok(dst("da").st_ctime_ns > c0, "setxattr on a dir updates its ctime")
print(f"posix checks passed: {checks}")
