#!/usr/bin/python3
"""Scrapes a daemon's /metrics with the reference parser (python3-prometheus-client) and
compares snapshots, for tests/mount/metrics_test.sh.

  metrics_probe.py snap HOST:PORT OUT.json      parse /metrics, store every sample
  metrics_probe.py sum SNAP.json NAME [LABEL=VALUE ...]
                                               sum of the samples of NAME with those labels
  metrics_probe.py delta BEFORE AFTER NAME [LABEL=VALUE ...]
                                               the same sum in AFTER minus in BEFORE
  metrics_probe.py count SNAP.json NAME [LABEL=VALUE ...]
                                               how many samples match

`snap` fails (exit 1) when the text does not parse, when a family's type is missing, when a
counter's name breaks Prometheus's conventions (a counter family must not itself end in
_total once parsed, and every aquifer_* name must be in docs/metrics.md if DOCS is set), or
when a sample value is negative or NaN for a counter.
"""
import json
import math
import os
import re
import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def snap(address, out):
    with urllib.request.urlopen("http://%s/metrics" % address, timeout=10) as r:
        ctype = r.headers.get("Content-Type", "")
        text = r.read().decode("utf-8")
    if not ctype.startswith("text/plain"):
        sys.exit("content type %r is not the text format" % ctype)
    samples = []
    families = 0
    docs = os.environ.get("DOCS")
    catalogue = open(docs).read() if docs else None
    problems = []
    for family in text_string_to_metric_families(text):
        families += 1
        if family.type not in ("counter", "gauge", "histogram", "summary", "untyped"):
            problems.append("%s: type %s" % (family.name, family.type))
        if family.name.startswith("aquifer_"):
            if not re.fullmatch(r"aquifer_[a-z0-9_]+", family.name):
                problems.append("%s: not snake_case" % family.name)
            if catalogue is not None:
                shown = family.name + ("_total" if family.type == "counter" else "")
                if shown not in catalogue:
                    problems.append("%s: not in %s" % (shown, docs))
        for s in family.samples:
            if family.type == "counter" and (math.isnan(s.value) or s.value < 0):
                problems.append("%s%s = %s" % (s.name, s.labels, s.value))
            samples.append([s.name, s.labels, s.value])
    if problems:
        sys.exit("bad metrics from %s:\n  %s" % (address, "\n  ".join(problems)))
    with open(out, "w") as f:
        json.dump(samples, f)
    print("%s: %d families, %d samples" % (address, families, len(samples)))


def total(path, name, selectors):
    want = dict(s.split("=", 1) for s in selectors)
    n, value = 0, 0.0
    for sname, labels, v in json.load(open(path)):
        if sname == name and all(labels.get(k) == x for k, x in want.items()):
            n += 1
            value += v
    return n, value


def main(argv):
    if len(argv) >= 4 and argv[1] == "snap":
        return snap(argv[2], argv[3])
    if len(argv) >= 4 and argv[1] in ("sum", "count"):
        n, value = total(argv[2], argv[3], argv[4:])
        print(n if argv[1] == "count" else "%d" % round(value))
        return
    if len(argv) >= 5 and argv[1] == "delta":
        _, before = total(argv[2], argv[4], argv[5:])
        _, after = total(argv[3], argv[4], argv[5:])
        print("%d" % round(after - before))
        return
    sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
