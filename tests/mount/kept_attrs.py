#!/usr/bin/python3
"""Attributes answered by the client under cache leases (docs/design.md "Positive lookups and
cold stats without a round trip").

kept_attrs.py DIR_ON_A DIR_ON_C: one directory through two mounts; C's kernel caches nothing
(entry_timeout=0, attr_timeout=0), so every stat on C is answered by C's client, from the
attributes it keeps once it listed the directory. Makes 200 files on A, stats each on C (C lists
the directory with attributes after 16 of them), stats them all again, then changes files on A
and on C itself and checks that C's next stat shows each change at once, with no sleep:
chmod, O_TRUNC rewrite, append, truncate, utime, rename-over, unlink, link (two links), and C's
own writes. Prints the checks done; exits 1 at the first disagreement, naming it.
"""
import os
import stat
import sys

from coherence_rounds import Disagree, write  # beside this script

checks = 0


def expect(what, got, want):
    global checks
    checks += 1
    if got != want:
        raise Disagree(f"{what}: got {got!r}, wanted {want!r}")


def main():
    a, c = sys.argv[1], sys.argv[2]
    n = 200
    for i in range(n):
        write(os.path.join(a, f"f{i:03d}"), b"x" * i)
    for _ in range(2):
        for i in range(n):
            st = os.stat(os.path.join(c, f"f{i:03d}"))
            expect(f"f{i:03d} size on C", st.st_size, i)
    # Changes on A, each seen by C's next stat.
    for i in range(0, 40):
        name = f"f{i:03d}"
        pa, pc = os.path.join(a, name), os.path.join(c, name)
        kind = i % 8
        if kind == 0:
            os.chmod(pa, 0o600)
            expect(f"{name} mode after chmod on A", stat.S_IMODE(os.stat(pc).st_mode), 0o600)
        elif kind == 1:
            write(pa, b"new")
            expect(f"{name} size after O_TRUNC rewrite on A", os.stat(pc).st_size, 3)
        elif kind == 2:
            write(pa, b"more", os.O_WRONLY | os.O_APPEND)
            expect(f"{name} size after append on A", os.stat(pc).st_size, i + 4)
        elif kind == 3:
            os.truncate(pa, 1)
            expect(f"{name} size after truncate on A", os.stat(pc).st_size, 1)
        elif kind == 4:
            os.utime(pa, (1000000000, 1000000000))
            expect(f"{name} mtime after utime on A", int(os.stat(pc).st_mtime), 1000000000)
        elif kind == 5:
            write(os.path.join(a, "tmp"), b"replaced!")
            os.rename(os.path.join(a, "tmp"), pa)
            st = os.stat(pc)
            expect(f"{name} size after rename-over on A", st.st_size, 9)
            expect(f"{name} inode after rename-over on A", st.st_ino, os.stat(pa).st_ino)
        elif kind == 6:
            os.unlink(pa)
            expect(f"{name} gone after unlink on A", os.path.exists(pc), False)
        else:
            os.link(pa, os.path.join(a, name + ".link"))
            expect(f"{name} nlink after link on A", os.stat(pc).st_nlink, 2)
    # C's own changes, seen by its own next stat.
    for i in range(40, 80):
        name = f"f{i:03d}"
        pc = os.path.join(c, name)
        kind = i % 6
        if kind == 0:
            # A stat while the file is open for write asks the server again (the open touched
            # the kept copy) and keeps its answer; the commit at close must take it.
            fd = os.open(pc, os.O_WRONLY | os.O_APPEND)
            os.write(fd, b"grown by C" * 10)
            expect(f"{name} size on C while C appends", os.stat(pc).st_size, i + 100)
            os.close(fd)
            expect(f"{name} size after C's append", os.stat(pc).st_size, i + 100)
            os.stat(os.path.join(a, name))
            expect(f"{name} size on A after C's append", os.stat(os.path.join(a, name)).st_size,
                   i + 100)
        elif kind == 1:
            os.chmod(pc, 0o640)
            expect(f"{name} mode after C's chmod", stat.S_IMODE(os.stat(pc).st_mode), 0o640)
        elif kind == 2:
            os.truncate(pc, 2)
            expect(f"{name} size after C's truncate", os.stat(pc).st_size, 2)
        elif kind == 3:
            os.link(pc, pc + ".link")
            expect(f"{name} nlink after C's link", os.stat(pc).st_nlink, 2)
        elif kind == 4:
            fd = os.open(pc, os.O_WRONLY)
            os.pwrite(fd, b"y" * 500, 0)
            os.close(fd)
            expect(f"{name} size after C's overwrite", os.stat(pc).st_size, 500)
            expect(f"{name} size on A after C's overwrite", os.stat(os.path.join(a, name)).st_size, 500)
        else:
            write(os.path.join(c, "tmpc"), b"c" * 7)
            os.rename(os.path.join(c, "tmpc"), pc)
            expect(f"{name} size after C's rename-over", os.stat(pc).st_size, 7)
            expect(f"{name} size on A after C's rename-over", os.stat(os.path.join(a, name)).st_size, 7)
    # The untouched rest is as it was.
    for i in range(80, n):
        expect(f"f{i:03d} size at the end", os.stat(os.path.join(c, f"f{i:03d}")).st_size, i)
    print(f"kept_attrs: {checks} checks, every change seen at once by C's stat")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (Disagree, OSError) as e:
        print(f"kept_attrs: {e}", file=sys.stderr)
        sys.exit(1)
