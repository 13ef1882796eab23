#!/usr/bin/python3
"""Aquifer's main job, Python half: transform, train, evaluate, checksum manifests, summary.

Run with /usr/bin/python3 (Debian's python3-torch, python3-pil, python3-numpy). Every command
works on any directory: a plain local one or an Aquifer mount. The driver,
run_lifecycle.sh, calls these commands in order; each appends one JSON line per stage to the
--results file (stage, seconds, and the stage's figures), and `summary` prints them and checks
the run's assertions.

Commands:
  transform  IDX gz files -> one PNG per sample in SPLIT/CLASS/ folders + SPLIT/labels.csv
  train      small CNN, PyTorch DataLoader with worker processes reading PNG files
  evaluate   accuracy on the test split
  manifest-files / manifest-tar   sha256 of every file under a directory / inside a tarball
  verify     compares a directory tree against a manifest
  summary    prints every stage's time and throughput; exits 1 if an assertion failed
"""

import argparse
import csv
import gzip
import hashlib
import io
import json
import multiprocessing
import os
import stat
import struct
import sys
import tarfile
import time
import warnings

import numpy as np

# torch warns when DataLoader workers outnumber cores; the job asks for 2-4 workers on purpose.
warnings.filterwarnings("ignore", message=".*worker processes in total.*")

CLASSES = ["T-shirt_top", "Trouser", "Pullover", "Dress", "Coat",
           "Sandal", "Shirt", "Sneaker", "Bag", "Ankle_boot"]
TRAIN_TOTAL = 60000
TEST_TOTAL = 10000
MEAN, STD = 0.2860, 0.3530  # Fashion-MNIST pixel statistics (0..1 scale)


def log(msg):
    print(msg, flush=True)


def append_result(path, record):
    if not path:
        return
    with open(path, "a") as f:
        f.write(json.dumps(record, sort_keys=True) + "\n")


def mib(n_bytes):
    return n_bytes / (1024.0 * 1024.0)


# ---------------------------------------------------------------------------------------------
# transform

def read_idx_images(path):
    """Returns uint8 array [n, rows, cols] from a gzip'd IDX3 file."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, n, rows, cols = struct.unpack(">IIII", data[:16])
    if magic != 2051:
        raise ValueError(f"{path}: bad IDX3 magic {magic}")
    arr = np.frombuffer(data, dtype=np.uint8, offset=16)
    if arr.size != n * rows * cols:
        raise ValueError(f"{path}: {arr.size} pixel bytes, expected {n * rows * cols}")
    return arr.reshape(n, rows, cols)


def read_idx_labels(path):
    """Returns uint8 array [n] from a gzip'd IDX1 file."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, n = struct.unpack(">II", data[:8])
    if magic != 2049:
        raise ValueError(f"{path}: bad IDX1 magic {magic}")
    arr = np.frombuffer(data, dtype=np.uint8, offset=8)
    if arr.size != n:
        raise ValueError(f"{path}: {arr.size} labels, expected {n}")
    return arr


def split_counts(samples):
    """Splits a total sample count into (train, test) in the data set's 6:1 ratio."""
    samples = max(2, min(samples, TRAIN_TOTAL + TEST_TOTAL))
    train = min(TRAIN_TOTAL, round(samples * TRAIN_TOTAL / (TRAIN_TOTAL + TEST_TOTAL)))
    test = min(TEST_TOTAL, samples - train)
    return max(1, train), max(1, test)


# Set in the parent before the pool forks; workers read them copy-on-write.
_SPLITS = {}


def _write_pngs(task):
    """Pool worker: encodes samples [start, end) of `split` and writes one PNG file each."""
    from PIL import Image
    split, start, end, out = task
    images, labels = _SPLITS[split]
    rows = []
    written = 0
    for i in range(start, end):
        label = int(labels[i])
        rel = f"{split}/{CLASSES[label]}/{split}_{i:05d}.png"
        buf = io.BytesIO()
        Image.fromarray(images[i], mode="L").save(buf, format="PNG")
        blob = buf.getvalue()
        with open(os.path.join(out, rel), "wb") as f:
            f.write(blob)
        written += len(blob)
        rows.append((rel, label, hashlib.sha256(blob).hexdigest()))
    return rows, written


