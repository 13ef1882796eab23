#!/usr/bin/python3
"""Rounds of "change on one mount, look at once on the other" (docs/design.md "Cache leases").

coherence_rounds.py DIR_ON_A DIR_ON_B ROUNDS: DIR_ON_A and DIR_ON_B are one directory seen
through two mounts. Each round, on the writer's side, makes a file (after the checker found its
name absent), rewrites it with O_TRUNC, chmods it, appends to it, saves a checkpoint by
write-to-temp-and-rename-over, and unlinks the file; after each call returns, the checker's side
must show exactly that change, with no sleep and no retry: bytes by buffered and O_DIRECT reads,
st_size, st_mode, absence. ROUNDS rounds run with A writing and then as many with B writing.
Prints the rounds and checks done; exits 1 at the first disagreement, naming it.
"""
import mmap
import os
import stat
import sys


def read_direct(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        buf = mmap.mmap(-1, 1 << 16)  # page-aligned, as O_DIRECT wants
        n = os.readv(fd, [buf])
        return bytes(buf[:n])
    finally:
        os.close(fd)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def write(path, data, flags=os.O_WRONLY | os.O_CREAT | os.O_TRUNC):
    fd = os.open(path, flags, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


class Disagree(Exception):
    pass


def expect(what, got, want):
    if got != want:
        raise Disagree(f"{what}: got {got!r}, wanted {want!r}")


def rounds(w, c, n, tag):
    checks = 0
    for i in range(n):
        name = f"{tag}{i}"
        wp, cp = os.path.join(w, name), os.path.join(c, name)
        expect(f"{name} absent before its create", os.path.exists(cp), False)
        body = f"{name} first\n".encode()
        write(wp, body)
        expect(f"{name} after create (buffered)", read(cp), body)
        body = f"{name} rewritten {'x' * (i % 97)}\n".encode()
        write(wp, body)
        expect(f"{name} size after O_TRUNC rewrite", os.stat(cp).st_size, len(body))
        expect(f"{name} after O_TRUNC rewrite (O_DIRECT)", read_direct(cp), body)
        mode = 0o600 if i % 2 else 0o640
        os.chmod(wp, mode)
        expect(f"{name} mode after chmod", stat.S_IMODE(os.stat(cp).st_mode), mode)
        os.chmod(wp, 0o644)
        more = f"{name} appended\n".encode()
        write(wp, more, os.O_WRONLY | os.O_APPEND)
        body += more
        expect(f"{name} size after append", os.stat(cp).st_size, len(body))
        expect(f"{name} after append (buffered)", read(cp), body)
        ckpt = f"checkpoint {tag} {i}\n".encode()
        write(os.path.join(w, f"ckpt.{tag}.tmp"), ckpt)
        os.rename(os.path.join(w, f"ckpt.{tag}.tmp"), os.path.join(w, f"ckpt.{tag}"))
        expect(f"ckpt.{tag} after rename-over {i} (buffered)", read(os.path.join(c, f"ckpt.{tag}")),
               ckpt)
        expect(f"ckpt.{tag} after rename-over {i} (O_DIRECT)",
               read_direct(os.path.join(c, f"ckpt.{tag}")), ckpt)
        os.unlink(wp)
        expect(f"{name} absent after unlink", os.path.exists(cp), False)
        checks += 11
    return checks


def main():
    a, b, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    try:
        checks = rounds(a, b, n, "a") + rounds(b, a, n, "b")
    except (Disagree, OSError) as e:
        print(f"coherence_rounds: {e}", file=sys.stderr)
        return 1
    print(f"coherence_rounds: {2 * n} rounds, {checks} checks, all seen at once on the other mount")
    return 0


if __name__ == "__main__":
    sys.exit(main())
