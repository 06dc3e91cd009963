#!/usr/bin/env python3
"""usage: diff.py [--restore [--mdt-deleted] [--restore-point T]] [--task-tokens] <ours> <hudis>

Default: compare two rolled-back copies of one failed table: <ours> (e.g. hudi-keeper's) and <hudis>
(Hudi's own rollback, the `<dir>-hudi-rollback` copy made by `run.sh generate`).

Compared, with instant times that only one side has (the rollback instant R, completion times)
replaced by placeholders:
  * data files per partition (parquet base files, log files; .crc files ignored);
  * the data-table timeline files, and the metadata table's timeline files;
  * leftovers under .hoodie/.temp (markers), .hoodie/.heartbeat and the lock file.

--restore: compare two copies of ONE table, each restored once (e.g. by hudi-keeper and by Hudi's
restoreToSavepoint/restoreToInstant), whose restore and child-rollback instant times differ:
  * data files per partition by name; parquet files and log files by SHA-1, except rollback
    command-block log files (v6 MOR), which embed the rollback's own instant time: those are
    compared by name and size, and per file slice the set of (target instant, command type) of
    its command blocks must be equal (in whichever log versions they are);
  * data-table timeline: every instant that is not a new restore must be the same file for file
    (same instants, same states, same completion times); each copy must hold exactly one restore
    that the other copy does not have (same time on both sides counts as shared), it must be
    completed, and its requested/inflight/completed files must match the other copy's modulo
    the times; no rollback instant newer than the restore point may remain (the restore point is
    the latest remaining completed commit/deltacommit/replacecommit, or --restore-point T);
  * metadata table: timeline file names and data file names, with the times that only one copy
    has replaced by placeholders;
  * hoodie.properties (comment lines ignored), .hoodie/.temp, .hoodie/.heartbeat, the lock file.
  Partition directories without data files and MDT index backups (.hoodie/.metadata_<p>_<ts>) are
  reported under "info" only.
  --mdt-deleted: <ours> deleted its metadata table instead of restoring it (as Hudi's
  restoreToSavepoint does when it cannot restore it): <ours> must have no .hoodie/metadata and no
  metadata partitions in hoodie.properties; the metadata tables are then not compared.

--task-tokens: metadata-table log files holding only HFile data blocks compare without
their write token: a Spark writer names them with its task's `<partition>-<stage>-<attempt>`, which
hudi-keeper (like Hudi's Java client) writes as 0-0-0. Their log versions, blocks and the deltacommits
naming them are still compared.

Prints a JSON report; exit 0 iff nothing differs, 1 if something differs, 2 on bad usage.
"""
import hashlib
import json
import os
import re
import struct
import sys

TASK_TOKENS = False
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
    """partition -> data file names. A partition is a folder holding .hoodie_partition_metadata, at any
    depth (multi-level layouts), keyed by its path relative to the base path with '/' (the folder names
    as on disk, URL-encoded values included); the base path itself is partition "" (non-partitioned)."""
    out = {}
    for dp, dns, fns in os.walk(root):
        # .hoodie (and any other dot folder) holds no partitions
        dns[:] = sorted(d for d in dns if not d.startswith("."))
        if ".hoodie_partition_metadata" not in fns:
            continue
        rel = os.path.relpath(dp, root)
        part = "" if rel == "." else rel.replace(os.sep, "/")
        out[part] = sorted(f for f in fns
                           if not f.endswith(".crc") and (f.endswith(".parquet") or ".log." in f))
    return dict(sorted(out.items()))


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


# ------------------------------------------------------------------------------------- --restore
TIME_RE = re.compile(r"(?<!\d)(\d{17})(?=\d{0,3}(?!\d))")
WRITE_ACTIONS = {"commit", "deltacommit", "replacecommit"}


def parse_instant_file(name):
    """(requested time, completion time or None, action, state) of a timeline file name."""
    m = INSTANT_RE.match(name)
    if not m:
        return None
    t, c, rest = m.group(1), m.group(2), m.group(3)[1:]
    parts = rest.split(".")
    if parts == ["inflight"]:  # COW's legacy <T>.inflight
        return t, c, "commit", "inflight"
    if len(parts) == 1:
        return t, c, parts[0], "completed"
    return t, c, parts[0], parts[1]