def cmd_transform(args):
    t0 = time.monotonic()
    n_train, n_test = split_counts(args.samples)
    raw = args.raw
    _SPLITS["train"] = (read_idx_images(os.path.join(raw, "train-images-idx3-ubyte.gz"))[:n_train],
                        read_idx_labels(os.path.join(raw, "train-labels-idx1-ubyte.gz"))[:n_train])
    _SPLITS["test"] = (read_idx_images(os.path.join(raw, "t10k-images-idx3-ubyte.gz"))[:n_test],
                       read_idx_labels(os.path.join(raw, "t10k-labels-idx1-ubyte.gz"))[:n_test])
    read_s = time.monotonic() - t0
    for split in ("train", "test"):
        for c in CLASSES:
            os.makedirs(os.path.join(args.out, split, c), exist_ok=True)
    tasks = []
    for split, n in (("train", n_train), ("test", n_test)):
        for start in range(0, n, args.batch):
            tasks.append((split, start, min(n, start + args.batch), args.out))
    rows = {"train": [], "test": []}
    total_bytes = 0
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(args.procs) as pool:
        for part, nbytes in pool.imap_unordered(_write_pngs, tasks):
            total_bytes += nbytes
            for rel, label, digest in part:
                rows[rel.split("/", 1)[0]].append((rel, label, digest))
    manifest = {}
    for split in ("train", "test"):
        rows[split].sort()
        text = io.StringIO(newline="")
        w = csv.writer(text, lineterminator="\n")
        w.writerow(["path", "label", "class"])
        for rel, label, digest in rows[split]:
            w.writerow([rel.split("/", 1)[1], label, CLASSES[label]])
            manifest[rel] = {"type": "file", "sha256": digest}
        blob = text.getvalue().encode()
        with open(os.path.join(args.out, split, "labels.csv"), "wb") as f:
            f.write(blob)
        manifest[f"{split}/labels.csv"] = {"type": "file",
                                           "sha256": hashlib.sha256(blob).hexdigest()}
    if args.manifest:
        with open(args.manifest, "w") as f:
            json.dump(manifest, f)
    secs = time.monotonic() - t0
    files = n_train + n_test
    log(f"transform: {files} PNG files ({n_train} train, {n_test} test) + 2 labels.csv, "
        f"{mib(total_bytes):.1f} MiB in {secs:.1f} s (IDX read {read_s:.1f} s) = "
        f"{files / secs:.0f} files/s, {args.procs} processes")
    append_result(args.results, {"stage": args.tag, "seconds": secs, "files": files,
                                 "train": n_train, "test": n_test, "bytes": total_bytes,
                                 "files_per_s": files / secs})


# ---------------------------------------------------------------------------------------------
# train / evaluate

def _torch():
    import torch
    return torch


class PngDataset:
    """Samples listed in SPLIT/labels.csv: (1x28x28 float tensor, label)."""

    def __init__(self, split_dir):
        self.split_dir = split_dir
        with open(os.path.join(split_dir, "labels.csv"), newline="") as f:
            r = csv.reader(f)
            header = next(r)
            if header[:2] != ["path", "label"]:
                raise ValueError(f"{split_dir}/labels.csv: unexpected header {header}")
            self.items = [(row[0], int(row[1])) for row in r]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        from PIL import Image
        torch = _torch()
        rel, label = self.items[i]
        with Image.open(os.path.join(self.split_dir, rel)) as im:
            arr = np.asarray(im, dtype=np.float32)
        x = torch.from_numpy((arr / 255.0 - MEAN) / STD).unsqueeze(0)
        return x, label


def make_model():
    """Two 3x3 conv layers (16, 32 channels) with max-pooling, then 64 hidden units: small
    enough to train at a few thousand samples/s on two CPU cores."""
    nn = _torch().nn
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 7 * 7, 64), nn.ReLU(), nn.Linear(64, 10))


def _worker_init(_):
    _torch().set_num_threads(1)


def _loader(dataset, args, shuffle, seed):
    torch = _torch()
    g = torch.Generator()
    g.manual_seed(seed)
    extra = {"worker_init_fn": _worker_init, "prefetch_factor": 4} if args.workers > 0 else {}
    return torch.utils.data.DataLoader(
        dataset, batch_size=args.batch, shuffle=shuffle, num_workers=args.workers,
        generator=g, **extra)


