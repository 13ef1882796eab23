#!/usr/bin/python3
"""One mount replaces a name as fast as it can (write a temporary file, close, rename it over the
name: how checkpoints, manifests and label files are saved) while readers on the other mount open
and read the name in a loop, for DURATION seconds. Every open must succeed (the name always
exists: never ENOENT or ESTALE), every read must give one whole generation (never a mix, a short
file or zeros), and one reader must never see a generation older than one it saw before (what it
read cannot go back in time).

usage: replace_race.py WRITER_MOUNT READER_MOUNT DURATION_S [READERS]
Prints a summary line and a JSON line; exits 1 on any error."""
import errno
import hashlib
import json
import multiprocessing as mp
import os
import sys
import time

W, R, DURATION = sys.argv[1], sys.argv[2], float(sys.argv[3])
READERS = int(sys.argv[4]) if len(sys.argv) > 4 else 2
NAME = "replaced"


def body(gen):
    # 100..4099 bytes: "gen <n> <sha of payload>\n" then the payload, so a read proves itself whole.
    payload = hashlib.sha256(str(gen).encode()).digest() * (3 + gen % 128)
    return b"gen %d %s\n" % (gen, hashlib.sha256(payload).hexdigest().encode()) + payload


def parse(data):
    head, _, payload = data.partition(b"\n")
    parts = head.split()
    if len(parts) != 3 or parts[0] != b"gen":
        return None
    if hashlib.sha256(payload).hexdigest().encode() != parts[2]:
        return None
    return int(parts[1])


def writer(stop_at, out):
    gen = 0
    while time.time() < stop_at:
        gen += 1
        tmp = os.path.join(W, ".%s.tmp" % NAME)
        with open(tmp, "wb") as f:
            f.write(body(gen))
        os.rename(tmp, os.path.join(W, NAME))
    out.put(("writer", gen, {}))


def reader(rid, stop_at, out):
    path = os.path.join(R, NAME)
    last, opens, errors = 0, 0, {}
    while time.time() < stop_at:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            key = errno.errorcode.get(e.errno, str(e.errno))
            errors[key] = errors.get(key, 0) + 1
            continue
        opens += 1
        gen = parse(data)
        if gen is None:
            errors["torn"] = errors.get("torn", 0) + 1
        elif gen < last:
            errors["back_in_time"] = errors.get("back_in_time", 0) + 1
        else:
            last = gen
    out.put(("reader%d" % rid, opens, errors))


def main():
    with open(os.path.join(W, NAME), "wb") as f:
        f.write(body(0))
    out = mp.Queue()
    stop_at = time.time() + DURATION
    procs = [mp.Process(target=writer, args=(stop_at, out))]
    procs += [mp.Process(target=reader, args=(i, stop_at, out)) for i in range(READERS)]
    for p in procs:
        p.start()
    results = [out.get(timeout=DURATION + 120) for _ in procs]
    for p in procs:
        p.join()
    replaces = sum(n for who, n, _ in results if who == "writer")
    opens = sum(n for who, n, _ in results if who != "writer")
    errors = {}
    for _, _, e in results:
        for k, v in e.items():
            errors[k] = errors.get(k, 0) + v
    print("replace_race: %d replaces, %d opens, errors %s" % (replaces, opens, errors or "none"))
    print(json.dumps({"replaces": replaces, "opens": opens, "errors": errors}))
    sys.exit(1 if errors or opens == 0 or replaces == 0 else 0)


main()