def normalize_times(names, known):
    """Replace every 17-digit instant time not in `known` by R1, R2, ... in ascending time order (the
    same time gets the same placeholder everywhere), and completion times (`_<C>`) by `_C`."""
    stripped = []
    for n in names:
        m = INSTANT_RE.match(n)
        stripped.append(m.group(1) + "_C" + m.group(3) if m and m.group(2) else n)
    unknown = sorted({t for n in stripped for t in TIME_RE.findall(n) if t not in known})
    mapping = {t: "R%d" % (i + 1) for i, t in enumerate(unknown)}
    return sorted(TIME_RE.sub(lambda x: mapping.get(x.group(1), x.group(1)), n) for n in stripped)


def sha1(path):
    h = hashlib.sha1()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


HEADER_TYPES = {0: "INSTANT_TIME", 1: "TARGET_INSTANT_TIME", 2: "SCHEMA", 3: "COMMAND_BLOCK_TYPE"}


def command_block(path):
    """If the log file starts with a command block (Hudi log format v1: magic `#HUDI#`, block size,
    format version, block type 0 = COMMAND_BLOCK, then the header as count + (key, length, bytes)),
    return its header without INSTANT_TIME (the time of the rollback that wrote it); else None."""
    with open(path, "rb") as f:
        b = f.read(4096)
    if len(b) < 26 or b[:6] != b"#HUDI#":
        return None
    _size, _version, btype, count = struct.unpack(">qiii", b[6:26])
    if btype != 0:
        return None
    header, off = {}, 26
    try:
        for _ in range(count):
            key, ln = struct.unpack(">ii", b[off:off + 8])
            header[HEADER_TYPES.get(key, str(key))] = b[off + 8:off + 8 + ln].decode("utf-8", "replace")
            off += 8 + ln
    except struct.error:
        return {"unparsed": True}
    header.pop("INSTANT_TIME", None)
    return header


def data_file_facts(root, part, name):
    path = os.path.join(root, part, name)
    cb = command_block(path) if ".log." in name else None
    if cb is not None:
        return {"command_block": True, "size": os.path.getsize(path)}
    return {"sha1": sha1(path), "size": os.path.getsize(path)}


def command_blocks_by_file_group(root, files):
    """partition/.<fileId>_<baseInstant> -> sorted command-block headers (target instant, command type)
    of that file slice's log files: which instants got a rollback block, whatever the log version."""
    out = {}
    for part, names in files.items():
        for name in names:
            if ".log." not in name:
                continue
            cb = command_block(os.path.join(root, part, name))
            if cb is not None:
                out.setdefault(os.path.join(part, name[:name.index(".log.")]), []).append(json.dumps(cb, sort_keys=True))
    return {k: sorted(v) for k, v in out.items()}


def timeline_instants(names):
    """(requested time, action) -> {"files", "completed"} of one timeline listing. A savepoint has the
    time of the commit it keeps, hence the action in the key."""
    out = {}
    for n in names:
        p = parse_instant_file(n)
        if not p:
            continue
        t, _c, action, state = p
        i = out.setdefault((t, action), {"files": [], "completed": False})
        i["files"].append(n)
        i["completed"] |= state == "completed"
    return out


def restore_side(names, shared_restores, restore_point_arg):
    """Facts of one restored copy: its new restore instant(s), restore point, stray rollbacks."""
    inst = timeline_instants(names)
    new_restores = sorted(t for (t, a) in inst if a == "restore" and t not in shared_restores)
    writes = sorted(t for (t, a), i in inst.items() if a in WRITE_ACTIONS and i["completed"])
    point = restore_point_arg or (writes[-1] if writes else None)
    newer_rollbacks = sorted(f for (t, a), i in inst.items() if a == "rollback" and point and t > point
                             for f in i["files"])
    return inst, {"new_restores": new_restores,
                  "new_restore_completed": [t for t in new_restores if inst[(t, "restore")]["completed"]],
                  "restore_point": point,
                  "rollbacks_newer_than_restore_point": newer_rollbacks}


