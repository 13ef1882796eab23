#!/usr/bin/python3
"""File-system benchmark through an Aquifer mount and, in the same run, a local directory.

Usage: fs_bench.py --mount DIR --local DIR [--bindfs DIR] [--remount CMD] [--json FILE]
                   [--seq-mib 256] [--small-files 3000] [--meta-files 2000] [--untar TAR]
                   [--groups seq,small,dataloader,ingest,meta]

"Cold" means every cache is empty, the mount's own included: before each cold phase the kernel's
caches are dropped, and with --remount CMD (a shell command that unmounts --mount and mounts it
again; bench/mount/run.sh passes one) the Aquifer mount is remounted too, so its stripe cache,
attribute and name caches, session and connections start empty, as on a host that just mounted.

With --bindfs (a bindfs mount of a local directory: FUSE with no network and no erasure coding),
a third column shows what the kernel's FUSE round trips alone cost on this machine.

Rows (each measured on every directory; the table shows mount/local, bindfs/local, mount/bindfs):
  seq_write_mib_s    one 256 MiB file, 1 MiB writes, final fsync included
  seq_read_mib_s     the same file read cold (echo 3 > /proc/sys/vm/drop_caches when allowed,
                     else a fresh open after the page cache was dropped with fadvise), every
                     1 MiB block verified against the written pattern
  rand_read_4k_iops  fio: 4 KiB random reads, O_DIRECT, 4 jobs, 10 s, on the sequential file
  small_create_s     3,000 files of 4..256 KiB in 100 class folders: files created per second
  small_read_s       the same files read cold in random order by 2 threads with a CRC check
  meta_<op>_s        2,000 empty files, one thread: create, stat (cold), rename, unlink per
                     second
  cp_r_files_s       cp -r of a small-file tree like the one above (made once on local disk
                     beside --local) into the directory: files per second
  rsync_a_files_s    rsync -a of the same tree into the directory: files per second
  dataloader_samples_s  one PyTorch epoch over the small-file tree (cold), DataLoader with 2
                     workers, batch 64, shuffled, each sample the file's bytes: samples per
                     second (skipped when /usr/bin/python3 has no torch)
  untar_files_s      with --untar TAR (an uncompressed tar on local disk, e.g. a part of the
                     Linux tree the main job ingests): tar -x of it into the directory, entries
                     per second (files, directories and links)
These are the rows of ../shared/BENCHMARKS.md, where the same workloads were measured on local
ext4, bindfs, MooseFS, CephFS and GlusterFS on this machine kind.
Random seeds are fixed and printed. Needs fio for the IOPS row (skipped if absent).
"""
import argparse, json, os, random, shutil, subprocess, sys, threading, time, zlib

MIB = 1 << 20


def drop_caches(paths):
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return "drop_caches"
    except OSError:
        for p in paths:  # best effort without the privilege
            try:
                fd = os.open(p, os.O_RDONLY)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                os.close(fd)
            except OSError:
                pass
        return "fadvise"


def make_cold(remount):
    """The cold-phase preparation of one column: drop the kernel's caches, then remount."""
    def cold(paths):
        how = drop_caches(paths)
        if remount:
            subprocess.run(remount, shell=True, check=True)
            how += "+remount"
        return how
    return cold


def block(i):
    """The 1 MiB pattern of block i: cheap to make and to verify."""
    head = i.to_bytes(8, "little") * 8
    return (head + bytes(range(256)) * 4)[:1024] * 1024


def seq_write(d, mib):
    path = os.path.join(d, "seq.bin")
    fd = os.open(path, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o644)
    t = time.perf_counter()
    for i in range(mib):
        os.write(fd, block(i))
    os.fsync(fd)
    os.close(fd)
    return mib / (time.perf_counter() - t), path


def seq_read(path, mib):
    fd = os.open(path, os.O_RDONLY)
    t = time.perf_counter()
    for i in range(mib):
        b = os.read(fd, MIB)
        if b != block(i):
            raise SystemExit(f"verify failed at block {i} of {path}")
    os.close(fd)
    return mib / (time.perf_counter() - t)


