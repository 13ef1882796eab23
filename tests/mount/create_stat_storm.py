#!/usr/bin/python3
"""Creates on one mount, stats on the other, from 4 processes (2 per mount) for DURATION s in 4
shared directories, with renames, unlinks and listings mixed in (the storm test's metadata storm
without its failures). Each process writes a new file of 1..3000 bytes, closes it, and stats it
at once through the other mount: the size must be the one just closed. Listings of the same
directories on the other mount race the creates (their readdirplus replies carry size 0), which
is what made the other mount's kernel keep size 0 (1 in ~400 creates) before the mount waited for
its kernel to know an inode before acknowledging its recall.

usage: create_stat_storm.py MOUNT_A MOUNT_B DURATION_S   (exit 1 on any wrong size)"""
import multiprocessing as mp
import os
import random
import sys
import time

A, B, DURATION = sys.argv[1], sys.argv[2], float(sys.argv[3])
DIRS = ["d%d" % i for i in range(4)]


def work(wid, out):
    own, other = (A, B) if wid < 2 else (B, A)
    rnd = random.Random(wid)
    live, n, creates, bad = {}, 0, 0, []
    end = time.time() + DURATION
    while time.time() < end:
        r = rnd.random()
        if r < 0.35 or not live:
            if len(live) >= 40:
                rel = rnd.choice(list(live))
                os.unlink(os.path.join(own, rel))
                del live[rel]
                continue
            n += 1
            rel = "%s/w%d-%d" % (rnd.choice(DIRS), wid, n)
            data = rnd.randbytes(rnd.randint(1, 3000))
            fd = os.open(os.path.join(own, rel), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(fd, data)
            os.close(fd)
            live[rel] = len(data)
            creates += 1
            size = os.stat(os.path.join(other, rel)).st_size
            if size != len(data):
                bad.append("%s: the other mount says %d bytes, %d were closed" % (rel, size, len(data)))
        elif r < 0.55:
            rel = rnd.choice(list(live))
            size = os.stat(os.path.join(own, rel)).st_size
            if size != live[rel]:
                bad.append("%s: its own mount says %d bytes, %d were closed" % (rel, size, live[rel]))
        elif r < 0.72:
            rel = rnd.choice(list(live))
            n += 1
            new = "%s/w%d-%dr" % (rnd.choice(DIRS), wid, n)
            os.rename(os.path.join(own, rel), os.path.join(own, new))
            live[new] = live.pop(rel)
        elif r < 0.85:
            os.listdir(os.path.join(own, rnd.choice(DIRS)))
        else:
            rel = rnd.choice(list(live))
            os.unlink(os.path.join(own, rel))
            del live[rel]
    out.put((wid, creates, bad))


def main():
    for d in DIRS:
        os.makedirs(os.path.join(A, d), exist_ok=True)
    out = mp.Queue()
    procs = [mp.Process(target=work, args=(i, out)) for i in range(4)]
    for p in procs:
        p.start()
    results = [out.get() for _ in procs]
    for p in procs:
        p.join()
    creates = sum(r[1] for r in results)
    bad = [b for r in results for b in r[2]]
    for b in bad[:20]:
        print("WRONG SIZE " + b)
    print("create_stat_storm: %d creates, %d wrong sizes" % (creates, len(bad)))
    if any(p.exitcode != 0 for p in procs):
        print("a worker failed")
        return 1
    return 1 if bad or creates == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