def properties(root, meta=".hoodie"):
    p = os.path.join(root, meta, "hoodie.properties")
    if not os.path.exists(p):
        return {}
    out = {}
    for line in open(p, encoding="utf-8"):
        line = line.rstrip("\n")
        if line and not line.startswith("#") and "=" in line:
            k, v = line.split("=", 1)
            out[k] = v
    return out


def mdt_data_files(root):
    base = os.path.join(root, ".hoodie", "metadata")
    out = []
    if not os.path.isdir(base):
        return out
    for part in sorted(os.listdir(base)):
        p = os.path.join(base, part)
        if part.startswith(".") or not os.path.isdir(p):
            continue
        for dp, _dns, fns in os.walk(p):
            for fn in fns:
                if not fn.endswith(".crc") and fn != ".hoodie_partition_metadata":
                    out.append(os.path.relpath(os.path.join(dp, fn), base))
    return sorted(out)


BLOCK_TYPES = {0: "COMMAND", 1: "DELETE", 2: "CORRUPT", 3: "AVRO_DATA", 4: "HFILE_DATA", 5: "PARQUET_DATA",
               6: "CDC_DATA"}
COMMAND_TYPES = {"0": "ROLLBACK_BLOCK"}


def log_blocks(path):
    """The blocks of a Hudi log file (format v1: `#HUDI#`, block size, version, type, header as count +
    (key, length, bytes), ...; the next block starts 14 + size bytes after this one's magic), each as
    its type plus its INSTANT_TIME and, for command blocks, TARGET_INSTANT_TIME and COMMAND_BLOCK_TYPE
    headers. A file that does not parse ends its list with an "unparsed at <offset>" entry."""
    with open(path, "rb") as f:
        b = f.read()
    out, off = [], 0
    while off < len(b):
        if b[off:off + 6] != b"#HUDI#" or off + 26 > len(b):
            out.append({"unparsed_at": off})
            break
        size, _version, btype, count = struct.unpack(">qiii", b[off + 6:off + 26])
        block = {"type": BLOCK_TYPES.get(btype, str(btype))}
        h = off + 26
        try:
            for _ in range(count):
                key, ln = struct.unpack(">ii", b[h:h + 8])
                name = HEADER_TYPES.get(key, str(key))
                if name != "SCHEMA":
                    block[name] = b[h + 8:h + 8 + ln].decode("utf-8", "replace")
                h += 8 + ln
        except struct.error:
            out.append({"unparsed_at": off})
            break
        if "COMMAND_BLOCK_TYPE" in block:
            block["COMMAND_BLOCK_TYPE"] = COMMAND_TYPES.get(block["COMMAND_BLOCK_TYPE"], block["COMMAND_BLOCK_TYPE"])
        out.append(block)
        if size <= 0:
            out.append({"unparsed_at": off})
            break
        off += 14 + size
    return out


def untokened_names(files, blocks):
    """--task-tokens: basename -> basename without its write token, for the MDT log files that hold
    only HFile data blocks (`blocks`: mdt_log_blocks of `files`)."""
    out = {}
    for f in files:
        bl = blocks.get(f) or []
        if bl and all(b.get("type") == "HFILE_DATA" for b in bl):
            n = os.path.basename(f)
            out[n] = re.sub(r"(\.log\.\d+)_\d+-\d+-\d+$", r"\1_<task>", n)
    return out


def renamed(ren, text):
    for a, b in ren.items():
        text = text.replace(a, b)
    return text


def side_times(names, known):
    """time -> placeholder for the 17-digit times in `names` that are not in `known`: R1, R2, ... in
    ascending order (a 20-digit suffixed time keeps its suffix: <R>006 -> R1006)."""
    unknown = sorted({t for n in names for t in TIME_RE.findall(n) if t not in known})
    return {t: "R%d" % (i + 1) for i, t in enumerate(unknown)}


def subst(mapping, text):
    return TIME_RE.sub(lambda x: mapping.get(x.group(1), x.group(1)), text)


