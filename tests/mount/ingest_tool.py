#!/usr/bin/python3
"""Applications of tests/mount/two_mounts_ingest_test.sh, one per subcommand.

  tree DIR FILES SEED      makes a tree of FILES files (100 per directory, 0 to 64 KiB with a few
                           of 1 to 3 MiB, several modes, set mtimes, a symlink and an empty
                           directory per directory) on a local disk, reproducible from SEED
  manifest DIR             prints one line per entry under DIR and DIR itself, sorted: path, type, size (not for
                           directories), mode, mtime in ns, and the sha256 of a file or a link's
                           target
  races A B ROUNDS         two threads, one per mount (A and B are the same directory seen through
                           two mounts), meet at a barrier and race the same namespace change;
                           checks that the answers are POSIX's (exactly one winner where POSIX
                           says so) and that both mounts then list the same names, at once
  writer DIR LOG SEED      writes files into DIR until killed: each file is written, fsynced, and
                           then its name and sha256 are appended to LOG (outside the mount) and
                           LOG is fsynced, so LOG names only files whose fsync returned; between
                           them, files it never fsyncs (u*), which a crash may lose
  verify DIR LOG           every file LOG names reads back whole under DIR with its sha256

Exit status 0 when every check held; a failed check prints what differed and exits 1.
"""
import errno
import hashlib
import os
import random
import stat
import sys
import threading

