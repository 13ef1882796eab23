#!/usr/bin/python3
"""The storm (issue 22, items 1-4): ingest, training and a metadata storm on two mounts of one
local cluster (8 data servers, RS 4+2) while a thrasher kills data servers, the metadata server,
SIGSTOPs one data server and fills one data server's disk to ENOSPC.

  storm.py run --duration 180 [--seed N] [--keep] [--kill-interval S] ...
  storm.py worker KIND --ctx CTX.json --id N      (started by `run`; one process per workload)

Every application-visible error is a finding: the workloads never retry. Each is recorded with
its time, errno, path and detail; at the end the failures active at that time are named. The
driver then restarts what it stopped, runs `aquifer repair wait` and `aquifer fsck`, re-reads every
file that was closed or fsynced (and not deleted on purpose) from both mounts against its
recorded checksum, prints a table and a JSON summary and exits 1 on any error or loss.

Binaries: AQ_CLI_BIN, AQ_META_BIN, AQ_DATA_BIN, AQ_MOUNT_BIN (ctest passes them), else the
build tree beside this file. They are copied into the scratch directory first, so a rebuild
during the storm does not change what a restart runs. The cluster lives in
/tmp/aquifer-storm-XXXX; it is torn down on every exit path (mounts detached with
fusermount3 -uz, every daemon stopped by its pid, checked against /proc/PID/exe).
"""
import argparse
import collections
import errno
import fcntl
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
KINDS = ["EIO", "ESTALE", "ENOENT", "short", "checksum", "other"]
SAMPLE_BYTES = 785  # one label byte + 28x28 pixels
ERRNO_BY_MESSAGE = {os.strerror(e): name for e, name in errno.errorcode.items()}


def now():
    return time.time()


def errno_name(e):
    return errno.errorcode.get(e, str(e)) if isinstance(e, int) else str(e)


def kind_of_errno(name):
    return name if name in ("EIO", "ESTALE", "ENOENT") else "other"


def write_all(fd, data):
    """os.write until every byte of `data` went out (a short write is not an error)."""
    mv = memoryview(data)
    while mv:
        mv = mv[os.write(fd, mv):]