def mdt_log_blocks(root, files):
    """<MDT partition>/<log file> -> its blocks (see log_blocks), for the MDT's log files."""
    base = os.path.join(root, ".hoodie", "metadata")
    return {f: log_blocks(os.path.join(base, f)) for f in files if ".log." in os.path.basename(f)}


def mdt_deltacommit_summary(root, mdt_meta, instant):
    """The completed MDT deltacommit <instant>: per partition, its write stats' file names, file ids,
    previous commits, record counts and log files (v6: JSON commit metadata). None if absent; a
    string if it is not JSON (v8/v9 write Avro)."""
    path = os.path.join(root, timeline_dir(root, mdt_meta), instant + ".deltacommit")
    cands = [path] + [os.path.join(os.path.dirname(path), n) for n in sorted(os.listdir(os.path.dirname(path)))
                      if n.startswith(instant + "_") and n.endswith(".deltacommit")] \
        if os.path.isdir(os.path.dirname(path)) else [path]
    for c in cands:
        if os.path.isfile(c):
            try:
                md = json.load(open(c, encoding="utf-8"))
            except (ValueError, UnicodeDecodeError):
                return "not JSON: %s" % os.path.basename(c)
            out = {}
            for part, stats in sorted((md.get("partitionToWriteStats") or {}).items()):
                out[part] = sorted(({"file": os.path.basename(w.get("path") or ""), "fileId": w.get("fileId"),
                                     "prevCommit": w.get("prevCommit"), "numWrites": w.get("numWrites"),
                                     "numInserts": w.get("numInserts"), "numUpdateWrites": w.get("numUpdateWrites"),
                                     "numDeletes": w.get("numDeletes"),
                                     "logFiles": sorted(w.get("logFiles") or [])} for w in stats),
                                   key=lambda x: json.dumps(x, sort_keys=True))
            return out
    return None