from coherence_rounds import read, write  # beside this script


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def sha256_of(path):
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def tree(root, files, seed):
    rng = random.Random(seed)
    modes = [0o644, 0o644, 0o600, 0o755, 0o640]
    base_ns = 1_000_000_000 * 10**9  # 2001; files get times up to 2020
    for d in range((files + 99) // 100):
        dpath = os.path.join(root, "d%03d" % d)
        os.makedirs(dpath)
        for i in range(min(100, files - d * 100)):
            size = rng.randint(1 << 20, 3 << 20) if rng.random() < 0.005 else rng.randint(0, 64 << 10)
            p = os.path.join(dpath, "f%03d.bin" % i)
            with open(p, "wb") as f:
                f.write(rng.randbytes(size))
            os.chmod(p, rng.choice(modes))
            t = base_ns + rng.randint(0, 6 * 10**8) * 10**9
            os.utime(p, ns=(t, t))
        os.symlink("f000.bin", os.path.join(dpath, "link"))
        os.mkdir(os.path.join(dpath, "empty"))


def manifest(root):
    st = os.lstat(root)
    lines = [". d - %o %d" % (stat.S_IMODE(st.st_mode), st.st_mtime_ns)]
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            rel = os.path.relpath(p, root)
            if stat.S_ISLNK(st.st_mode):
                lines.append("%s l %d %o %s" % (rel, st.st_size, stat.S_IMODE(st.st_mode), os.readlink(p)))
            elif stat.S_ISDIR(st.st_mode):
                lines.append("%s d - %o %d" % (rel, stat.S_IMODE(st.st_mode), st.st_mtime_ns))
            else:
                lines.append("%s f %d %o %d %s" % (rel, st.st_size, stat.S_IMODE(st.st_mode),
                                                   st.st_mtime_ns, sha256_of(p)))
    for line in sorted(lines):
        print(line)


# --- races -----------------------------------------------------------------------------------

class Racer:
    """Runs one callable per mount at the same moment and returns each one's outcome."""

    def __init__(self):
        self.barrier = threading.Barrier(2, timeout=60)

    def race(self, fa, fb):
        out = [None, None]

        def run(i, fn):
            try:
                self.barrier.wait()
                fn()
                out[i] = "ok"
            except OSError as e:
                out[i] = errno.errorcode.get(e.errno, str(e.errno))
            except threading.BrokenBarrierError:
                out[i] = "barrier"

        ta = threading.Thread(target=run, args=(0, fa))
        tb = threading.Thread(target=run, args=(1, fb))
        ta.start()
        tb.start()
        ta.join()
        tb.join()
        return out


def races(a, b, rounds):
    r = Racer()
    counts = {}

    def one_winner(kind, out, loser_errno):
        counts[kind] = counts.get(kind, 0) + 1
        if sorted(out) != sorted(["ok", loser_errno]):
            fail("%s round %d: answers %s, wanted one ok and one %s" % (kind, counts[kind], out, loser_errno))

    def same_names(kind, want):
        na, nb = sorted(os.listdir(a)), sorted(os.listdir(b))
        if na != nb or na != sorted(want):
            fail("%s round %d: A lists %s, B lists %s, wanted %s" % (kind, counts.get(kind, 0), na, nb, sorted(want)))

    for i in range(rounds):
        # unlink of one name from both mounts: one succeeds, the other finds nothing.
        write(os.path.join(a, "u"), b"u%d" % i)
        read(os.path.join(b, "u"))  # B has it cached
        one_winner("unlink", r.race(lambda: os.unlink(os.path.join(a, "u")),
                                    lambda: os.unlink(os.path.join(b, "u"))), "ENOENT")
        same_names("unlink", [])

        # O_EXCL create of one name: one creates it, the other gets EEXIST; the winner's bytes
        # are what both mounts read.
        if os.path.exists(os.path.join(b, "x")):  # B's negative lookup, then the race
            fail("x exists before its create")
        excl = os.O_WRONLY | os.O_CREAT | os.O_EXCL
        out = r.race(lambda: write(os.path.join(a, "x"), b"from A", excl),
                     lambda: write(os.path.join(b, "x"), b"from B", excl))
        one_winner("create", out, "EEXIST")
        want = b"from A" if out[0] == "ok" else b"from B"
        if read(os.path.join(a, "x")) != want or read(os.path.join(b, "x")) != want:
            fail("create round %d: A reads %r, B reads %r, wanted %r" %
                 (i, read(os.path.join(a, "x")), read(os.path.join(b, "x")), want))
        same_names("create", ["x"])

        # One source renamed to two targets: one rename moves it, the other finds no source.
        out = r.race(lambda: os.rename(os.path.join(a, "x"), os.path.join(a, "ta")),
                     lambda: os.rename(os.path.join(b, "x"), os.path.join(b, "tb")))
        one_winner("rename-source", out, "ENOENT")
        target = "ta" if out[0] == "ok" else "tb"
        same_names("rename-source", [target])
        if read(os.path.join(b, target)) != want:
            fail("rename-source round %d: the moved file's bytes changed" % i)
        os.unlink(os.path.join(a, target))

        # Two temporaries renamed over one name (checkpoints saved from two hosts): both
        # succeed, the name holds one of them whole, both temporaries are gone.
        write(os.path.join(a, "ckpt"), b"old")
        write(os.path.join(a, "ckpt.a"), b"A" * 1000)
        write(os.path.join(b, "ckpt.b"), b"B" * 2000)
        out = r.race(lambda: os.rename(os.path.join(a, "ckpt.a"), os.path.join(a, "ckpt")),
                     lambda: os.rename(os.path.join(b, "ckpt.b"), os.path.join(b, "ckpt")))
        counts["rename-over"] = counts.get("rename-over", 0) + 1
        if out != ["ok", "ok"]:
            fail("rename-over round %d: answers %s, wanted both ok" % (i, out))
        ga, gb = read(os.path.join(a, "ckpt")), read(os.path.join(b, "ckpt"))
        if ga != gb or ga not in (b"A" * 1000, b"B" * 2000):
            fail("rename-over round %d: A reads %d bytes %r..., B %d bytes %r..." % (i, len(ga), ga[:4], len(gb), gb[:4]))
        if os.stat(os.path.join(a, "ckpt")).st_size != len(ga) or os.stat(os.path.join(b, "ckpt")).st_size != len(ga):
            fail("rename-over round %d: a size disagrees with the bytes" % i)
        same_names("rename-over", ["ckpt"])
        os.unlink(os.path.join(b, "ckpt"))

        # mkdir and rmdir of one name: one winner each.
        one_winner("mkdir", r.race(lambda: os.mkdir(os.path.join(a, "sub")),
                                   lambda: os.mkdir(os.path.join(b, "sub"))), "EEXIST")
        same_names("mkdir", ["sub"])
        one_winner("rmdir", r.race(lambda: os.rmdir(os.path.join(a, "sub")),
                                   lambda: os.rmdir(os.path.join(b, "sub"))), "ENOENT")
        same_names("rmdir", [])
    print("races: " + ", ".join("%s %d" % kv for kv in sorted(counts.items())) + ": POSIX answers, both mounts agree")


# --- writer and verify -----------------------------------------------------------------------

def writer(d, log, seed):
    rng = random.Random(seed)
    logfd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    n = 0
    while True:
        data = rng.randbytes(rng.randint(1, 200 << 10))
        name = "f%06d" % n
        fd = os.open(os.path.join(d, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, data)
        os.fsync(fd)
        os.close(fd)
        if n % 10 == 0:
            dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
            os.fsync(dfd)
            os.close(dfd)
        os.write(logfd, ("%s %s\n" % (name, hashlib.sha256(data).hexdigest())).encode())
        os.fsync(logfd)
        write(os.path.join(d, "u%06d" % n), rng.randbytes(rng.randint(1, 64 << 10)))
        n += 1


def verify(d, log):
    n = 0
    with open(log) as f:
        for line in f:
            name, digest = line.split()
            p = os.path.join(d, name)
            try:
                got = sha256_of(p)
            except OSError as e:
                fail("%s, fsynced before the crash: %s" % (name, e))
            if got != digest:
                fail("%s, fsynced before the crash, reads back %d bytes that differ" % (name, os.stat(p).st_size))
            n += 1
    print("verify: %d fsynced files whole" % n)


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "tree":
        tree(args[0], int(args[1]), int(args[2]))
    elif cmd == "manifest":
        manifest(args[0])
    elif cmd == "races":
        races(args[0], args[1], int(args[2]))
    elif cmd == "writer":
        writer(args[0], args[1], int(args[2]))
    elif cmd == "verify":
        verify(args[0], args[1])
    else:
        fail("unknown command " + cmd)


if __name__ == "__main__":
    main()