def cmd_train(args):
    torch = _torch()
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    ds = PngDataset(os.path.join(args.data, "train"))
    model = make_model()
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    start_epoch = 0
    if args.resume and os.path.exists(args.model):
        ckpt = torch.load(args.model)
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["opt"])
        start_epoch = ckpt["epoch"]
    loss_fn = torch.nn.CrossEntropyLoss()
    t_all = time.monotonic()
    epochs = []
    for epoch in range(start_epoch, start_epoch + args.epochs):
        model.train()
        t0 = time.monotonic()
        seen, loss_sum, correct = 0, 0.0, 0
        for x, y in _loader(ds, args, shuffle=True, seed=args.seed + epoch):
            opt.zero_grad()
            out = model(x)
            loss = loss_fn(out, y)
            loss.backward()
            opt.step()
            seen += len(y)
            loss_sum += loss.item() * len(y)
            correct += (out.argmax(1) == y).sum().item()
        secs = time.monotonic() - t0
        rec = {"epoch": epoch + 1, "seconds": secs, "samples": seen,
               "samples_per_s": seen / secs, "loss": loss_sum / seen,
               "train_accuracy": correct / seen}
        epochs.append(rec)
        log(f"{args.tag}: epoch {epoch + 1}: {seen} samples in {secs:.1f} s = "
            f"{seen / secs:.0f} samples/s, loss {rec['loss']:.4f}, "
            f"train accuracy {100 * rec['train_accuracy']:.1f}%")
    os.makedirs(os.path.dirname(os.path.abspath(args.model)), exist_ok=True)
    tmp = args.model + ".tmp"
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(),
                "epoch": start_epoch + args.epochs}, tmp)
    os.replace(tmp, args.model)
    secs = time.monotonic() - t_all
    samples = sum(e["samples"] for e in epochs)
    append_result(args.results, {"stage": args.tag, "seconds": secs, "samples": samples,
                                 "samples_per_s": samples / secs if secs else 0.0,
                                 "epochs": epochs, "workers": args.workers})


def cmd_evaluate(args):
    torch = _torch()
    torch.set_num_threads(args.threads)
    ds = PngDataset(os.path.join(args.data, "test"))
    model = make_model()
    model.load_state_dict(torch.load(args.model)["model"])
    model.eval()
    t0 = time.monotonic()
    correct, seen = 0, 0
    h = hashlib.sha256()
    with torch.no_grad():
        for x, y in _loader(ds, args, shuffle=False, seed=0):
            pred = model(x).argmax(1)
            correct += (pred == y).sum().item()
            seen += len(y)
            h.update(pred.numpy().astype(np.uint8).tobytes())
    secs = time.monotonic() - t0
    acc = correct / seen if seen else 0.0
    log(f"{args.tag}: accuracy {100 * acc:.2f}% ({correct}/{seen}) on the test split, "
        f"{secs:.1f} s = {seen / secs:.0f} samples/s, predictions sha256 {h.hexdigest()[:16]}")
    append_result(args.results, {"stage": args.tag, "seconds": secs, "samples": seen,
                                 "correct": correct, "accuracy": acc,
                                 "samples_per_s": seen / secs if secs else 0.0,
                                 "predictions_sha256": h.hexdigest()})


# ---------------------------------------------------------------------------------------------
# checksums

def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def _hash_entry(item):
    root, rel = item
    p = os.path.join(root, rel)
    try:
        st = os.lstat(p)
        if stat.S_ISLNK(st.st_mode):
            return rel, {"type": "symlink", "target": os.readlink(p)}, 0
        if stat.S_ISREG(st.st_mode):
            return rel, {"type": "file", "sha256": sha256_file(p)}, st.st_size
        return rel, {"type": "other"}, 0
    except OSError as e:
        return rel, {"type": "error", "error": f"{type(e).__name__}: {e}"}, 0