def diff_rollback_mdt(ours, hudis, known, report, diffs):
    """Rollback mode, metadata table: timeline names; data file names under .hoodie/metadata/<p>/
    (log files named with version and write token, base files); the blocks of each log file by kind,
    instant and (command blocks) target instant and command; and the completed MDT deltacommit at each
    data-table rollback instant R (its partitionToWriteStats). Times only one
    side has are replaced by R1, R2, ... per side in ascending order."""
    mdt = os.path.join(".hoodie", "metadata", ".hoodie")
    if not (os.path.isdir(os.path.join(ours, mdt)) or os.path.isdir(os.path.join(hudis, mdt))):
        return
    mo, mh = timeline_files(ours, mdt), timeline_files(hudis, mdt)
    fo, fh = mdt_data_files(ours), mdt_data_files(hudis)
    tl_o, tl_h = timeline_files(ours), timeline_files(hudis)
    mknown = (times_in(mo) & times_in(mh)) | known | \
        ({t for n in fo for t in TIME_RE.findall(n)} & {t for n in fh for t in TIME_RE.findall(n)})
    bo, bh = mdt_log_blocks(ours, fo), mdt_log_blocks(hudis, fh)
    ren_o, ren_h = {}, {}
    if TASK_TOKENS:
        ren_o, ren_h = untokened_names(fo, bo), untokened_names(fh, bh)
        fo, fh = [renamed(ren_o, n) for n in fo], [renamed(ren_h, n) for n in fh]
        bo = {renamed(ren_o, f): b for f, b in bo.items()}
        bh = {renamed(ren_h, f): b for f, b in bh.items()}
    rename = renamed

    def header_times(blocks):
        return {v for bl in blocks.values() for blk in bl for k, v in blk.items()
                if k in ("INSTANT_TIME", "TARGET_INSTANT_TIME")}
    # e.g. the failed instant T, the target of both sides' MDT rollback command blocks
    mknown |= {t[:17] for t in header_times(bo) & header_times(bh)}
    maps = {}
    for side, tl, mtl, files, blocks in (("ours", tl_o, mo, fo, bo), ("hudis", tl_h, mh, fh, bh)):
        maps[side] = side_times(tl + mtl + files + sorted(header_times(blocks)), mknown)
    mo_n = sorted(subst(maps["ours"], re.sub(r"_(\d{14,20})(?=\.)", "_C", n)) for n in mo)
    mh_n = sorted(subst(maps["hudis"], re.sub(r"_(\d{14,20})(?=\.)", "_C", n)) for n in mh)
    report["mdt_timeline"] = {"ours": mo_n, "hudis": mh_n}
    d = compare(mo_n, mh_n)
    if d["only_in_ours"] or d["only_in_hudis"]:
        diffs["mdt_timeline"] = d
    fo_n, fh_n = [subst(maps["ours"], n) for n in fo], [subst(maps["hudis"], n) for n in fh]
    report["mdt_data_files"] = {"ours": sorted(fo_n), "hudis": sorted(fh_n)}
    d = compare(fo_n, fh_n)
    if d["only_in_ours"] or d["only_in_hudis"]:
        diffs["mdt_data_files"] = d

    def norm_blocks(side, blocks):
        return {subst(maps[side], f): [{k: subst(maps[side], v) if isinstance(v, str) else v for k, v in blk.items()}
                                       for blk in bl] for f, bl in blocks.items()}
    nbo, nbh = norm_blocks("ours", bo), norm_blocks("hudis", bh)
    bd = {f: {"ours": nbo.get(f), "hudis": nbh.get(f)} for f in sorted(set(nbo) & set(nbh)) if nbo[f] != nbh[f]}
    if bd:
        diffs["mdt_log_blocks"] = bd
    report["mdt_log_blocks"] = {"ours": nbo, "hudis": nbh}

    # the MDT deltacommit at each rollback instant R of the data table that only this side has
    rb = {}
    for side, root, tl in (("ours", ours, tl_o), ("hudis", hudis, tl_h)):
        rs = sorted({p[0] for p in map(parse_instant_file, tl) if p and p[2] == "rollback"})
        ren = ren_o if side == "ours" else ren_h
        rb[side] = {subst(maps[side], r): json.loads(rename(ren, subst(maps[side], json.dumps(mdt_deltacommit_summary(root, mdt, r)))))
                    for r in rs}
    report["mdt_rollback_deltacommits"] = rb
    if rb["ours"] != rb["hudis"]:
        diffs["mdt_rollback_deltacommits"] = {k: {"ours": rb["ours"].get(k), "hudis": rb["hudis"].get(k)}
                                              for k in sorted(set(rb["ours"]) | set(rb["hudis"]))
                                              if rb["ours"].get(k) != rb["hudis"].get(k)}


