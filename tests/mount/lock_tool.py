#!/usr/bin/python3
"""One lock-taking process for tests/mount/locks_test.sh.

    lock_tool.py take KIND PATH [--within S]     take the lock without blocking, retrying every
                                                 10 ms for up to S seconds (default 0: one try);
                                                 exit 0 and release it, or exit 3 (still held)
    lock_tool.py hold KIND PATH DIR [--within S] take it as `take` does, create DIR/held, and keep
                                                 it until DIR/unlock appears; then unlock, create
                                                 DIR/unlocked and stay alive (fd open) until killed
    lock_tool.py wait KIND PATH DIR [--alarm S]  create DIR/waiting, then block in the lock call
                                                 (F_SETLKW, F_OFD_SETLKW or flock without LOCK_NB).
                                                 Granted: DIR/acquired, then stay alive holding it.
                                                 With --alarm, a SIGALRM after S seconds whose
                                                 handler raises, so the call fails with EINTR:
                                                 DIR/eintr (holding the seconds the call took),
                                                 then stay alive with the fd open, until killed
    lock_tool.py closes KIND PATH DIR            take it as `take` does, open PATH a second time,
                                                 dup the first descriptor, create DIR/held; then
                                                 for each of other, first, dup: when
                                                 DIR/close-NAME appears, close that descriptor
                                                 and create DIR/closed-NAME; stay alive after
    lock_tool.py getlk KIND PATH                 print the type F_GETLK / F_OFD_GETLK reports

`hold ... --fork 1` forks once the lock is held: the child (pid in DIR/child) shares the open
file description and stays alive until killed.

KIND is posix-w, posix-r (fcntl.lockf: F_SETLK(W) of the whole file), ofd-w, ofd-r (F_OFD_SETLK(W)
of the whole file) or flock-ex, flock-sh. Write locks open the file O_RDWR, the others O_RDONLY.
Any other error: a message and exit 1.
"""
import errno
import fcntl
import os
import signal
import struct
import sys
import time

# x86-64 Linux (the kernel's include/uapi/asm-generic/fcntl.h).
F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW = 36, 37, 38
HELD = 3


class Alarm(Exception):
    pass


def flock_struct(l_type):
    # struct flock: short l_type, short l_whence, off_t l_start, off_t l_len, pid_t l_pid, padding.
    return struct.pack("hhqqixxxx", l_type, os.SEEK_SET, 0, 0, 0)


def open_for(kind, path):
    return os.open(path, os.O_RDWR if kind.endswith("-w") else os.O_RDONLY)


def lock(fd, kind, block):
    family, mode = kind.split("-")
    if family == "posix":
        fcntl.lockf(fd, (fcntl.LOCK_EX if mode == "w" else fcntl.LOCK_SH) |
                    (0 if block else fcntl.LOCK_NB))
    elif family == "ofd":
        fcntl.fcntl(fd, F_OFD_SETLKW if block else F_OFD_SETLK,
                    flock_struct(fcntl.F_WRLCK if mode == "w" else fcntl.F_RDLCK))
    elif family == "flock":
        fcntl.flock(fd, (fcntl.LOCK_EX if mode == "ex" else fcntl.LOCK_SH) |
                    (0 if block else fcntl.LOCK_NB))
    else:
        sys.exit(f"unknown kind {kind}")


def unlock(fd, kind):
    family = kind.split("-")[0]
    if family == "posix":
        fcntl.lockf(fd, fcntl.LOCK_UN)
    elif family == "ofd":
        fcntl.fcntl(fd, F_OFD_SETLK, flock_struct(fcntl.F_UNLCK))
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)


def touch(path, text=""):
    with open(path, "w") as f:
        f.write(text)


def take(fd, kind, within_s):
    """Non-blocking attempts until `within_s` passed. Returns the seconds it took, or None."""
    start = time.monotonic()
    while True:
        try:
            lock(fd, kind, block=False)
            return time.monotonic() - start
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.EACCES):
                raise
        if time.monotonic() - start >= within_s:
            return None
        time.sleep(0.01)


def stay_alive():
    while True:
        signal.pause()


def main():
    args = sys.argv[1:]
    opts = {}
    while len(args) >= 2 and args[-2].startswith("--"):
        opts[args[-2][2:]] = float(args[-1])
        args = args[:-2]
    mode, kind, path = args[0], args[1], args[2]
    fd = open_for(kind, path)
    if mode == "take":
        took = take(fd, kind, opts.get("within", 0.0))
        if took is None:
            print(f"{kind} still held after {opts.get('within', 0.0)}s")
            sys.exit(HELD)
        print(f"{kind} taken after {took:.3f}s")
        unlock(fd, kind)
    elif mode == "hold":
        d = args[3]
        took = take(fd, kind, opts.get("within", 0.0))
        if took is None:
            print(f"{kind} still held after {opts.get('within', 0.0)}s")
            sys.exit(HELD)
        if opts.get("fork") and os.fork() == 0:
            touch(f"{d}/child", str(os.getpid()))
            stay_alive()
        touch(f"{d}/held", f"{took:.3f}")
        while not os.path.exists(f"{d}/unlock"):
            time.sleep(0.01)
        unlock(fd, kind)
        touch(f"{d}/unlocked")
        stay_alive()
    elif mode == "closes":
        d = args[3]
        took = take(fd, kind, opts.get("within", 0.0))
        if took is None:
            print(f"{kind} still held after {opts.get('within', 0.0)}s")
            sys.exit(HELD)
        fds = {"other": open_for(kind, path), "first": fd, "dup": os.dup(fd)}
        touch(f"{d}/held", f"{took:.3f}")
        for name in ("other", "first", "dup"):
            while not os.path.exists(f"{d}/close-{name}"):
                time.sleep(0.01)
            os.close(fds[name])
            touch(f"{d}/closed-{name}")
        stay_alive()
    elif mode == "wait":
        d = args[3]

        def on_alarm(signum, frame):
            raise Alarm()

        if "alarm" in opts:
            signal.signal(signal.SIGALRM, on_alarm)
        touch(f"{d}/waiting")
        start = time.monotonic()
        try:
            if "alarm" in opts:
                signal.setitimer(signal.ITIMER_REAL, opts["alarm"])
            lock(fd, kind, block=True)
        except Alarm:
            took = time.monotonic() - start
            print(f"{kind} wait interrupted after {took:.3f}s")
            touch(f"{d}/eintr", f"{took:.3f}")
            stay_alive()
        signal.setitimer(signal.ITIMER_REAL, 0)
        print(f"{kind} granted after {time.monotonic() - start:.3f}s")
        touch(f"{d}/acquired")
        stay_alive()
    elif mode == "getlk":
        family, m = kind.split("-")
        cmd = F_OFD_GETLK if family == "ofd" else fcntl.F_GETLK
        got = fcntl.fcntl(fd, cmd, flock_struct(fcntl.F_WRLCK if m == "w" else fcntl.F_RDLCK))
        l_type = struct.unpack("hhqqixxxx", got)[0]
        print({fcntl.F_UNLCK: "unlocked", fcntl.F_RDLCK: "read", fcntl.F_WRLCK: "write"}[l_type])
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    try:
        main()
    except OSError as e:
        print(f"error: {e}")
        sys.exit(1)