def walk_tree(root):
    """Relative paths of every non-directory entry under `root`, sorted."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames:
            out.append(os.path.relpath(os.path.join(dirpath, name), root))
        for name in dirnames:  # os.walk lists symlinks to directories as dirnames
            if os.path.islink(os.path.join(dirpath, name)):
                out.append(os.path.relpath(os.path.join(dirpath, name), root))
    out.sort()
    return out


def hash_tree(root, procs):
    """{relpath: entry} for every file and symlink under `root`, and the bytes read."""
    items = [(root, rel) for rel in walk_tree(root)]
    result, total = {}, 0
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(procs) as pool:
        for rel, entry, size in pool.imap_unordered(_hash_entry, items, chunksize=64):
            result[rel] = entry
            total += size
    return result, total


def cmd_manifest_files(args):
    t0 = time.monotonic()
    manifest, total = hash_tree(args.dir, args.procs)
    with open(args.out, "w") as f:
        json.dump(manifest, f)
    log(f"manifest: {len(manifest)} entries, {mib(total):.1f} MiB under {args.dir} in "
        f"{time.monotonic() - t0:.1f} s")


def cmd_manifest_tar(args):
    """sha256 of every regular file and the target of every symlink in a tarball, names with
    the leading `--strip` path components removed, only members under `--prefix` if given."""
    t0 = time.monotonic()
    manifest, total = {}, 0
    prefix = args.prefix.rstrip("/") + "/" if args.prefix else ""
    with tarfile.open(args.tar, "r|*") as tf:
        for m in tf:
            if prefix and not m.name.startswith(prefix):
                continue
            rel = m.name[len(args.strip):] if args.strip and m.name.startswith(args.strip) \
                else m.name
            rel = rel.lstrip("/")
            if m.isreg():
                h = hashlib.sha256()
                f = tf.extractfile(m)
                while True:
                    b = f.read(1 << 20)
                    if not b:
                        break
                    h.update(b)
                manifest[rel] = {"type": "file", "sha256": h.hexdigest()}
                total += m.size
            elif m.issym():
                manifest[rel] = {"type": "symlink", "target": m.linkname}
            elif m.islnk():
                # A hard link: same contents as its target, which came earlier in the stream.
                target = m.linkname[len(args.strip):] if args.strip else m.linkname
                manifest[rel] = dict(manifest.get(target.lstrip("/"), {"type": "file"}))
    with open(args.out, "w") as f:
        json.dump(manifest, f)
    log(f"manifest-tar: {len(manifest)} entries, {mib(total):.1f} MiB from {args.tar} in "
        f"{time.monotonic() - t0:.1f} s")


def cmd_verify(args):
    with open(args.manifest) as f:
        expected = json.load(f)
    t0 = time.monotonic()
    actual, total = hash_tree(args.dir, args.procs)
    secs = time.monotonic() - t0
    missing = sorted(set(expected) - set(actual))
    extra = sorted(set(actual) - set(expected))
    differ = sorted(r for r in set(expected) & set(actual) if expected[r] != actual[r])
    ok = not missing and not extra and not differ
    for kind, names in (("missing", missing), ("unexpected", extra), ("different", differ)):
        for r in names[:10]:
            log(f"  {kind}: {r} expected={expected.get(r)} actual={actual.get(r)}")
    log(f"{args.tag}: {'OK' if ok else 'FAILED'}: {len(expected) - len(missing) - len(differ)}"
        f"/{len(expected)} entries match under {args.dir}; {len(missing)} missing, "
        f"{len(differ)} different, {len(extra)} unexpected; {mib(total):.1f} MiB read in "
        f"{secs:.1f} s = {mib(total) / secs if secs else 0:.1f} MiB/s, "
        f"{len(actual) / secs if secs else 0:.0f} files/s")
    append_result(args.results, {"stage": args.tag, "seconds": secs, "files": len(actual),
                                 "bytes": total, "ok": ok, "missing": len(missing),
                                 "different": len(differ), "unexpected": len(extra),
                                 "expected": len(expected),
                                 "files_per_s": len(actual) / secs if secs else 0.0,
                                 "mib_per_s": mib(total) / secs if secs else 0.0})
    return 0 if ok else 1


# ---------------------------------------------------------------------------------------------
# summary

def _throughput(r):
    parts = []
    if "files_per_s" in r:
        parts.append(f"{r['files_per_s']:.0f} files/s")
    if "mib_per_s" in r:
        parts.append(f"{r['mib_per_s']:.1f} MiB/s")
    elif r.get("bytes") and r.get("seconds"):
        parts.append(f"{mib(r['bytes']) / r['seconds']:.1f} MiB/s")
    if "samples_per_s" in r:
        parts.append(f"{r['samples_per_s']:.0f} samples/s")
    return ", ".join(parts)


def cmd_summary(args):
    records = []
    with open(args.results) as f:
        for line in f:
            line = line.strip()
            if line:
                records.append(json.loads(line))
    log("")
    log(f"{'stage':<32} {'seconds':>9}  throughput / result")
    log("-" * 78)
    by = {}
    for r in records:
        by.setdefault(r["stage"], r)
        extra = _throughput(r)
        if "accuracy" in r:
            extra += f", accuracy {100 * r['accuracy']:.2f}%"
        if "ok" in r:
            extra += ", checksums " + ("OK" if r["ok"] else "FAILED")
        if "note" in r:
            extra += (", " if extra else "") + r["note"]
        if "files" in r and "files_per_s" not in r:
            extra = f"{r['files']} files" + (", " + extra if extra else "")
        log(f"{r['stage']:<32} {r.get('seconds', 0):>9.1f}  {extra}")
    failures = []
    alone = [r for r in records if r["stage"] == "train"]
    together = [r for r in records if r["stage"] == "train_side_by_side"]
    if alone and together and alone[0]["epochs"] and together[0]["epochs"]:
        a = alone[0]["epochs"][-1]["samples_per_s"]
        b = together[0]["epochs"][-1]["samples_per_s"]
        log(f"side by side: training {a:.0f} samples/s alone (last epoch), {b:.0f} samples/s "
            f"while a second pipeline ingests and transforms ({100 * b / a:.0f}%)")
    for r in records:
        if "ok" in r and not r["ok"]:
            failures.append(f"{r['stage']}: checksums differ")
    ev = by.get("evaluate")
    if args.min_accuracy is not None:
        if not ev:
            failures.append("no evaluate stage ran")
        elif ev["accuracy"] < args.min_accuracy:
            failures.append(f"accuracy {100 * ev['accuracy']:.2f}% < "
                            f"{100 * args.min_accuracy:.0f}%")
    for r in records:
        if r["stage"].startswith("evaluate_") and ev:
            if (r["correct"], r["predictions_sha256"]) != (ev["correct"], ev["predictions_sha256"]):
                failures.append(f"{r['stage']} gave {r['correct']} correct, evaluate gave "
                                f"{ev['correct']} (predictions differ)")
            else:
                log(f"{r['stage']}: same predictions as evaluate ({r['correct']}/{r['samples']})")
    for name in args.require or []:
        if name not in by:
            failures.append(f"stage {name} did not run")
    for f in failures:
        log(f"FAILED: {f}")
    if not failures:
        log("lifecycle: all checks passed")
    return 1 if failures else 0


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)

    t = sub.add_parser("transform", help="IDX gz -> PNG per sample + labels.csv")
    t.add_argument("--raw", required=True, help="directory with the four *-idx?-ubyte.gz files")
    t.add_argument("--out", required=True)
    t.add_argument("--samples", type=int, default=TRAIN_TOTAL + TEST_TOTAL)
    t.add_argument("--procs", type=int, default=max(2, os.cpu_count() or 2))
    t.add_argument("--batch", type=int, default=500, help="samples per pool task")
    t.add_argument("--manifest", help="write sha256 of every PNG written (JSON) here")

    for name in ("train", "evaluate"):
        s = sub.add_parser(name)
        s.add_argument("--data", required=True, help="transform's output (train/, test/)")
        s.add_argument("--model", required=True, help="checkpoint file")
        s.add_argument("--workers", type=int, default=2, help="DataLoader worker processes")
        s.add_argument("--batch", type=int, default=64)
        s.add_argument("--threads", type=int, default=2, help="torch threads in the trainer")
        if name == "train":
            s.add_argument("--epochs", type=int, default=3)
            s.add_argument("--lr", type=float, default=1e-3)
            s.add_argument("--seed", type=int, default=1)
            s.add_argument("--resume", action="store_true", help="continue from --model")

    mf = sub.add_parser("manifest-files")
    mf.add_argument("--dir", required=True)
    mf.add_argument("--out", required=True)
    mf.add_argument("--procs", type=int, default=2)
    mt = sub.add_parser("manifest-tar")
    mt.add_argument("--tar", required=True)
    mt.add_argument("--out", required=True)
    mt.add_argument("--prefix", default="", help="only members under this path")
    mt.add_argument("--strip", default="", help="leading path removed from member names")
    v = sub.add_parser("verify")
    v.add_argument("--dir", required=True)
    v.add_argument("--manifest", required=True)
    v.add_argument("--procs", type=int, default=2)
    s = sub.add_parser("summary")
    s.add_argument("--min-accuracy", type=float, help="fraction, e.g. 0.85")
    s.add_argument("--require", action="append", help="stage that must have run (repeatable)")

    for sp in sub.choices.values():
        sp.add_argument("--results", default="", help="append a JSON line per stage here")
        sp.add_argument("--tag", default=sp.prog.split()[-1], help="stage name in --results")
    args = p.parse_args(argv)
    fn = {"transform": cmd_transform, "train": cmd_train, "evaluate": cmd_evaluate,
          "manifest-files": cmd_manifest_files, "manifest-tar": cmd_manifest_tar,
          "verify": cmd_verify, "summary": cmd_summary}[args.cmd]
    return fn(args) or 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