def diff_restore(ours, hudis, restore_point, mdt_deleted=False):
    report = {"mode": "restore", "ours": ours, "hudis": hudis, "differences": {}, "info": {}}
    diffs = report["differences"]

    # data-table timeline
    tl_o, tl_h = timeline_files(ours), timeline_files(hudis)
    inst_o, inst_h = timeline_instants(tl_o), timeline_instants(tl_h)
    shared_restores = {t for (t, a) in inst_o if a == "restore"} & {t for (t, a) in inst_h if a == "restore"}
    _, side_o = restore_side(tl_o, shared_restores, restore_point)
    _, side_h = restore_side(tl_h, shared_restores, restore_point)
    report["restore"] = {"ours": side_o, "hudis": side_h}
    for name, side in (("ours", side_o), ("hudis", side_h)):
        problems = []
        if len(side["new_restores"]) != 1:
            problems.append("expected exactly one restore instant the other copy does not have, found %s"
                            % side["new_restores"])
        elif not side["new_restore_completed"]:
            problems.append("restore %s is not completed" % side["new_restores"][0])
        if side["rollbacks_newer_than_restore_point"]:
            problems.append("rollback instants newer than the restore point %s remain: %s"
                            % (side["restore_point"], side["rollbacks_newer_than_restore_point"]))
        if problems:
            diffs.setdefault("restore", {})[name] = problems
    if side_o["restore_point"] != side_h["restore_point"]:
        diffs.setdefault("restore", {})["restore_point"] = {"ours": side_o["restore_point"],
                                                            "hudis": side_h["restore_point"]}
    new_o = {f for t in side_o["new_restores"] for f in inst_o[(t, "restore")]["files"]}
    new_h = {f for t in side_h["new_restores"] for f in inst_h[(t, "restore")]["files"]}
    d = compare(sorted(set(tl_o) - new_o), sorted(set(tl_h) - new_h))
    if d["only_in_ours"] or d["only_in_hudis"]:
        diffs["timeline"] = d
    d = compare(normalize_times(sorted(new_o), set()), normalize_times(sorted(new_h), set()))
    if d["only_in_ours"] or d["only_in_hudis"]:
        diffs["restore_instant_files"] = d
    known = times_in(tl_o) & times_in(tl_h)
    report["timeline"] = {"ours": normalize_times(tl_o, known), "hudis": normalize_times(tl_h, known)}

    # metadata table: timeline and data file names, times only one side has -> placeholders
    mdt = os.path.join(".hoodie", "metadata", ".hoodie")
    if mdt_deleted:
        # Ours deleted the metadata table (as Hudi's restoreToSavepoint does when it cannot
        # restore it): there must be none left, and the table config must say so.
        problems = []
        # (empty folders are a local-file-system artifact: object stores have none)
        left = files_under(ours, os.path.join(".hoodie", "metadata"))
        if left:
            problems.append("ours still has files under .hoodie/metadata: %s" % left[:5])
        if properties(ours).get("hoodie.table.metadata.partitions", ""):
            problems.append("ours still lists metadata partitions in hoodie.properties")
        if problems:
            diffs["mdt_deleted"] = problems
        report["info"]["mdt"] = "deleted in ours; not compared"
    elif os.path.isdir(os.path.join(ours, mdt)) or os.path.isdir(os.path.join(hudis, mdt)):
        mo, mh = timeline_files(ours, mdt), timeline_files(hudis, mdt)
        fo, fh = mdt_data_files(ours), mdt_data_files(hudis)
        if TASK_TOKENS:
            fo = [renamed(untokened_names(fo, mdt_log_blocks(ours, fo)), n) for n in fo]
            fh = [renamed(untokened_names(fh, mdt_log_blocks(hudis, fh)), n) for n in fh]
        mknown = (times_in(mo) & times_in(mh)) | known | \
            ({t for n in fo for t in TIME_RE.findall(n)} & {t for n in fh for t in TIME_RE.findall(n)})
        report["mdt_timeline"] = {"ours": normalize_times(mo, mknown), "hudis": normalize_times(mh, mknown)}
        d = compare(normalize_times(mo, mknown), normalize_times(mh, mknown))
        if d["only_in_ours"] or d["only_in_hudis"]:
            diffs["mdt_timeline"] = d
        d = compare(normalize_times(fo, mknown), normalize_times(fh, mknown))
        if d["only_in_ours"] or d["only_in_hudis"]:
            diffs["mdt_data_files"] = d

    # data files: names, then contents
    do, dh = data_files(ours), data_files(hudis)
    counts = {"ours": {"files": 0, "command_block_logs": 0}, "hudis": {"files": 0, "command_block_logs": 0}}
    for part in sorted(set(do) | set(dh)):
        a, b = do.get(part, []), dh.get(part, [])
        d = compare(a, b)
        if d["only_in_ours"] or d["only_in_hudis"]:
            diffs.setdefault("data_files", {})[part] = d
        for name in sorted(set(a) & set(b)):
            fo_, fh_ = data_file_facts(ours, part, name), data_file_facts(hudis, part, name)
            if fo_ != fh_:
                diffs.setdefault("data_file_contents", {})[os.path.join(part, name)] = {"ours": fo_, "hudis": fh_}
        for side, root, names in (("ours", ours, a), ("hudis", hudis, b)):
            for name in names:
                counts[side]["files"] += 1
                if ".log." in name and command_block(os.path.join(root, part, name)) is not None:
                    counts[side]["command_block_logs"] += 1
    report["data_file_counts"] = counts
    cbo, cbh = command_blocks_by_file_group(ours, do), command_blocks_by_file_group(hudis, dh)
    cbd = {k: {"ours": cbo.get(k, []), "hudis": cbh.get(k, [])}
           for k in sorted(set(cbo) | set(cbh)) if cbo.get(k) != cbh.get(k)}
    if cbd:
        diffs["command_block_targets"] = cbd
    if counts["ours"] != counts["hudis"]:
        diffs["data_file_counts"] = counts
    empty_o = sorted(p for p, f in do.items() if not f)
    empty_h = sorted(p for p, f in dh.items() if not f)
    report["info"]["partitions_without_data_files"] = {"ours": empty_o, "hudis": empty_h}

    # table config
    po, ph = properties(ours), properties(hudis)
    ignored = {"hoodie.table.metadata.partitions", "hoodie.table.metadata.partitions.inflight"} if mdt_deleted else set()
    pd = {k: {"ours": po.get(k), "hudis": ph.get(k)} for k in sorted(set(po) | set(ph))
          if po.get(k) != ph.get(k) and k not in ignored}
    if pd:
        diffs["hoodie_properties"] = pd
    backups = {}
    for side, root in (("ours", ours), ("hudis", hudis)):
        h = os.path.join(root, ".hoodie")
        backups[side] = sorted(re.sub(r"\d{17}", "<ts>", n) for n in os.listdir(h)
                               if n.startswith(".metadata_") and os.path.isdir(os.path.join(h, n)))
    report["info"]["mdt_partition_backups"] = backups

    leftovers(ours, hudis, diffs)
    return report