def rand_read_iops(path):
    if shutil.which("fio") is None:
        return None
    out = subprocess.run(
        ["fio", "--name=rr", f"--filename={path}", "--rw=randread", "--bs=4k", "--direct=1",
         "--numjobs=4", "--time_based", "--runtime=10", "--ioengine=psync", "--group_reporting",
         "--randseed=1234", "--output-format=json"], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        print(out.stderr, file=sys.stderr)
        return None
    return json.loads(out.stdout)["jobs"][0]["read"]["iops"]


def small_files(d, count, seed):
    rng = random.Random(seed)
    root = os.path.join(d, "small")
    os.mkdir(root)
    files = []
    for c in range(100):
        os.mkdir(os.path.join(root, f"class{c:03d}"))
    payload = rng.randbytes(256 * 1024)
    t = time.perf_counter()
    for i in range(count):
        size = rng.randint(4 * 1024, 256 * 1024)
        path = os.path.join(root, f"class{i % 100:03d}", f"img{i:05d}.bin")
        off = rng.randint(0, len(payload) - size)
        data = payload[off:off + size]
        with open(path, "wb") as f:
            f.write(data)
        files.append((path, zlib.crc32(data)))
    create_rate = count / (time.perf_counter() - t)
    return create_rate, files


def small_read(files, seed, threads=2):
    order = list(files)
    random.Random(seed).shuffle(order)
    errors = []

    def work(part):
        for path, crc in part:
            with open(path, "rb") as f:
                if zlib.crc32(f.read()) != crc:
                    errors.append(path)

    parts = [order[i::threads] for i in range(threads)]
    t = time.perf_counter()
    ts = [threading.Thread(target=work, args=(p,)) for p in parts]
    for x in ts:
        x.start()
    for x in ts:
        x.join()
    rate = len(order) / (time.perf_counter() - t)
    if errors:
        raise SystemExit(f"{len(errors)} small files failed their checksum, e.g. {errors[0]}")
    return rate


def make_source_tree(root, count, seed):
    """The small-file tree for the ingest rows, on local disk (made once, outside the timing)."""
    if os.path.isdir(root):
        shutil.rmtree(root)
    os.mkdir(root)
    rng = random.Random(seed)
    payload = rng.randbytes(256 * 1024)
    for c in range(100):
        os.mkdir(os.path.join(root, f"class{c:03d}"))
    for i in range(count):
        size = rng.randint(4 * 1024, 256 * 1024)
        off = rng.randint(0, len(payload) - size)
        with open(os.path.join(root, f"class{i % 100:03d}", f"img{i:05d}.bin"), "wb") as f:
            f.write(payload[off:off + size])
    return count


def copy_rate(argv, count):
    t = time.perf_counter()
    subprocess.run(argv, check=True, timeout=3600)
    return count / (time.perf_counter() - t)


def dataloader_rate(files, seed):
    try:
        import torch
        from torch.utils.data import DataLoader, Dataset
    except ImportError:
        return None
    paths = [p for p, _ in files]

    class Files(Dataset):
        def __len__(self):
            return len(paths)

        def __getitem__(self, i):
            with open(paths[i], "rb") as f:
                data = f.read()
            return torch.frombuffer(bytearray(data), dtype=torch.uint8).float().mean()

    loader = DataLoader(Files(), batch_size=64, shuffle=True, num_workers=2,
                        generator=torch.Generator().manual_seed(seed))
    n = 0
    t = time.perf_counter()
    for batch in loader:
        n += len(batch)
    rate = n / (time.perf_counter() - t)
    if n != len(paths):
        raise SystemExit(f"dataloader read {n} samples of {len(paths)}")
    return rate


def metadata(d, count, cold=drop_caches):
    root = os.path.join(d, "meta")
    os.mkdir(root)
    names = [os.path.join(root, f"f{i:05d}") for i in range(count)]
    out = {}
    t = time.perf_counter()
    for n in names:
        os.close(os.open(n, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    out["meta_create_s"] = count / (time.perf_counter() - t)
    cold([])  # stats are of names no cache holds
    t = time.perf_counter()
    for n in names:
        os.stat(n)
    out["meta_stat_s"] = count / (time.perf_counter() - t)
    t = time.perf_counter()
    for n in names:
        os.rename(n, n + ".r")
    out["meta_rename_s"] = count / (time.perf_counter() - t)
    t = time.perf_counter()
    for n in names:
        os.unlink(n + ".r")
    out["meta_unlink_s"] = count / (time.perf_counter() - t)
    return out


def run(d, args, label, cold=drop_caches):
    res = {}
    groups = set(args.groups.split(","))
    if "seq" in groups:
        print(f"[{label}] sequential write {args.seq_mib} MiB", file=sys.stderr)
        res["seq_write_mib_s"], path = seq_write(d, args.seq_mib)
        how = cold([path])
        print(f"[{label}] cold sequential read ({how})", file=sys.stderr)
        res["seq_read_mib_s"] = seq_read(path, args.seq_mib)
        print(f"[{label}] 4 KiB random read IOPS", file=sys.stderr)
        iops = rand_read_iops(path)
        if iops is not None:
            res["rand_read_4k_iops"] = iops
        os.unlink(path)
    if groups & {"small", "dataloader"}:
        print(f"[{label}] small files x{args.small_files}", file=sys.stderr)
        res["small_create_s"], files = small_files(d, args.small_files, seed=args.seed)
    if "small" in groups:
        how = cold([p for p, _ in files])
        print(f"[{label}] cold small-file reads ({how})", file=sys.stderr)
        res["small_read_s"] = small_read(files, seed=args.seed + 1)
    if "dataloader" in groups:
        cold([p for p, _ in files])
        print(f"[{label}] DataLoader epoch over the small files", file=sys.stderr)
        rate = dataloader_rate(files, seed=args.seed + 2)
        if rate is not None:
            res["dataloader_samples_s"] = rate
    if "ingest" in groups:
        res.update(ingest(d, args, label))
    if "meta" in groups:
        print(f"[{label}] metadata x{args.meta_files}", file=sys.stderr)
        res.update(metadata(d, args.meta_files, cold))
        shutil.rmtree(os.path.join(d, "meta"))
    if groups & {"small", "dataloader"}:
        shutil.rmtree(os.path.join(d, "small"))
    return res


def ingest(d, args, label):
    res = {}
    print(f"[{label}] ingest: cp -r and rsync -a of {args.small_files} small files", file=sys.stderr)
    res["cp_r_files_s"] = copy_rate(["cp", "-r", args.source, os.path.join(d, "cp_tree")],
                                    args.small_files)
    if shutil.which("rsync"):
        res["rsync_a_files_s"] = copy_rate(
            ["rsync", "-a", args.source + "/", os.path.join(d, "rsync_tree")], args.small_files)
    shutil.rmtree(os.path.join(d, "cp_tree"))
    shutil.rmtree(os.path.join(d, "rsync_tree"), ignore_errors=True)
    if args.untar:
        print(f"[{label}] tar -x of {args.untar} ({args.untar_entries} entries)", file=sys.stderr)
        os.mkdir(os.path.join(d, "untar"))
        res["untar_files_s"] = copy_rate(["tar", "-xf", args.untar, "-C", os.path.join(d, "untar")],
                                         args.untar_entries)
        shutil.rmtree(os.path.join(d, "untar"))
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mount", required=True)
    ap.add_argument("--local", required=True)
    ap.add_argument("--bindfs", help="a bindfs mount of a local directory: a third column")
    ap.add_argument("--remount", help="shell command that remounts --mount (cold phases)")
    ap.add_argument("--json")
    ap.add_argument("--seq-mib", type=int, default=256)
    ap.add_argument("--small-files", type=int, default=3000)
    ap.add_argument("--meta-files", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=20260)
    ap.add_argument("--untar", help="an uncompressed tar on local disk: the untar row")
    ap.add_argument("--groups", default="seq,small,dataloader,ingest,meta",
                    help="row groups to run, comma-separated: seq (write, cold read, 4 KiB IOPS), "
                         "small (create, cold read), dataloader, ingest (cp -r, rsync, untar), "
                         "meta")
    args = ap.parse_args()
    if args.untar:
        listing = subprocess.run(["tar", "-tf", args.untar], check=True, capture_output=True,
                                 text=True, timeout=600)
        args.untar_entries = len(listing.stdout.splitlines())
    print(f"seed={args.seed}", file=sys.stderr)
    args.source = os.path.join(os.path.dirname(os.path.abspath(args.local)), "ingest-source")
    if "ingest" in args.groups.split(","):
        make_source_tree(args.source, args.small_files, args.seed + 3)
    local = run(args.local, args, "local")
    bindfs = run(args.bindfs, args, "bindfs") if args.bindfs else {}
    mount = run(args.mount, args, "mount", make_cold(args.remount))

    def ratio(a, b):
        return f"{a / b:.3f}" if a is not None and b else "-"

    print(f"{'row':<22}{'mount':>11}{'local':>11}{'bindfs':>11}{'mount/local':>13}"
          f"{'bindfs/local':>14}{'mount/bindfs':>14}")
    for k in mount:
        m, l, b = mount[k], local.get(k), bindfs.get(k)
        print(f"{k:<22}{m:>11.1f}{(l or 0):>11.1f}{(b or 0):>11.1f}{ratio(m, l):>13}"
              f"{ratio(b, l):>14}{ratio(m, b):>14}")
    out = {"seed": args.seed, "mount_cold": "remount" if args.remount else "kernel caches only",
           "mount": mount, "local": local,
           "ratio": {k: mount[k] / local[k] for k in mount if local.get(k)}}
    if bindfs:
        out["bindfs"] = bindfs
        out["ratio_bindfs_local"] = {k: bindfs[k] / local[k] for k in bindfs if local.get(k)}
        out["ratio_mount_bindfs"] = {k: mount[k] / bindfs[k] for k in mount if bindfs.get(k)}
    print(json.dumps(out))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    shutil.rmtree(args.source, ignore_errors=True)


if __name__ == "__main__":
    main()
