#!/usr/bin/env python3
"""Compare two rolled-back copies of one failed table: <ours> (e.g. hudi-keeper's) and <hudis>
(Hudi's own rollback, the `<dir>-hudi-rollback` copy made by `run.sh generate`).

Compared, with instant times that only one side has (the rollback instant R, completion times)
replaced by placeholders:
  * data files per partition (parquet base files, log files; .crc files ignored);
  * the data-table timeline files, and the metadata table's timeline files;
  * leftovers under .hoodie/.temp (markers), .hoodie/.heartbeat and the lock file.
Prints a JSON report; exit 0 iff nothing differs.
"""
import json
import os
import re
import sys

INSTANT_RE = re.compile(r"^(\d{14,20})(?:_(\d{14,20}))?(\..+)$")


def files_under(root, rel):
    out = []
    base = os.path.join(root, rel)
    if not os.path.isdir(base):
        return out
    for dp, dns, fns in os.walk(base):
        for fn in fns:
            if fn.endswith(".crc"):
                continue
            out.append(os.path.relpath(os.path.join(dp, fn), root))
    return sorted(out)


def timeline_dir(root, meta=".hoodie"):
    props = os.path.join(root, meta, "hoodie.properties")
    layout = "1"
    if os.path.exists(props):
        for line in open(props, encoding="utf-8"):
            if line.startswith("hoodie.timeline.layout.version="):
                layout = line.strip().split("=", 1)[1]
    return os.path.join(meta, "timeline") if layout == "2" else meta


def timeline_files(root, meta=".hoodie"):
    tdir = os.path.join(root, timeline_dir(root, meta))
    if not os.path.isdir(tdir):
        return []
    return sorted(f for f in os.listdir(tdir)
                  if os.path.isfile(os.path.join(tdir, f)) and INSTANT_RE.match(f))


def data_files(root):
    out = {}
    for part in sorted(os.listdir(root)):
        p = os.path.join(root, part)
        if part.startswith(".") or not os.path.isdir(p):
            continue
        if not os.path.exists(os.path.join(p, ".hoodie_partition_metadata")):
            continue
        out[part] = sorted(f for f in os.listdir(p)
                           if not f.endswith(".crc") and (f.endswith(".parquet") or ".log." in f))
    return out


def normalize(names, known):
    """Replace instant times that are not in `known` (times both sides share) by R1, R2, ... and
    completion times by C."""
    mapping = {}
    out = []
    for n in names:
        m = INSTANT_RE.match(n)
        if not m:
            out.append(n)
            continue
        t, c, rest = m.group(1), m.group(2), m.group(3)
        base_t = t[:17]
        suffix = t[17:]
        if base_t not in known:
            mapping.setdefault(base_t, "R%d" % (len(mapping) + 1))
            base_t = mapping[base_t]
        out.append(base_t + suffix + ("_C" if c else "") + rest)
    return sorted(out)


def times_in(names):
    s = set()
    for n in names:
        m = INSTANT_RE.match(n)
        if m:
            s.add(m.group(1)[:17])
    return s


def compare(a, b):
    return {"only_in_ours": sorted(set(a) - set(b)), "only_in_hudis": sorted(set(b) - set(a))}


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    ours, hudis = sys.argv[1], sys.argv[2]
    report = {"ours": ours, "hudis": hudis, "differences": {}}
    tl_o, tl_h = timeline_files(ours), timeline_files(hudis)
    known = times_in(tl_o) & times_in(tl_h)
    d = compare(normalize(tl_o, known), normalize(tl_h, known))
    report["timeline"] = {"ours": normalize(tl_o, known), "hudis": normalize(tl_h, known)}
    if d["only_in_ours"] or d["only_in_hudis"]:
        report["differences"]["timeline"] = d
    mdt = os.path.join(".hoodie", "metadata", ".hoodie")
    if os.path.isdir(os.path.join(ours, mdt)) or os.path.isdir(os.path.join(hudis, mdt)):
        mo, mh = timeline_files(ours, mdt), timeline_files(hudis, mdt)
        mknown = times_in(mo) & times_in(mh) | known
        d = compare(normalize(mo, mknown), normalize(mh, mknown))
        if d["only_in_ours"] or d["only_in_hudis"]:
            report["differences"]["mdt_timeline"] = d
    do, dh = data_files(ours), data_files(hudis)
    for part in sorted(set(do) | set(dh)):
        d = compare(do.get(part, []), dh.get(part, []))
        if d["only_in_ours"] or d["only_in_hudis"]:
            report["differences"].setdefault("data_files", {})[part] = d
    for rel in (os.path.join(".hoodie", ".temp"), os.path.join(".hoodie", ".heartbeat")):
        d = compare(files_under(ours, rel), files_under(hudis, rel))
        if d["only_in_ours"] or d["only_in_hudis"]:
            report["differences"][rel] = d
    lo, lh = os.path.exists(os.path.join(ours, ".hoodie", "lock")), os.path.exists(os.path.join(hudis, ".hoodie", "lock"))
    if lo != lh:
        report["differences"]["lock_file"] = {"ours": lo, "hudis": lh}
    report["same"] = not report["differences"]
    print(json.dumps(report, indent=2))
    sys.exit(0 if report["same"] else 1)


if __name__ == "__main__":
    main()