def leftovers(ours, hudis, diffs):
    for rel in (os.path.join(".hoodie", ".temp"), os.path.join(".hoodie", ".heartbeat"),
                os.path.join(".hoodie", "metadata", ".hoodie", ".temp")):
        d = compare(files_under(ours, rel), files_under(hudis, rel))
        if d["only_in_ours"] or d["only_in_hudis"]:
            diffs[rel] = d
    lo, lh = os.path.exists(os.path.join(ours, ".hoodie", "lock")), os.path.exists(os.path.join(hudis, ".hoodie", "lock"))
    if lo != lh:
        diffs["lock_file"] = {"ours": lo, "hudis": lh}


def main():
    args = sys.argv[1:]
    restore = "--restore" in args
    mdt_deleted = "--mdt-deleted" in args
    global TASK_TOKENS
    TASK_TOKENS = "--task-tokens" in args
    args = [a for a in args if a not in ("--restore", "--mdt-deleted", "--task-tokens")]
    restore_point = None
    if "--restore-point" in args:
        i = args.index("--restore-point")
        if not restore or i + 1 >= len(args):
            print(__doc__, file=sys.stderr)
            sys.exit(2)
        restore_point = args[i + 1]
        del args[i:i + 2]
    if len(args) != 2 or not all(os.path.isdir(os.path.join(a, ".hoodie")) for a in args):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    ours, hudis = args
    if restore:
        report = diff_restore(ours, hudis, restore_point, mdt_deleted)
        report["same"] = not report["differences"]
        print(json.dumps(report, indent=2))
        sys.exit(0 if report["same"] else 1)
    report = {"ours": ours, "hudis": hudis, "differences": {}}
    tl_o, tl_h = timeline_files(ours), timeline_files(hudis)
    known = times_in(tl_o) & times_in(tl_h)
    d = compare(normalize(tl_o, known), normalize(tl_h, known))
    report["timeline"] = {"ours": normalize(tl_o, known), "hudis": normalize(tl_h, known)}
    if d["only_in_ours"] or d["only_in_hudis"]:
        report["differences"]["timeline"] = d
    diff_rollback_mdt(ours, hudis, known, report, report["differences"])
    do, dh = data_files(ours), data_files(hudis)
    for part in sorted(set(do) | set(dh)):
        d = compare(do.get(part, []), dh.get(part, []))
        if d["only_in_ours"] or d["only_in_hudis"]:
            report["differences"].setdefault("data_files", {})[part] = d
    leftovers(ours, hudis, report["differences"])
    report["same"] = not report["differences"]
    print(json.dumps(report, indent=2))
    sys.exit(0 if report["same"] else 1)


if __name__ == "__main__":
    main()
