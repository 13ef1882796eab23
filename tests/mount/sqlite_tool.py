#!/usr/bin/python3
"""SQLite writers and their check, for the mount tests (meta_restart_test.sh, lease_recall_test.sh).

    sqlite_tool.py create DB                     make table t(id, writer, seq, payload); print
                                                 "journal_mode MODE"
    sqlite_tool.py write DB WRITER N [--go F] [--progress F] [--pause S]
                                                 N one-row transactions (BEGIN IMMEDIATE, insert
                                                 (WRITER, seq, payload), COMMIT; 60 s busy
                                                 timeout), starting once F exists with --go,
                                                 writing the rows committed so far into the
                                                 --progress file (whole, by rename) and sleeping S
                                                 seconds after each commit with --pause (work
                                                 between transactions). Prints its figures, then
                                                 "FIRST LAST": the wall-clock times of its first
                                                 and last commit
    sqlite_tool.py check DB N                    integrity_check ok, and rows (1..2, 0..N-1) each
                                                 there exactly once with their payload: exit 0;
                                                 else each problem printed and exit 1

A row's payload is 200 bytes of shake_256("WRITER:SEQ"), so a check knows every byte it expects.
Any error of the database: its traceback and exit 1.
"""
import argparse
import hashlib
import os
import sqlite3
import sys
import time


def payload(writer, seq):
    return hashlib.shake_256(f"{writer}:{seq}".encode()).digest(200)


def await_file(path, seconds=90):
    deadline = time.monotonic() + seconds
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            sys.exit(f"no {path} after {seconds} s")
        time.sleep(0.01)


def progress(path, n):
    with open(path + ".tmp", "w") as f:
        f.write(str(n))
    os.replace(path + ".tmp", path)


def create(db):
    con = sqlite3.connect(db)
    con.execute("create table t(id integer primary key, writer int, seq int, payload blob)")
    con.commit()
    print("journal_mode", con.execute("pragma journal_mode").fetchone()[0])


def write(db, writer, n, go, prog, pause):
    con = sqlite3.connect(db, timeout=60, isolation_level=None)
    if go:
        await_file(go)
    t0 = time.monotonic()
    longest = 0.0
    first = last = 0.0
    for seq in range(n):
        t = time.monotonic()
        con.execute("BEGIN IMMEDIATE")
        con.execute("insert into t(writer, seq, payload) values (?, ?, ?)",
                    (writer, seq, payload(writer, seq)))
        con.execute("COMMIT")
        longest = max(longest, time.monotonic() - t)
        last = time.time()
        if seq == 0:
            first = last
        if prog:
            progress(prog, seq + 1)
        if pause:
            time.sleep(pause)
    con.close()
    el = time.monotonic() - t0
    print(f"writer {writer}: {n} rows in {el:.1f}s ({el / n * 1000:.1f} ms a transaction), "
          f"longest transaction {longest:.2f}s")
    print(f"{first:.3f} {last:.3f}")


def check(db, n):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=60)
    ic = [r[0] for r in con.execute("pragma integrity_check")]
    rows = con.execute("select writer, seq, payload from t").fetchall()
    bad = [] if ic == ["ok"] else [f"integrity_check: {ic[:5]}"]
    count = {}
    for w, s, p in rows:
        count[(w, s)] = count.get((w, s), 0) + 1
        if p != payload(w, s):
            bad.append(f"row ({w}, {s}): wrong payload")
    for w in (1, 2):
        lost = [s for s in range(n) if (w, s) not in count]
        if lost:
            bad.append(f"writer {w}: {len(lost)} rows lost, first seqs {lost[:10]}")
    dup = [k for k, c in count.items() if c > 1]
    extra = [k for k in count if k[0] not in (1, 2) or not 0 <= k[1] < n]
    if dup:
        bad.append(f"{len(dup)} rows there more than once, e.g. {dup[:5]}")
    if extra:
        bad.append(f"{len(extra)} rows nobody wrote, e.g. {extra[:5]}")
    print(f"integrity_check {ic[0] if len(ic) == 1 else ic[:3]}, {len(rows)} rows, "
          f"{len(count)} distinct (writer, seq) of {2 * n}")
    for b in bad[:20]:
        print(f"  {b}")
    return 1 if bad else 0


def main():
    p = argparse.ArgumentParser(description="SQLite writers and their check for mount tests")
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("create")
    c.add_argument("db")
    w = sub.add_parser("write")
    w.add_argument("db")
    w.add_argument("writer", type=int)
    w.add_argument("n", type=int)
    w.add_argument("--go")
    w.add_argument("--progress")
    w.add_argument("--pause", type=float, default=0.0)
    k = sub.add_parser("check")
    k.add_argument("db")
    k.add_argument("n", type=int)
    a = p.parse_args()
    if a.cmd == "create":
        create(a.db)
        return 0
    if a.cmd == "write":
        if a.n <= 0:
            p.error("N must be positive")
        write(a.db, a.writer, a.n, a.go, a.progress, a.pause)
        return 0
    return check(a.db, a.n)


if __name__ == "__main__":
    sys.exit(main())