def write_json_atomic(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.replace(tmp, path)


def sha256_file(path, chunk=1 << 20):
    """sha256 and length of a file read from its start to EOF. The page cache of the file is
    dropped first (POSIX_FADV_DONTNEED), so the bytes come from the file system, not from what
    this host wrote or read before. An OSError says where it happened in e.stage."""
    h = hashlib.sha256()
    n = 0
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        e.stage = "open"
        raise
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        while True:
            try:
                b = os.read(fd, chunk)
            except OSError as e:
                e.stage = "read@%d" % n
                raise
            if not b:
                break
            h.update(b)
            n += len(b)
    finally:
        os.close(fd)
    return h.hexdigest(), n


# ---------------------------------------------------------------------------------------------
# Workers
# ---------------------------------------------------------------------------------------------
class Recorder:
    """Counts operations (total, per op, per second) and errors of one workload process and
    writes them to results/NAME.json every 2 s and at exit (local disk, not a mount)."""

    def __init__(self, name, ctx):
        self.name = name
        self.path = os.path.join(ctx["results"], name + ".json")
        self.ops = 0
        self.by_op = collections.Counter()
        self.kinds = collections.Counter()
        self.errors = []
        self.timeline = collections.Counter()  # second since epoch -> units of work
        self.active_seconds = set()  # seconds in which the workload was doing its timed work
        self.manifest = {}  # path relative to the mount root -> {"sha", "size"}
        self.extra = {}
        self.last_flush = 0.0

    def op(self, name, n=1, t=None):
        self.ops += n
        self.by_op[name] += n
        self.timeline[int(t if t is not None else now())] += n
        self.flush()

    def err(self, kind, op, path, eno=None, detail=""):
        self.kinds[kind] += 1
        rec = {"t": now(), "workload": self.name, "kind": kind, "op": op, "path": path,
               "errno": errno_name(eno) if eno is not None else "", "detail": str(detail)[:600]}
        if len(self.errors) < 1000:
            self.errors.append(rec)
        print("ERROR %s" % json.dumps(rec), file=sys.stderr, flush=True)
        self.flush(force=True)

    def oserr(self, op, path, e):
        name = errno_name(e.errno)
        stage = getattr(e, "stage", "")
        self.err(kind_of_errno(name), op, path, e.errno, "%s%s: %s" % (stage + " " if stage else "", type(e).__name__, e))

    def flush(self, force=False):
        t = now()
        if not force and t - self.last_flush < 2.0:
            return
        self.last_flush = t
        write_json_atomic(self.path, {
            "name": self.name, "ops": self.ops, "by_op": dict(self.by_op),
            "kinds": dict(self.kinds), "errors": self.errors,
            "timeline": {str(k): v for k, v in self.timeline.items()},
            "active_seconds": sorted(self.active_seconds), "manifest": self.manifest,
            "extra": self.extra})


def stopping(ctx):
    return os.path.exists(ctx["stop_file"])


def classify_tool_stderr(rec, op, text):
    """One error per stderr line of cp/rsync/tar, its errno taken from the message."""
    n = 0
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        name = None
        for msg, en in ERRNO_BY_MESSAGE.items():
            if line.endswith(msg) or (": " + msg) in line or ("(" + msg) in line:
                name = en
                break
        if n < 50:
            rec.err(kind_of_errno(name) if name else "other", op, "", None if name is None else
                    getattr(errno, name), line)
        n += 1
    return n


def worker_ingest(ctx, wid):
    """Mount A: cp -r, rsync -a and tar -x of the source tree in turn, each copy then read back
    in full through mount B against the source's checksums. The last two good copies are kept
    for the final check; older ones are removed (rm through mount A)."""
    rec = Recorder("ingest", ctx)
    src, src_tar = ctx["src_tree"], ctx["src_tar"]
    with open(ctx["src_manifest"]) as f:
        manifest = json.load(f)
    nfiles = len(manifest)
    a_root, b_root = ctx["mnt_a"], ctx["mnt_b"]
    os.makedirs(os.path.join(a_root, "ingest"), exist_ok=True)
    kept = []
    i = 0
    tools = ["cp", "rsync", "tar"]
    while not stopping(ctx):
        tool = tools[i % 3]
        rel = "ingest/it%04d-%s" % (i, tool)
        dest = os.path.join(a_root, rel)
        i += 1
        if tool == "cp":
            cmd = ["cp", "-r", src, dest]
        elif tool == "rsync":
            cmd = ["rsync", "-a", src + "/", dest + "/"]
        else:
            try:
                os.mkdir(dest)
            except OSError as e:
                rec.oserr("mkdir", rel, e)
                continue
            cmd = ["tar", "-xf", src_tar, "-C", dest]
        t_s = now()
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
            rc, stderr = p.returncode, p.stderr.decode(errors="replace")
        except subprocess.TimeoutExpired as e:
            rc, stderr = -1, "timed out after 600 s: %s" % e
        t_e = now()
        for s in range(int(t_s), int(t_e) + 1):
            rec.active_seconds.add(s)
        # files per second: spread over the seconds the copy ran
        span = max(t_e - t_s, 1e-3)
        for s in range(int(t_s), int(t_e) + 1):
            overlap = min(t_e, s + 1) - max(t_s, s)
            if overlap > 0:
                rec.timeline[s] += nfiles * overlap / span
        rec.ops += nfiles
        rec.by_op[tool] += nfiles
        rec.extra.setdefault("copies", []).append({"rel": rel, "tool": tool, "rc": rc,
                                                    "start": t_s, "end": t_e})
        good = True
        if rc != 0:
            good = False
            n = classify_tool_stderr(rec, tool, stderr)
            if n == 0:
                rec.err("other", tool, rel, None, "exit %d, no message" % rc)
        # read the copy back through mount B (close-to-open across mounts)
        bad = 0
        for f, (size, sha) in manifest.items():
            path = os.path.join(b_root, rel, f)
            try:
                got, n = sha256_file(path)
            except OSError as e:
                if rc == 0 or e.errno != errno.ENOENT:
                    rec.oserr("verify-B", rel + "/" + f, e)
                bad += 1
                continue
            if n != size:
                rec.err("short", "verify-B", rel + "/" + f, None, "read %d bytes, expected %d" % (n, size))
                bad += 1
            elif got != sha:
                rec.err("checksum", "verify-B", rel + "/" + f, None, "sha256 %s expected %s" % (got, sha))
                bad += 1
        rec.op("verify-B", 0)
        if bad:
            good = False
        if good:
            kept.append(rel)
            rec.manifest = {"trees": list(kept)}
        else:
            # a copy that failed is not recorded as closed; remove it
            try:
                shutil.rmtree(dest)
            except OSError as e:
                rec.oserr("rmtree", rel, e)
        while len(kept) > 2:
            old = kept.pop(0)
            rec.manifest = {"trees": list(kept)}
            rec.flush(force=True)
            try:
                shutil.rmtree(os.path.join(a_root, old))
                rec.by_op["rmtree"] += 1
            except OSError as e:
                rec.oserr("rmtree", old, e)
        rec.flush(force=True)
    rec.manifest = {"trees": list(kept)}
    rec.flush(force=True)


def make_record(seq, rnd):
    n = rnd.randint(20, 2000)
    payload = "".join(rnd.choices("abcdefghijklmnopqrstuvwxyz0123456789", k=n))
    return ("%08d %04d %08x %s\n" % (seq, n, zlib.crc32(payload.encode()), payload)).encode()


def worker_writer(ctx, wid):
    """Mount A: appends self-checking records to writer/append.log (fsync every 20, close and
    reopen every 400), rewrites writer/rw/fJ with O_TRUNC and writer/ro/tJ by rename-over.
    Every version is read back through mount B right after close (close-to-open). The state
    file writer.state.json says the fsynced size of the log and its prefix sha256, and every
    version each rename target had (written before the rename that shows it)."""
    rec = Recorder("writer", ctx)
    rnd = random.Random(ctx["seed"] * 1000 + 1)
    a, b = ctx["mnt_a"], ctx["mnt_b"]
    for d in ("writer", "writer/rw", "writer/ro"):
        os.makedirs(os.path.join(a, d), exist_ok=True)
    state_path = os.path.join(ctx["results"], "writer.state.json")
    log_rel = "writer/append.log"
    h = hashlib.sha256()
    size = 0
    seq = 0
    state = {"log_fsynced": 0, "log_sha": h.hexdigest(), "versions": {}}
    write_json_atomic(state_path, state)
    latest = {}
    sizes = [1000, 100_000, 1_500_000, 5_000_000, 9_000_000]
    fd = None
    closed_cleanly = True

    def open_log():
        return os.open(os.path.join(a, log_rel), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def check_b(rel, sha, n):
        try:
            got, got_n = sha256_file(os.path.join(b, rel))
        except OSError as e:
            rec.oserr("read-B-after-close", rel, e)
            return
        if got_n != n:
            rec.err("short", "read-B-after-close", rel, None, "read %d bytes, closed %d" % (got_n, n))
        elif got != sha:
            rec.err("checksum", "read-B-after-close", rel, None, "sha %s, closed %s" % (got, sha))

    try:
        fd = open_log()
    except OSError as e:
        rec.oserr("open-log", log_rel, e)
        return
    step = 0
    while not stopping(ctx):
        step += 1
        t0 = now()
        # 10 records per step
        try:
            for _ in range(10):
                r = make_record(seq, rnd)
                w = os.write(fd, r)
                if w != len(r):
                    rec.err("short", "append", log_rel, None, "short write %d of %d" % (w, len(r)))
                    raise OSError(errno.EIO, "short write")
                h.update(r)
                size += len(r)
                seq += 1
                rec.op("append")
                if seq % 20 == 0:
                    os.fsync(fd)
                    state["log_fsynced"] = size
                    state["log_sha"] = h.hexdigest()
                    write_json_atomic(state_path, state)
                if seq % 400 == 0:
                    os.close(fd)
                    fd = None
                    state["log_fsynced"] = size
                    state["log_sha"] = h.hexdigest()
                    write_json_atomic(state_path, state)
                    fd = open_log()
        except OSError as e:
            rec.oserr("append", log_rel, e)
            closed_cleanly = False
            break  # the log's content is unknown from here: stop this part of the workload
        # one O_TRUNC rewrite or one rename-over per step
        j = rnd.randrange(4)
        n = rnd.choice(sizes)
        data = rnd.randbytes(n)
        sha = hashlib.sha256(data).hexdigest()
        if step % 2 == 0:
            rel = "writer/rw/f%d" % j
            try:
                wfd = os.open(os.path.join(a, rel), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                try:
                    write_all(wfd, data)
                    if rnd.random() < 0.5:
                        os.fsync(wfd)
                finally:
                    os.close(wfd)
                latest[rel] = {"sha": sha, "size": n}
                rec.op("rewrite-trunc")
                check_b(rel, sha, n)
            except OSError as e:
                rec.oserr("rewrite-trunc", rel, e)
                latest.pop(rel, None)
                rec.extra.setdefault("unknown", []).append(rel)
        else:
            rel = "writer/ro/t%d" % j
            tmp_rel = "writer/ro/.tmp%d" % j
            try:
                wfd = os.open(os.path.join(a, tmp_rel), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                try:
                    write_all(wfd, data)
                    os.fsync(wfd)
                finally:
                    os.close(wfd)
                state["versions"].setdefault(rel, []).append(sha)
                write_json_atomic(state_path, state)
                os.rename(os.path.join(a, tmp_rel), os.path.join(a, rel))
                latest[rel] = {"sha": sha, "size": n}
                rec.op("rename-over")
                check_b(rel, sha, n)
            except OSError as e:
                rec.oserr("rename-over", rel, e)
                rec.extra.setdefault("unknown", []).append(rel)
                latest.pop(rel, None)
        for s in range(int(t0), int(now()) + 1):
            rec.active_seconds.add(s)
        rec.manifest = dict(latest)
    if fd is not None:
        try:
            os.close(fd)
        except OSError as e:
            rec.oserr("close-log", log_rel, e)
            closed_cleanly = False
    if closed_cleanly:
        latest[log_rel] = {"sha": h.hexdigest(), "size": size}
    state["log_fsynced"] = size if closed_cleanly else state["log_fsynced"]
    state["log_sha"] = h.hexdigest() if closed_cleanly else state["log_sha"]
    state["log_closed"] = closed_cleanly
    write_json_atomic(state_path, state)
    rec.manifest = dict(latest)
    rec.extra["records"] = seq
    rec.flush(force=True)


def check_log_bytes(data):
    """Returns (records, problem): every complete line must be a valid record, in sequence
    from 0; a last line without its newline is allowed (a commit in mid-record)."""
    pos = 0
    seq = 0
    while pos < len(data):
        nl = data.find(b"\n", pos)
        if nl < 0:
            tail = data[pos:]
            if len(tail) >= 8 and tail[:8] != b"%08d" % seq:
                return seq, "partial last record has seq %r, expected %08d" % (tail[:8], seq)
            return seq, None
        line = data[pos:nl]
        try:
            s, n, crc, payload = line.split(b" ", 3)
            ok = (int(s) == seq and int(n) == len(payload) and int(crc, 16) == zlib.crc32(payload))
        except ValueError:
            ok = False
        if not ok:
            return seq, "record %d at offset %d is invalid: %r" % (seq, pos, line[:60])
        seq += 1
        pos = nl + 1
    return seq, None


def worker_log_reader(ctx, wid):
    """Mount B: opens A's append log again and again: every complete record valid, in sequence,
    at least the bytes A had fsynced before this open, and that prefix equal to A's sha256.
    Also reads the rename-over targets: each must be whole and one of the versions A wrote."""
    rec = Recorder("log-reader", ctx)
    b = ctx["mnt_b"]
    state_path = os.path.join(ctx["results"], "writer.state.json")
    log_rel = "writer/append.log"
    while not stopping(ctx):
        t0 = now()
        try:
            with open(state_path) as f:
                state = json.load(f)
        except (OSError, ValueError):
            time.sleep(0.2)
            continue
        fsynced, fsha = state["log_fsynced"], state["log_sha"]
        path = os.path.join(b, log_rel)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            if not (e.errno == errno.ENOENT and fsynced == 0):
                rec.oserr("read-log", log_rel, e)
            time.sleep(0.2)
            continue
        if len(data) < fsynced:
            rec.err("short", "read-log", log_rel, None,
                    "read %d bytes; %d were fsynced on A before this open" % (len(data), fsynced))
        elif hashlib.sha256(data[:fsynced]).hexdigest() != fsha:
            rec.err("checksum", "read-log", log_rel, None,
                    "the %d fsynced bytes differ from A's (sha %s)" % (fsynced, fsha))
        nrec, problem = check_log_bytes(data)
        if problem:
            rec.err("checksum", "read-log", log_rel, None, problem)
        rec.op("read-log")
        rec.extra["last_records_seen"] = nrec
        for rel in sorted(state.get("versions", {})):
            try:
                got, n = sha256_file(os.path.join(b, rel))
            except OSError as e:
                rec.oserr("read-renamed", rel, e)
                continue
            with open(state_path) as f:
                versions = json.load(f).get("versions", {}).get(rel, [])
            if got not in versions:
                rec.err("checksum", "read-renamed", rel, None,
                        "content (sha %s, %d bytes) is none of the %d versions A renamed into place"
                        % (got, n, len(versions)))
            rec.op("read-renamed")
        for s in range(int(t0), int(now()) + 1):
            rec.active_seconds.add(s)
        time.sleep(0.1)
    rec.flush(force=True)


def worker_train(ctx, wid):
    """Mount B: a PyTorch DataLoader (2 workers, persistent) over the data set written before
    the storm: small per-sample files and multi-MiB shards (pread of one sample). Each sample is
    checked against its recorded CRC32; errors are returned with the batch, not raised."""
    import numpy as np
    import torch
    torch.set_num_threads(1)
    rec = Recorder("train", ctx)
    with open(ctx["dataset_manifest"]) as f:
        ds = json.load(f)
    b = ctx["mnt_b"]

    class Samples(torch.utils.data.Dataset):
        def __init__(self):
            self.small = ds["small"]  # [rel, crc]
            self.shards = ds["shards"]  # [rel, count, [crc...]]
            self.per_shard = self.shards[0][1] if self.shards else 0
            self.fds = {}

        def __len__(self):
            return len(self.small) + len(self.shards) * self.per_shard

        def _read(self, i):
            if i < len(self.small):
                rel, crc = self.small[i]
                fd = os.open(os.path.join(b, rel), os.O_RDONLY)
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    data = os.read(fd, 4096)
                finally:
                    os.close(fd)
                return rel, data, crc
            j, k = divmod(i - len(self.small), self.per_shard)
            rel, _, crcs = self.shards[j]
            fd = self.fds.get(rel)
            if fd is None:
                fd = os.open(os.path.join(b, rel), os.O_RDONLY)
                self.fds[rel] = fd
            os.posix_fadvise(fd, k * SAMPLE_BYTES, SAMPLE_BYTES, os.POSIX_FADV_DONTNEED)
            return "%s@%d" % (rel, k * SAMPLE_BYTES), os.pread(fd, SAMPLE_BYTES, k * SAMPLE_BYTES), crcs[k]

        def __getitem__(self, i):
            err = ""
            x = torch.zeros(784)
            y = -1
            try:
                where, data, crc = self._read(i)
                if len(data) != SAMPLE_BYTES:
                    err = "short||%s|read %d bytes of %d" % (where, len(data), SAMPLE_BYTES)
                elif zlib.crc32(data) != crc:
                    err = "checksum||%s|crc32 %08x expected %08x" % (where, zlib.crc32(data), crc)
                else:
                    x = torch.from_numpy(np.frombuffer(data, dtype=np.uint8, offset=1).astype(np.float32) / 255.0)
                    y = data[0]
            except OSError as e:
                name = errno_name(e.errno)
                err = "%s|%s|%s|%s" % (kind_of_errno(name), name, e.filename or i, e)
                if i >= len(self.small):  # reopen the shard next time
                    for fd in self.fds.values():
                        try:
                            os.close(fd)
                        except OSError:
                            pass
                    self.fds = {}
            return x, y, err

    data = Samples()
    model = torch.nn.Linear(784, 10)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = torch.nn.CrossEntropyLoss()
    epoch = 0
    rec.extra["samples"] = len(data)
    while not stopping(ctx):
        loader = torch.utils.data.DataLoader(data, batch_size=64, shuffle=True, num_workers=2,
                                             persistent_workers=False, timeout=300,
                                             generator=torch.Generator().manual_seed(ctx["seed"] + epoch))
        t_last = now()
        try:
            for x, y, errs in loader:
                t = now()
                for s in range(int(t_last), int(t) + 1):
                    rec.active_seconds.add(s)
                t_last = t
                good = y >= 0
                for e in errs:
                    if e:
                        kind, en, where, detail = e.split("|", 3)
                        rec.err(kind, "sample", where, getattr(errno, en, None) if en else None, detail)
                if good.any():
                    opt.zero_grad()
                    loss = loss_fn(model(x[good]), y[good].long())
                    loss.backward()
                    opt.step()
                    rec.extra["loss"] = float(loss)
                rec.op("sample", int(good.sum()))
                if stopping(ctx):
                    break
        except RuntimeError as e:  # a loader worker died or timed out
            rec.err("other", "dataloader", "", None, "RuntimeError: %s" % e)
        epoch += 1
        rec.extra["epochs"] = epoch
    rec.flush(force=True)


def worker_mdstorm(ctx, wid):
    """Create/stat/rename/unlink/readdir of small files in 4 shared directories, from mount A
    (ids 0, 1) or B (2, 3); every name is this process's own, so ENOENT on it is unexpected.
    Each create is read back (stat + content) through the other mount."""
    name = "mdstorm%d" % wid
    rec = Recorder(name, ctx)
    rnd = random.Random(ctx["seed"] * 1000 + 10 + wid)
    own = ctx["mnt_a"] if wid < 2 else ctx["mnt_b"]
    other = ctx["mnt_b"] if wid < 2 else ctx["mnt_a"]
    dirs = ["mdstorm/d%d" % i for i in range(4)]
    live = {}  # rel -> (sha, size, content)
    gone = set()
    n = 0
    while not stopping(ctx):
        t0 = now()
        r = rnd.random()
        cur = ["?", ""]  # op, path: what an error happened in
        try:
            if r < 0.35 or not live:
                if len(live) >= 40:
                    r = 0.9  # unlink instead
                else:
                    n += 1
                    rel = "%s/w%d-%d" % (rnd.choice(dirs), wid, n)
                    content = rnd.randbytes(rnd.randint(0, 3000))
                    cur[:] = ["create", rel]
                    fd = os.open(os.path.join(own, rel), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                    try:
                        os.write(fd, content)
                    finally:
                        os.close(fd)
                    live[rel] = (hashlib.sha256(content).hexdigest(), len(content))
                    rec.op("create")
                    cur[:] = ["stat-other-mount", rel]
                    st = os.stat(os.path.join(other, rel))
                    if st.st_size != len(content):
                        rec.err("short", "stat-other-mount", rel, None,
                                "size %d, closed %d on the other mount" % (st.st_size, len(content)))
                    cur[:] = ["read-other-mount", rel]
                    with open(os.path.join(other, rel), "rb") as f:
                        got = f.read()
                    if got != content:
                        rec.err("checksum" if len(got) == len(content) else "short", "read-other-mount",
                                rel, None, "read %d bytes, closed %d" % (len(got), len(content)))
                    rec.op("cross-check")
            if 0.35 <= r < 0.55 and live:
                rel = rnd.choice(list(live))
                cur[:] = ["stat", rel]
                st = os.stat(os.path.join(own, rel))
                if st.st_size != live[rel][1]:
                    rec.err("short", "stat", rel, None, "size %d expected %d" % (st.st_size, live[rel][1]))
                rec.op("stat")
            elif 0.55 <= r < 0.72 and live:
                rel = rnd.choice(list(live))
                n += 1
                new = "%s/w%d-%dr" % (rnd.choice(dirs), wid, n)
                cur[:] = ["rename", rel + " -> " + new]
                os.rename(os.path.join(own, rel), os.path.join(own, new))
                live[new] = live.pop(rel)
                gone.add(rel)
                rec.op("rename")
                cur[:] = ["stat-after-rename", new]
                os.stat(os.path.join(own, new))
                if os.path.lexists(os.path.join(own, rel)):
                    rec.err("other", "stat-after-rename", rel, None, "old name still exists after rename")
            elif 0.72 <= r < 0.85:
                d = rnd.choice(dirs)
                cur[:] = ["readdir", d]
                names = set(os.listdir(os.path.join(own, d)))
                for rel in live:
                    if rel.startswith(d + "/") and rel.split("/")[-1] not in names:
                        rec.err("ENOENT", "readdir", rel, errno.ENOENT, "live file missing from listing")
                for rel in gone:
                    if rel.startswith(d + "/") and rel.split("/")[-1] in names:
                        rec.err("other", "readdir", rel, None, "removed name still listed")
                rec.op("readdir")
            elif r >= 0.85 and live:
                rel = rnd.choice(list(live))
                cur[:] = ["unlink", rel]
                os.unlink(os.path.join(own, rel))
                del live[rel]
                gone.add(rel)
                rec.op("unlink")
                for mnt, op in ((own, "stat-after-unlink"), (other, "stat-other-after-unlink")):
                    if os.path.lexists(os.path.join(mnt, rel)):
                        rec.err("other", op, rel, None, "unlinked name still exists")
        except OSError as e:
            rec.oserr(cur[0], cur[1], e)
            # a failed rename or unlink may or may not have happened: leave the name out of
            # the final check (the error itself is already a finding)
            if cur[0] in ("rename", "unlink"):
                live.pop(cur[1].split(" -> ")[0], None)
        for s in range(int(t0), int(now()) + 1):
            rec.active_seconds.add(s)
        rec.manifest = {k: {"sha": v[0], "size": v[1]} for k, v in live.items()}
    rec.flush(force=True)


class LockTimeout(Exception):
    pass


def worker_locks(ctx, wid):
    """fcntl locks: processes on A (ids 0-2) and B (3-5) take an exclusive lock on one counter
    file, read it, write it + 1, unlock. A value below this process's own last write is a lost
    update; at the end the counter must equal the sum of all increments."""
    name = "locks%d" % wid
    rec = Recorder(name, ctx)
    rnd = random.Random(ctx["seed"] * 1000 + 20 + wid)
    mnt = ctx["mnt_a"] if wid < 3 else ctx["mnt_b"]
    path = os.path.join(mnt, "locks/counter")

    def on_alarm(sig, frm):
        raise LockTimeout()

    signal.signal(signal.SIGALRM, on_alarm)
    incs = 0
    uncertain = 0
    last = -1
    # One line per increment: the value written, when the lock was granted and released (local
    # disk). Two processes writing the same value is a lost update; the trace says when.
    trace = open(os.path.join(ctx["results"], name + ".trace"), "w", buffering=1)
    while not stopping(ctx):
        t0 = now()
        fd = None
        locked = False
        wrote = False
        try:
            fd = os.open(path, os.O_RDWR)
            signal.alarm(300)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX)
            finally:
                signal.alarm(0)
            locked = True
            t_locked = now()
            data = os.pread(fd, 64, 0)
            try:
                v = int(data.strip() or b"-1")
            except ValueError:
                rec.err("checksum", "read-counter", "locks/counter", None, "unparsable %r" % data[:40])
                v = None
            if v is not None and v < last:
                rec.err("checksum", "read-counter", "locks/counter", None,
                        "read %d under the lock, this process wrote %d before (lost update)" % (v, last))
            if v is not None:
                wrote = True
                w = os.pwrite(fd, b"%020d\n" % (v + 1), 0)
                if w != 21:
                    rec.err("short", "write-counter", "locks/counter", None, "short write %d" % w)
                incs += 1
                last = v + 1
                wrote = False
            fcntl.lockf(fd, fcntl.LOCK_UN)
            locked = False
            if v is not None:
                trace.write("%d %.6f %.6f\n" % (v + 1, t_locked, now()))
            rec.op("lock-cycle")
            wrote = incs > 0 and last >= 0 and v is not None  # this cycle's write is not closed yet
        except LockTimeout:
            rec.err("other", "lock", "locks/counter", None, "lock not granted in 300 s")
        except OSError as e:
            if wrote:
                uncertain += 1
            rec.oserr("lock-cycle", "locks/counter", e)
        finally:
            if fd is not None:
                try:
                    os.close(fd)
                except OSError as e:
                    # close() failing after this cycle's write: the write may be lost (POSIX);
                    # counted as a finding here and as uncertain in the final counter check
                    if wrote:
                        uncertain += 1
                    rec.oserr("close-after-write" if wrote else "close", "locks/counter", e)
        for s in range(int(t0), int(now()) + 1):
            rec.active_seconds.add(s)
        rec.extra = {"increments": incs, "uncertain": uncertain}
        time.sleep(rnd.random() * 0.03)
    rec.extra = {"increments": incs, "uncertain": uncertain}
    rec.flush(force=True)


WORKERS = {"ingest": worker_ingest, "writer": worker_writer, "log-reader": worker_log_reader,
           "train": worker_train, "mdstorm": worker_mdstorm, "locks": worker_locks}


def worker_main(args):
    with open(args.ctx) as f:
        ctx = json.load(f)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver stops workers (stop file, kill)
    WORKERS[args.kind](ctx, args.id)


# ---------------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------------
class Interrupted(Exception):
    pass


def log(msg):
    line = "[storm %s] %s" % (time.strftime("%H:%M:%S"), msg)
    print(line, flush=True)
    if Driver.instance and Driver.instance.logf:
        Driver.instance.logf.write(line + "\n")
        Driver.instance.logf.flush()


def pid_alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Driver:
    instance = None

    def __init__(self, args):
        Driver.instance = self
        self.args = args
        self.logf = None
        # AQ_STORM_PARENT: where the scratch directory goes (default /tmp).
        self.scratch = tempfile.mkdtemp(prefix="aquifer-storm-",
                                        dir=os.environ.get("AQ_STORM_PARENT", "/tmp"))
        self.logf = open(os.path.join(self.scratch, "storm.log"), "w")
        self.bin = os.path.join(self.scratch, "bin")
        self.root = os.path.join(self.scratch, "root")
        self.mnt_a = os.path.join(self.scratch, "mntA")
        self.mnt_b = os.path.join(self.scratch, "mntB")
        self.results = os.path.join(self.scratch, "results")
        self.fill_fs = os.path.join(self.scratch, "fillfs")
        self.fill_index = None
        self.fill_bind = None
        self.pids = set()  # every daemon pid we started (for teardown)
        self.data_pids = {}
        self.meta_pid = None
        self.down = {}  # index -> (killed at, restart at)
        self.stopped = {}  # index -> (stopped at, cont at)
        self.events = []  # failures: {kind, target, start, end}
        self.workers = []  # (name, Popen)
        self.findings = []  # driver-level errors: {workload, kind, ...}
        self.teardown_lock = threading.Lock()
        self.torn_down = False
        self.t0 = None
        self.filler = None

    # --- commands ---------------------------------------------------------------------------
    def aq(self, *argv, timeout=600, check=True):
        cmd = [os.path.join(self.bin, "aquifer")] + list(argv)
        t = now()
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
        out = p.stdout.decode(errors="replace")
        self.logf.write("$ %s  (exit %d, %.1f s)\n%s\n" % (" ".join(cmd), p.returncode, now() - t, out))
        self.logf.flush()
        if check and p.returncode != 0:
            raise RuntimeError("%s exited %d:\n%s" % (" ".join(cmd), p.returncode, out[-3000:]))
        return p.returncode, out

    def read_cluster(self):
        with open(os.path.join(self.root, "cluster.json")) as f:
            c = json.load(f)
        self.meta_pid = c["meta"]["pid"]
        self.pids.add(self.meta_pid)
        for d in c["data_servers"]:
            self.data_pids[d["index"]] = d["pid"]
            self.pids.add(d["pid"])
        if c.get("mount", {}).get("pid"):
            self.pids.add(c["mount"]["pid"])
        return c

    def ours(self, pid):
        try:
            return os.readlink("/proc/%d/exe" % pid).startswith(self.bin + "/")
        except OSError:
            return False

    def find_mount_pid(self, mnt):
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open("/proc/%s/cmdline" % d, "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if argv and argv[0].endswith(b"aquifer-mount") and mnt.encode() in argv and self.ours(int(d)):
                return int(d)
        return None

    # --- setup ------------------------------------------------------------------------------
    def copy_binaries(self):
        os.makedirs(self.bin)
        srcs = {
            "aquifer": os.environ.get("AQ_CLI_BIN", os.path.join(REPO, "build/src/cli/aquifer")),
            "aquifer-meta": os.environ.get("AQ_META_BIN", os.path.join(REPO, "build/src/metadata/aquifer-meta")),
            "aquifer-data": os.environ.get("AQ_DATA_BIN", os.path.join(REPO, "build/src/server/aquifer-data")),
            "aquifer-mount": os.environ.get("AQ_MOUNT_BIN", os.path.join(REPO, "build/src/client_fuse/aquifer-mount")),
        }
        for name, src in srcs.items():
            shutil.copy2(src, os.path.join(self.bin, name))
            log("binary %s <- %s (%s)" % (name, src, time.ctime(os.path.getmtime(src))))

    def prepare_sources(self):
        src = os.path.join(self.scratch, "src")
        os.makedirs(src)
        tree = os.path.join(src, "linux")
        tarball = "/usr/src/linux-source-6.1.tar.xz"
        if os.path.exists(tarball) and not self.args.usr_include:
            sub = ["kernel", "mm", "lib", "fs/ext4", "fs/fuse", "include/linux", "net/ipv4", "block"]
            subprocess.run(["tar", "-xJf", tarball, "-C", src] + ["linux-source-6.1/" + s for s in sub],
                           check=True)
            os.rename(os.path.join(src, "linux-source-6.1"), tree)
        else:
            shutil.copytree("/usr/include", tree, symlinks=True)
        manifest = {}
        for dp, dns, fns in os.walk(tree):
            for fn in fns:
                p = os.path.join(dp, fn)
                if os.path.islink(p) or not os.path.isfile(p):
                    continue
                sha, n = sha256_file(p)
                manifest[os.path.relpath(p, tree)] = [n, sha]
        subprocess.run(["tar", "-cf", os.path.join(src, "linux.tar"), "-C", tree, "."], check=True)
        write_json_atomic(os.path.join(src, "manifest.json"), manifest)
        log("source tree: %d files, %.1f MiB (%s)" % (len(manifest), sum(v[0] for v in manifest.values()) / 2**20,
                                                      "linux 6.1 subset" if "linux-source" in str(os.listdir(src)) or os.path.exists(tarball) else "/usr/include"))
        return tree, os.path.join(src, "linux.tar"), os.path.join(src, "manifest.json")

    def start_cluster(self):
        os.makedirs(self.root)
        # one data server's directory on its own small tmpfs, so its disk can really be filled
        self.fill_index = random.Random(self.args.seed).randint(1, 8)
        os.makedirs(self.fill_fs)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%dm" % self.args.fill_fs_mib, "storm-fill",
                        self.fill_fs], check=True)
        os.makedirs(os.path.join(self.fill_fs, "ds%d" % self.fill_index))
        self.fill_bind = os.path.join(self.root, "data", "ds%d" % self.fill_index)
        os.makedirs(self.fill_bind)
        subprocess.run(["mount", "--bind", os.path.join(self.fill_fs, "ds%d" % self.fill_index), self.fill_bind],
                       check=True)
        log("ds%d's directory is on a %d MiB tmpfs (%s)" % (self.fill_index, self.args.fill_fs_mib, self.fill_fs))
        os.makedirs(self.mnt_a)
        os.makedirs(self.mnt_b)
        try:
            extra = ["--mount-options", self.args.mount_options] if self.args.mount_options else []
            self.aq("cluster", "up", "--root", self.root, "--data-servers", "8", "--k", "4", "--m", "2",
                    "--mount", self.mnt_a, "--bin-dir", self.bin, *extra, timeout=300)
        finally:
            if os.path.exists(os.path.join(self.root, "cluster.json")):
                self.read_cluster()
        extra = ["-o", self.args.mount_options] if self.args.mount_options else []
        self.aq("mount", "--root", self.root, "--bin-dir", self.bin, *extra, self.mnt_b, timeout=120)
        pid = self.find_mount_pid(self.mnt_b)
        if pid:
            self.pids.add(pid)
        log("cluster up: meta pid %s, data pids %s, mount A %s, mount B %s (pid %s)"
            % (self.meta_pid, self.data_pids, self.mnt_a, self.mnt_b, pid))

    def write_dataset(self):
        import gzip
        base = "/usr/share/datasets/fashion-mnist"
        with gzip.open(os.path.join(base, "train-images-idx3-ubyte.gz")) as f:
            images = f.read()[16:]
        with gzip.open(os.path.join(base, "train-labels-idx1-ubyte.gz")) as f:
            labels = f.read()[8:]
        n_small, n_shards, per_shard = self.args.small_samples, 4, self.args.shard_samples

        def sample(i):
            return bytes([labels[i]]) + images[i * 784:(i + 1) * 784]

        a = self.mnt_a
        man = {"small": [], "shards": []}
        files = {}
        t = now()
        for c in range(10):
            os.makedirs(os.path.join(a, "dataset/small/%d" % c), exist_ok=True)
        os.makedirs(os.path.join(a, "dataset/shards"), exist_ok=True)
        for i in range(n_small):
            s = sample(i)
            rel = "dataset/small/%d/%05d.bin" % (s[0], i)
            with open(os.path.join(a, rel), "wb") as f:
                f.write(s)
            man["small"].append([rel, zlib.crc32(s)])
            files[rel] = {"sha": hashlib.sha256(s).hexdigest(), "size": len(s)}
        for j in range(n_shards):
            rel = "dataset/shards/shard%d.bin" % j
            blob = b"".join(sample(n_small + j * per_shard + k) for k in range(per_shard))
            with open(os.path.join(a, rel), "wb") as f:
                f.write(blob)
                f.flush()
                os.fsync(f.fileno())
            man["shards"].append([rel, per_shard, [zlib.crc32(blob[k * SAMPLE_BYTES:(k + 1) * SAMPLE_BYTES])
                                                   for k in range(per_shard)]])
            files[rel] = {"sha": hashlib.sha256(blob).hexdigest(), "size": len(blob)}
        path = os.path.join(self.scratch, "dataset.json")
        write_json_atomic(path, man)
        write_json_atomic(os.path.join(self.results, "dataset.json"), {"name": "dataset", "manifest": files})
        log("data set: %d sample files + %d shards of %d samples (%.1f MiB each) in %.1f s"
            % (n_small, n_shards, per_shard, per_shard * SAMPLE_BYTES / 2**20, now() - t))
        for d in range(4):
            os.makedirs(os.path.join(a, "mdstorm/d%d" % d), exist_ok=True)
        os.makedirs(os.path.join(a, "locks"), exist_ok=True)
        with open(os.path.join(a, "locks/counter"), "wb") as f:
            f.write(b"%020d\n" % 0)
        return path

    def start_workers(self, ctx_path):
        plan = [("ingest", 0), ("writer", 0), ("log-reader", 0), ("train", 0)]
        plan += [("mdstorm", i) for i in range(4)] + [("locks", i) for i in range(6)]
        logs = os.path.join(self.scratch, "worker-logs")
        os.makedirs(logs, exist_ok=True)
        for kind, i in plan:
            name = kind if kind in ("ingest", "writer", "log-reader", "train") else "%s%d" % (kind, i)
            out = open(os.path.join(logs, name + ".log"), "w")
            p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "worker", kind, "--ctx", ctx_path,
                                  "--id", str(i)], stdout=out, stderr=subprocess.STDOUT, cwd=self.scratch)
            self.workers.append((name, p))
        log("workers: %s" % ", ".join("%s(pid %d)" % (n, p.pid) for n, p in self.workers))

    # --- thrasher ---------------------------------------------------------------------------
    def event(self, kind, target, start, end=None, **kw):
        e = {"kind": kind, "target": target, "start": start, "end": end}
        e.update(kw)
        self.events.append(e)
        return e

    def kill_data(self, idx, restart_at):
        pid = self.data_pids[idx]
        if not self.ours(pid):
            raise RuntimeError("ds%d pid %d is not ours" % (idx, pid))
        os.kill(pid, signal.SIGKILL)
        t = now()
        self.down[idx] = (t, restart_at, self.event("kill-data", "ds%d" % idx, t, pid=pid))
        log("kill -9 ds%d (pid %d); restart in %.0f s" % (idx, pid, restart_at - t))

    def restart_data(self, idx):
        t = now()
        rc, out = self.aq("cluster", "start-server", str(idx), "--root", self.root, "--bin-dir", self.bin,
                          timeout=180, check=False)
        self.read_cluster()
        _, _, ev = self.down.pop(idx)
        ev["end"] = now()
        ev["restart_seconds"] = round(now() - t, 1)
        if rc != 0:
            self.findings.append({"t": now(), "workload": "thrasher", "kind": "other", "op": "start-server",
                                  "path": "ds%d" % idx, "errno": "", "detail": "exit %d: %s" % (rc, out[-500:])})
        log("restarted ds%d (pid %s) in %.1f s, exit %d" % (idx, self.data_pids.get(idx), now() - t, rc))

    def kill_meta(self, down_s):
        pid = self.meta_pid
        if not self.ours(pid):
            raise RuntimeError("meta pid %d is not ours" % pid)
        os.kill(pid, signal.SIGKILL)
        t = now()
        ev = self.event("kill-meta", "meta", t, pid=pid)
        log("kill -9 aquifer-meta (pid %d); restart in %.0f s" % (pid, down_s))
        time.sleep(down_s)
        rc, out = self.aq("cluster", "up", "--root", self.root, "--bin-dir", self.bin, timeout=300, check=False)
        self.read_cluster()
        ev["end"] = now()
        if rc != 0:
            self.findings.append({"t": now(), "workload": "thrasher", "kind": "other", "op": "cluster up",
                                  "path": "meta", "errno": "", "detail": "exit %d: %s" % (rc, out[-500:])})
        log("restarted aquifer-meta (pid %s) after %.1f s down, exit %d" % (self.meta_pid, now() - t, rc))

    def fill_disk(self):
        # Only ever the small tmpfs: if it is gone (another job's cleanup detached it), the
        # filler would land on the host's disk and fill that instead (seen: 18 GB in 6 minutes).
        with open("/proc/self/mounts") as m:
            mounted = any(len(l.split()) > 2 and l.split()[1] == self.fill_fs and l.split()[2] == "tmpfs"
                          for l in m)
        if not mounted:
            self.findings.append({"t": now(), "workload": "thrasher", "kind": "other", "op": "fill disk",
                                  "path": self.fill_fs, "errno": "",
                                  "detail": "the fill tmpfs is not mounted any more: ENOSPC step skipped"})
            log("fill tmpfs %s is not mounted: ENOSPC step skipped" % self.fill_fs)
            return
        self.filler = os.path.join(self.fill_fs, "filler")
        t = now()
        n = 0
        buf = b"\0" * (1 << 20)
        with open(self.filler, "wb") as f:
            try:
                while n <= self.args.fill_fs_mib:  # a tmpfs of that size is full before this
                    f.write(buf)
                    f.flush()
                    n += 1
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
        st = os.statvfs(self.fill_fs)
        self.fill_event = self.event("enospc", "ds%d" % self.fill_index, t, filled_mib=n,
                                     free_bytes=st.f_bavail * st.f_frsize)
        log("filled ds%d's disk to ENOSPC (%d MiB of filler, %d bytes free)" % (self.fill_index, n,
                                                                               st.f_bavail * st.f_frsize))

    def free_disk(self):
        if self.filler and os.path.exists(self.filler):
            os.unlink(self.filler)
            self.fill_event["end"] = now()
            log("freed ds%d's disk" % self.fill_index)
        self.filler = None

    def thrash(self, deadline):
        a = self.args
        rnd = random.Random(a.seed)
        d = a.duration
        k_int = a.kill_interval
        next_kill = self.t0 + k_int / 2
        meta_times = [self.t0 + d * (j + 0.5) / max(1, int(d // a.meta_interval))
                      for j in range(max(1, int(d // a.meta_interval)))]
        stop_at, stop_done = self.t0 + 0.3 * d, False
        fill_at, fill_done, fill_end = self.t0 + 0.62 * d, False, None
        while now() < deadline:
            t = now()
            for idx in [i for i, v in self.down.items() if t >= v[1]]:
                self.restart_data(idx)
            for idx in [i for i, v in self.stopped.items() if t >= v[1]]:
                os.kill(self.data_pids[idx], signal.SIGCONT)
                self.stopped.pop(idx)[2]["end"] = now()
                log("SIGCONT ds%d" % idx)
            if fill_end and t >= fill_end:
                self.free_disk()
                fill_end = None
            if meta_times and t >= meta_times[0] and not self.down and not self.stopped:
                meta_times.pop(0)
                self.kill_meta(a.meta_down)
                continue
            busy = len(self.down) + len(self.stopped)
            if not stop_done and t >= stop_at and busy < 2:
                idx = rnd.choice([i for i in range(1, 9) if i not in self.down])
                os.kill(self.data_pids[idx], signal.SIGSTOP)
                self.stopped[idx] = (t, t + a.stop_seconds, self.event("sigstop", "ds%d" % idx, t))
                log("SIGSTOP ds%d (pid %d) for %.0f s" % (idx, self.data_pids[idx], a.stop_seconds))
                stop_done = True
                continue
            if not fill_done and t >= fill_at:
                self.fill_disk()
                fill_done, fill_end = True, now() + a.enospc_seconds
            if t >= next_kill:
                if busy < 2:
                    idx = rnd.choice([i for i in range(1, 9) if i not in self.down and i not in self.stopped])
                    self.kill_data(idx, t + rnd.uniform(a.down_min, a.down_max))
                    next_kill += k_int
                # else: try again next tick
            for name, p in self.workers:
                if p.poll() is not None and not getattr(p, "reported", False):
                    p.reported = True
                    self.findings.append({"t": now(), "workload": name, "kind": "other", "op": "worker",
                                          "path": "", "errno": "", "detail": "worker exited early with %s"
                                          % p.returncode})
                    log("worker %s exited early (%s)" % (name, p.returncode))
            time.sleep(0.2)
        # restore everything the thrasher took away
        for idx in list(self.stopped):
            os.kill(self.data_pids[idx], signal.SIGCONT)
            self.stopped.pop(idx)[2]["end"] = now()
            log("SIGCONT ds%d" % idx)
        self.free_disk()
        for idx in list(self.down):
            self.restart_data(idx)

    # --- end checks -------------------------------------------------------------------------
    def stop_workers(self):
        with open(os.path.join(self.scratch, "stop"), "w"):
            pass
        deadline = now() + self.args.stop_wait
        for name, p in self.workers:
            left = deadline - now()
            try:
                p.wait(timeout=max(left, 1))
            except subprocess.TimeoutExpired:
                self.findings.append({"t": now(), "workload": name, "kind": "other", "op": "stop", "path": "",
                                      "errno": "", "detail": "still running %d s after the stop (hung?); "
                                      "killed; its /proc stack: %s" % (self.args.stop_wait, self.stack(p.pid))})
                p.kill()
            if p.returncode not in (0, None, -9) and not getattr(p, "reported", False):
                self.findings.append({"t": now(), "workload": name, "kind": "other", "op": "worker", "path": "",
                                      "errno": "", "detail": "worker exited with %s (see worker-logs/%s.log)"
                                      % (p.returncode, name)})

    def stack(self, pid):
        try:
            with open("/proc/%d/wchan" % pid) as f:
                w = f.read()
            with open("/proc/%d/stat" % pid) as f:
                st = f.read().rsplit(")", 1)[1].split()[0]
            return "state %s wchan %s" % (st, w)
        except OSError:
            return "?"

    def load_results(self):
        res = {}
        for fn in os.listdir(self.results):
            if fn.endswith(".json") and not fn.endswith(".state.json"):
                with open(os.path.join(self.results, fn)) as f:
                    r = json.load(f)
                res[r["name"]] = r
        return res

    def final_verify(self, res, src_manifest_path):
        with open(src_manifest_path) as f:
            src = json.load(f)
        expected = {}
        for name, r in res.items():
            m = r.get("manifest", {})
            if name == "ingest":
                for tree in m.get("trees", []):
                    for f, (size, sha) in src.items():
                        expected[tree + "/" + f] = (name, sha, size)
            else:
                for rel, v in m.items():
                    expected[rel] = (name, v["sha"], v["size"])
        out = {}
        for label, mnt in (("verify-A", self.mnt_a), ("verify-B", self.mnt_b)):
            rec = {"name": label, "ops": 0, "kinds": collections.Counter(), "errors": [], "by_op": {}}
            t = now()
            for rel, (owner, sha, size) in sorted(expected.items()):
                kind, detail, en = None, "", ""
                try:
                    got, n = sha256_file(os.path.join(mnt, rel))
                    if n != size:
                        kind, detail = "short", "read %d bytes, expected %d" % (n, size)
                    elif got != sha:
                        kind, detail = "checksum", "sha256 %s expected %s" % (got, sha)
                except OSError as e:
                    en = errno_name(e.errno)
                    kind, detail = kind_of_errno(en), str(e)
                rec["ops"] += 1
                if kind:
                    rec["kinds"][kind] += 1
                    rec["errors"].append({"t": now(), "workload": label, "kind": kind, "op": "final-read",
                                          "path": rel, "errno": en, "detail": "%s (written by %s)" % (detail, owner)})
            rec["seconds"] = now() - t
            out[label] = rec
            log("%s: %d files re-read in %.1f s, %d bad" % (label, rec["ops"], rec["seconds"], sum(rec["kinds"].values())))
        # the lock counter: every increment, none lost
        incs = sum(r.get("extra", {}).get("increments", 0) for n, r in res.items() if n.startswith("locks"))
        unc = sum(r.get("extra", {}).get("uncertain", 0) for n, r in res.items() if n.startswith("locks"))
        for label, mnt in (("verify-A", self.mnt_a), ("verify-B", self.mnt_b)):
            try:
                with open(os.path.join(mnt, "locks/counter"), "rb") as f:
                    v = int(f.read().strip())
                if not (incs <= v <= incs + unc):
                    out[label]["kinds"]["checksum"] += 1
                    out[label]["errors"].append({"t": now(), "workload": label, "kind": "checksum",
                                                 "op": "lock-counter", "path": "locks/counter", "errno": "",
                                                 "detail": "counter %d, increments %d (+%d uncertain)" % (v, incs, unc)})
            except (OSError, ValueError) as e:
                out[label]["kinds"]["other"] += 1
                out[label]["errors"].append({"t": now(), "workload": label, "kind": "other", "op": "lock-counter",
                                             "path": "locks/counter", "errno": "", "detail": str(e)})
            out[label]["ops"] += 1
        self.check_lock_trace(out)
        log("lock counter: %d increments by %d processes" % (incs, 6))
        return out

    def check_lock_trace(self, out):
        """Every value the counter takes is written once: a value two processes both wrote is an
        update lost between them. Reported with both lock holds (which process, when)."""
        writes = collections.defaultdict(list)
        for i in range(6):
            try:
                with open(os.path.join(self.results, "locks%d.trace" % i)) as f:
                    for line in f:
                        parts = line.split()
                        if len(parts) == 3:
                            writes[int(parts[0])].append((i, float(parts[1]), float(parts[2])))
            except OSError:
                continue
        for value, holds in sorted(writes.items()):
            if len(holds) < 2:
                continue
            out["verify-A"]["kinds"]["checksum"] += 1
            out["verify-A"]["errors"].append({
                "t": holds[0][1], "workload": "verify-A", "kind": "checksum", "op": "lock-trace",
                "path": "locks/counter", "errno": "",
                "detail": "value %d written by %s (lost update)" % (value, ", ".join(
                    "locks%d (mount %s) held +%.3f..+%.3f s" % (w, "A" if w < 3 else "B",
                                                              a - self.t0, b - self.t0)
                    for w, a, b in holds))})

    def rates(self, res):
        """Mean work per second in seconds with a data server down (killed or stopped) against
        seconds with all up; seconds with the metadata server down, or in which the workload
        was not running its timed work, are left out."""
        def state_at(s):
            st = "up"
            for e in self.events:
                end = e["end"] if e["end"] is not None else float("inf")
                if e["start"] < s + 1 and end > s:
                    if e["kind"] == "kill-meta":
                        return "meta-down"
                    if e["kind"] in ("kill-data", "sigstop"):
                        st = "server-down"
            return st

        out = {}
        for name, key in (("train", "train"), ("ingest", "ingest")):
            r = res.get(name)
            if not r:
                continue
            tl = {int(k): v for k, v in r["timeline"].items()}
            active = set(r.get("active_seconds", []))
            sums = collections.defaultdict(list)
            t_end = self.t0 + self.args.duration
            for s in active:
                if s < self.t0 + 5 or s >= t_end - 1:
                    continue
                sums[state_at(s)].append(tl.get(s, 0))
            m = {k: (sum(v) / len(v) if v else None) for k, v in sums.items()}
            up, down = m.get("up"), m.get("server-down")
            out[key] = {"per_s_all_up": up, "per_s_server_down": down, "per_s_meta_down": m.get("meta-down"),
                        "seconds": {k: len(v) for k, v in sums.items()},
                        "ratio_down_vs_up": (down / up) if up and down is not None else None}
        return out

    def active_failures(self, t):
        act = []
        for e in self.events:
            end = e["end"] if e["end"] is not None else float("inf")
            if e["start"] - 1 <= t <= end + 5:
                act.append("%s %s (%+.0f..%s s)" % (e["kind"], e["target"], e["start"] - self.t0,
                                                    "%+.0f" % (end - self.t0) if end != float("inf") else "?"))
        return act

    # --- teardown ---------------------------------------------------------------------------
    def teardown(self):
        with self.teardown_lock:
            if self.torn_down:
                return
            self.torn_down = True
        log("teardown")
        for name, p in self.workers:
            if p.poll() is None:
                p.kill()
        for pid in list(self.pids):
            if pid_alive(pid) and self.ours(pid):
                try:
                    os.kill(pid, signal.SIGCONT)
                except OSError:
                    pass
        for m in (self.mnt_b, self.mnt_a):
            subprocess.run(["fusermount3", "-uz", m], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if self.mnt_b:
            pid = self.find_mount_pid(self.mnt_b)
            if pid:
                self.pids.add(pid)
        live = [pid for pid in self.pids if pid_alive(pid) and self.ours(pid)]
        for pid in live:
            os.kill(pid, signal.SIGTERM)
        deadline = now() + 10
        while now() < deadline and any(pid_alive(p) for p in live):
            time.sleep(0.05)
        for pid in live:
            if pid_alive(pid) and self.ours(pid):
                log("SIGKILL pid %d" % pid)
                os.kill(pid, signal.SIGKILL)
        for name, p in self.workers:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                log("worker %s (pid %d) did not exit" % (name, p.pid))
        for m in (self.fill_bind, self.fill_fs):
            if m and os.path.ismount(m):
                subprocess.run(["umount", "-l", m], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        log("teardown done")

    def watchdog(self, limit):
        def run():
            time.sleep(limit)
            log("OVERALL TIMEOUT after %d s: tearing down" % limit)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(60)
            self.teardown()
            os._exit(3)
        threading.Thread(target=run, daemon=True).start()

    # --- main -------------------------------------------------------------------------------
    def run(self):
        a = self.args
        log("scratch %s, seed %d, duration %d s, kill every %.0f s (down %.0f-%.0f s), meta kill every %.0f s "
            "(down %.0f s), SIGSTOP %.0f s, ENOSPC %.0f s" % (self.scratch, a.seed, a.duration, a.kill_interval,
                                                              a.down_min, a.down_max, a.meta_interval, a.meta_down,
                                                              a.stop_seconds, a.enospc_seconds))
        self.watchdog(a.duration + a.overall_extra)
        os.makedirs(self.results)
        self.copy_binaries()
        tree, tarball, src_manifest = self.prepare_sources()
        self.start_cluster()
        ds_manifest = self.write_dataset()
        ctx = {"mnt_a": self.mnt_a, "mnt_b": self.mnt_b, "results": self.results,
               "stop_file": os.path.join(self.scratch, "stop"), "src_tree": tree, "src_tar": tarball,
               "src_manifest": src_manifest, "dataset_manifest": ds_manifest, "seed": a.seed}
        ctx_path = os.path.join(self.scratch, "ctx.json")
        write_json_atomic(ctx_path, ctx)
        self.t0 = now()
        self.start_workers(ctx_path)
        self.thrash(self.t0 + a.duration)
        log("storm over after %.0f s; stopping workloads" % (now() - self.t0))
        t_end = now()
        self.stop_workers()
        checks = {}
        t = now()
        rc, out = self.aq("repair", "wait", "--root", self.root, "--timeout", str(a.repair_timeout),
                          timeout=a.repair_timeout + 60, check=False)
        checks["repair_wait"] = {"exit": rc, "seconds": round(now() - t, 1), "tail": out[-800:]}
        log("aquifer repair wait: exit %d in %.1f s" % (rc, now() - t))
        rc, out = self.aq("fsck", "--root", self.root, "--verbose", timeout=600, check=False)
        checks["fsck"] = {"exit": rc, "tail": out[-3000:]}
        log("aquifer fsck: exit %d\n%s" % (rc, out[-2000:]))
        if rc != 0:
            time.sleep(30)
            rc2, out2 = self.aq("fsck", "--root", self.root, "--verbose", timeout=600, check=False)
            checks["fsck_again_after_30s"] = {"exit": rc2, "tail": out2[-3000:]}
            log("aquifer fsck again 30 s later (diagnostic only): exit %d" % rc2)
        rc, out = self.aq("status", "--root", self.root, timeout=60, check=False)
        checks["status"] = {"exit": rc, "tail": out[-1500:]}
        res = self.load_results()
        verify = self.final_verify(res, src_manifest)
        return self.report(res, verify, checks, t_end)

    def report(self, res, verify, checks, t_end):
        minutes = max((t_end - self.t0) / 60.0, 1e-6)
        rows = []
        errors = list(self.findings)
        order = ["ingest", "writer", "log-reader", "train"] + ["mdstorm%d" % i for i in range(4)] + \
                ["locks%d" % i for i in range(6)]
        for name in order + [n for n in res if n not in order and n != "dataset"]:
            r = res.get(name)
            if r is None:
                rows.append({"workload": name, "ops": 0, "kinds": {"other": 1}, "per_min": [], "missing": True})
                errors.append({"t": now(), "workload": name, "kind": "other", "op": "results", "path": "",
                               "errno": "", "detail": "no results file (worker never started?)"})
                continue
            tl = collections.Counter()
            for k, v in r["timeline"].items():
                if int(k) < t_end + 5:
                    tl[int((int(k) - self.t0) // 60)] += v
            per_min = [round(tl.get(i, 0)) for i in range(int(minutes + 0.999))]
            rows.append({"workload": name, "ops": round(r["ops"]), "kinds": r["kinds"], "per_min": per_min,
                         "by_op": {k: round(v) for k, v in r["by_op"].items()}})
            errors.extend(r["errors"])
        for label in ("verify-A", "verify-B"):
            v = verify[label]
            rows.append({"workload": label, "ops": v["ops"], "kinds": dict(v["kinds"]), "per_min": []})
            errors.extend(v["errors"])
        for e in self.findings:
            pass
        thr = collections.Counter(e["kind"] for e in self.findings if e["workload"] == "thrasher")
        rates = self.rates(res)
        fsck_ok = checks["fsck"]["exit"] == 0
        repair_ok = checks["repair_wait"]["exit"] == 0
        for e in errors:
            e["at_s"] = round(e["t"] - self.t0, 1)
            e["failures_active"] = self.active_failures(e["t"])
        # table
        print()
        hdr = "%-11s %9s " % ("workload", "ops") + " ".join("%8s" % k for k in KINDS) + "  %9s  %s" % ("ops/min", "per minute")
        print(hdr)
        print("-" * len(hdr))
        total_err = 0
        for row in rows:
            ks = row["kinds"]
            total_err += sum(ks.values())
            opm = "%9.0f" % (row["ops"] / minutes) if not row["workload"].startswith("verify") else "%9s" % "-"
            print("%-11s %9d " % (row["workload"], row["ops"]) + " ".join("%8d" % ks.get(k, 0) for k in KINDS)
                  + "  %s  %s" % (opm, "/".join(str(x) for x in row["per_min"])))
        print("-" * len(hdr))
        driver_errs = [e for e in self.findings]
        total_err += len([e for e in driver_errs if e["workload"] not in {r["workload"] for r in rows}])
        print("thrasher events: %s" % ", ".join("%s %s @%+.0fs..%s" % (e["kind"], e["target"], e["start"] - self.t0,
              "%+.0fs" % (e["end"] - self.t0) if e["end"] else "?") for e in self.events))
        print("repair wait: exit %d (%.1f s); fsck: exit %d%s" % (
            checks["repair_wait"]["exit"], checks["repair_wait"]["seconds"], checks["fsck"]["exit"],
            "" if fsck_ok else " (again after 30 s: exit %s)" % checks.get("fsck_again_after_30s", {}).get("exit")))
        for k, v in rates.items():
            f = lambda x: "-" if x is None else "%.1f" % x
            print("%s per s: all up %s, a data server down %s, meta down %s; ratio down/up %s (seconds %s)" % (
                k, f(v["per_s_all_up"]), f(v["per_s_server_down"]), f(v["per_s_meta_down"]),
                "-" if v["ratio_down_vs_up"] is None else "%.2f" % v["ratio_down_vs_up"], v["seconds"]))
        errors.sort(key=lambda e: e["t"])
        if errors:
            print("\nERRORS (%d; first 60 shown, all in %s/summary.json):" % (len(errors), self.scratch))
            for e in errors[:60]:
                print("  %+7.1fs %-10s %-8s %-6s op=%s path=%s %s | active: %s" % (
                    e["at_s"], e["workload"], e["kind"], e["errno"], e["op"], e["path"], e["detail"][:300],
                    "; ".join(e["failures_active"]) or "none"))
        ok = not errors and fsck_ok and repair_ok and not thr
        summary = {
            "ok": ok, "seed": self.args.seed, "duration_s": self.args.duration, "scratch": self.scratch,
            "workloads": rows, "errors_total": len(errors), "errors": errors,
            "events": [dict(e, start_s=round(e["start"] - self.t0, 1),
                            end_s=round(e["end"] - self.t0, 1) if e["end"] else None) for e in self.events],
            "checks": checks, "rates": rates,
            "params": {k: v for k, v in vars(self.args).items() if k != "func"},
        }
        write_json_atomic(os.path.join(self.scratch, "summary.json"), summary)
        print("\nSTORM-JSON " + json.dumps({k: v for k, v in summary.items() if k not in ("errors", "checks")}
                                           | {"errors_by_kind": dict(collections.Counter(e["kind"] for e in errors)),
                                              "fsck_exit": checks["fsck"]["exit"],
                                              "repair_wait_exit": checks["repair_wait"]["exit"]}))
        print("\nstorm: %s" % ("PASS: no application-visible error, fsck clean, every file read back equal"
                               if ok else "FAIL: %d errors, fsck exit %d, repair wait exit %d"
                               % (len(errors), checks["fsck"]["exit"], checks["repair_wait"]["exit"])))
        return 0 if ok else 1


def run_main(args):
    d = args.duration
    k = args.kill_interval or max(20.0, min(60.0, d / 9.0))
    args.kill_interval = k
    args.down_min = args.down_min if args.down_min is not None else k / 3
    args.down_max = args.down_max if args.down_max is not None else 2 * k / 3
    args.meta_interval = args.meta_interval or 600.0
    args.meta_down = args.meta_down if args.meta_down is not None else max(3.0, k / 6)
    args.stop_seconds = args.stop_seconds if args.stop_seconds is not None else k / 2
    args.enospc_seconds = args.enospc_seconds if args.enospc_seconds is not None else k
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 10**6)
    drv = Driver(args)

    def on_signal(sig, frm):
        raise Interrupted("signal %d" % sig)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    rc = 2
    try:
        rc = drv.run()
    except Interrupted as e:
        log("interrupted (%s)" % e)
        rc = 130
    except Exception as e:  # setup failures: report, tear down, fail
        import traceback
        traceback.print_exc()
        log("storm driver failed: %s" % e)
        rc = 2
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        drv.teardown()
        keep = args.keep or rc != 0
        if keep:
            log("scratch kept: %s (cluster logs in root/logs, workers in worker-logs)" % drv.scratch)
        else:
            summ = os.path.join(drv.scratch, "summary.json")
            if os.path.exists(summ):
                dst = "/tmp/aquifer-storm-summary-%s.json" % time.strftime("%Y%m%dT%H%M%S")
                shutil.copy(summ, dst)
                log("summary: %s" % dst)
            shutil.rmtree(drv.scratch, ignore_errors=True)
    return rc


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--duration", type=int, required=True, help="seconds of storm")
    r.add_argument("--seed", type=int)
    r.add_argument("--keep", action="store_true", help="keep the scratch directory even on success")
    r.add_argument("--kill-interval", type=float, help="s between data-server kills (default D/9 in [20, 60])")
    r.add_argument("--down-min", type=float, help="s a killed server stays down, at least (interval/3)")
    r.add_argument("--down-max", type=float, help="s a killed server stays down, at most (2*interval/3)")
    r.add_argument("--meta-interval", type=float, help="s between aquifer-meta kills (600; at least one)")
    r.add_argument("--meta-down", type=float, help="s aquifer-meta stays down (interval/6, >= 3)")
    r.add_argument("--stop-seconds", type=float, help="s of the one SIGSTOP (interval/2)")
    r.add_argument("--enospc-seconds", type=float, help="s the filled disk stays full (interval)")
    r.add_argument("--fill-fs-mib", type=int, default=1024, help="tmpfs size of the server whose disk fills")
    r.add_argument("--small-samples", type=int, default=2000)
    r.add_argument("--shard-samples", type=int, default=6000)
    r.add_argument("--stop-wait", type=float, default=240, help="s the workloads get to finish after the storm")
    r.add_argument("--repair-timeout", type=float, default=300)
    r.add_argument("--overall-extra", type=float, default=840, help="s allowed beyond DURATION before teardown")
    r.add_argument("--usr-include", action="store_true", help="ingest /usr/include instead of the linux subset")
    r.add_argument("--mount-options", default="",
                   help="aquifer-mount options for both mounts (e.g. dir_leases=1)")
    w = sub.add_parser("worker")
    w.add_argument("kind", choices=sorted(WORKERS))
    w.add_argument("--ctx", required=True)
    w.add_argument("--id", type=int, default=0)
    args = ap.parse_args()
    if args.cmd == "worker":
        worker_main(args)
        return 0
    return run_main(args)


if __name__ == "__main__":
    sys.exit(main())
