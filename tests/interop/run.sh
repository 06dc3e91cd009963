#!/usr/bin/env bash
# Interop harness driver: real Apache Hudi (Java write client, no Spark) makes, breaks, rolls back and
# validates tables on the local file system. See README.md.
#
#   run.sh build
#   run.sh versions
#   run.sh generate <version-key> <scenario|all> <dir>
#   run.sh rollback <version-key> <dir>
#   run.sh rollback-paused <version-key> <dir> <pause-file>   (Hudi's lazy rollback in the background, held at
#                                                     its first data-file delete until <pause-file> exists;
#                                                     returns once held: "PAUSED pid=... path=..."; see README)
#   run.sh verify   <version-key> <dir> [--expect <records.json>] [--native-hfile-reader|--hbase-hfile-reader]
#   run.sh diff     [--restore] <ours-dir> <hudis-dir>   (--restore: two restores of one table)
#   run.sh dump     <version-key> <timeline-file>     (Avro plans/metadata as text)
#   run.sh selftest [root [version-key...]]           (generate+verify+diff per version; default every key)
#   run.sh timeline <version-key> <dir>               (Hudi's active timeline + MDT timeline as JSON; read-only)
#   run.sh archived <version-key> <dir>               (Hudi's archived timeline as JSON, with what archived
#                                                     rollbacks/restores rolled back; read-only)
#   run.sh bench-fail     <version-key> <dir> <files> [partitions]   (benchmark table: failed write of ~<files> files;
#                                                     <dir> or an s3a:// base path; BENCH_SCENARIO picks the
#                                                     table, default cow-nomdt-direct)
#   run.sh bench-rollback <version-key> <dir>         (times Hudi's rollback of it; mutates <dir>; <dir> or s3a://)
#   run.sh writer <version-key> <dir> <id> <commits>  (one of several concurrent writers; the JVM replaces the shell)
#   run.sh kill-writer <version-key> <dir> <logdir>   (one more write, SIGKILLed mid-write; prints its instant)
#   run.sh hold-lock <version-key> <dir> <seconds>    (take the writers' lock with Hudi's provider, hold it, release)
#   run.sh lock-cycles <version-key> <base-uri> <cycles> <hold-ms> <wait-ms> [pause-ms]
#                                                     (take and release the lock of <base-uri> <cycles> times with
#                                                     Hudi's provider; LOCKED/RELEASING/RELEASED lines; the JVM
#                                                     replaces the shell)
#   run.sh savepoint <version-key> <dir> <instant>    (Hudi's own savepoint of a completed commit)
#   run.sh restore <version-key> <dir> <instant> [--savepoint|--to-instant]
#                                                     (Hudi's own restoreToSavepoint / restoreToInstant)
#   run.sh commit <version-key> <dir>                 (one more completed upsert commit, p0-p2 + new keys in p3)
#   run.sh commits-n <version-key> <dir> <n>         (<n> such commits in one JVM; JSON summary)
#   run.sh hfile-read <version-key> <hfile> [--native] (Hudi's Avro HFile reader on one file; records as JSON)
# INTEROP_LOCK (filesystem | zookeeper,<host:port>,<base_path>,<key> | storage,<s3-endpoint>,<validity-s>,<renew-s>)
# picks the writers' lock provider (storage: Hudi 1.1's StorageBasedLockProvider on an s3a:// base path).
# generate, writer, verify, bench-fail and bench-rollback also take an s3a://<bucket>/<key> base path instead of <dir> (Hadoop's S3A
# against INTEROP_S3_ENDPOINT, else HUDI_KEEPER_S3_ENDPOINT; see README "Tables on S3"); generate there
# makes the direct-marker scenarios without Hudi's reference rollback.
#
# version keys: 0.13 (table v5, Hudi 0.13.1), 0.15 (table v6, Hudi 0.15.0), 1.0 (v8, Hudi 1.0.1), 1.1 (v9, Hudi 1.1.1), 1.2 (v9, Hudi 1.2.0)
# scenarios: <cow|mor>-<mdt|nomdt>-<direct|timeline>[-mdtdone|-mdtinflight|-mdtcompact|-requested|-clusterfail][-append][-twice]
#            [-urlenc|-hive|-slash|-nopart]
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# Java names files in sun.jnu.encoding, taken from the locale: without a UTF-8 locale the non-ASCII
# partition values of the -urlenc scenarios would become '?' in folder names.
case "${LC_ALL:-${LC_CTYPE:-${LANG:-}}}" in
  *[Uu][Tt][Ff]-8* | *[Uu][Tt][Ff]8*) ;;
  *) export LC_ALL=C.UTF-8 ;;
esac
MVN_SETTINGS="$HERE/.mvn/settings.xml"
VERSION_KEYS=(0.13 0.15 1.0 1.1 1.2)
# every scenario `generate ... all` makes (timeline-marker ones only where the version has the server)
ALL_SCENARIOS=(cow-nomdt-direct cow-mdt-direct mor-nomdt-direct mor-mdt-direct
               cow-nomdt-timeline cow-mdt-timeline mor-nomdt-timeline mor-mdt-timeline
               cow-mdt-direct-mdtdone mor-mdt-direct-mdtdone
               cow-nomdt-direct-requested mor-mdt-direct-requested)

# The one place for JVM flags. Java 17 needs these opens for Hadoop, Kryo and Hudi's object-size
# estimator (jol) that reflect into JDK internals.
JAVA_OPTS=(
  -Xmx1g -XX:+UseSerialGC -XX:TieredStopAtLevel=1
  -Djava.net.preferIPv4Stack=true -Djdk.attach.allowAttachSelf=true
  # Hudi's object-size estimator (JOL) otherwise forks a second JVM per harness JVM to attach
  # HotSpot's Serviceability Agent (and prints "Unable to attach Serviceability Agent"); its
  # estimates only size in-memory buffers.
  -Djol.skipHotspotSAAttach=true
  # ZooKeeper lock provider: no SASL (its principal lookup fails on an IP-literal server address)
  -Dzookeeper.sasl.client=false
  --add-opens=java.base/java.lang=ALL-UNNAMED
  --add-opens=java.base/java.lang.invoke=ALL-UNNAMED
  --add-opens=java.base/java.lang.reflect=ALL-UNNAMED
  --add-opens=java.base/java.io=ALL-UNNAMED
  --add-opens=java.base/java.net=ALL-UNNAMED
  --add-opens=java.base/java.nio=ALL-UNNAMED
  --add-opens=java.base/java.util=ALL-UNNAMED
  --add-opens=java.base/java.util.concurrent=ALL-UNNAMED
  --add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED
  --add-opens=java.base/java.util.regex=ALL-UNNAMED
  --add-opens=java.base/java.time=ALL-UNNAMED
  --add-opens=java.base/sun.nio.ch=ALL-UNNAMED
  --add-opens=java.base/sun.nio.cs=ALL-UNNAMED
  --add-opens=java.base/sun.security.action=ALL-UNNAMED
  --add-opens=java.base/sun.util.calendar=ALL-UNNAMED
  --add-opens=java.base/jdk.internal.misc=ALL-UNNAMED
  --add-exports=java.base/jdk.internal.misc=ALL-UNNAMED
)

# extra JVM flags appended after JAVA_OPTS (later -Xmx wins): the bench commands set them, and a
# caller may give some in HJ_JVM_FLAGS (space-separated; e.g. a SASL ZooKeeper's JAAS file as
# -Dzookeeper.sasl.client=true -Djava.security.auth.login.config=…)
read -ra HJ_JVM_EXTRA <<<"${HJ_JVM_FLAGS:-}"

die() { echo "run.sh: $*" >&2; exit 1; }
log() { echo "[run.sh $(date +%H:%M:%S)] $*" >&2; }

module_dir() {
  local key="$1" k
  for k in "${VERSION_KEYS[@]}"; do
    if [[ "$k" == "$key" ]]; then echo "$HERE/hudi-$key"; return 0; fi
  done
  die "unknown hudi version key '$key' (known: ${VERSION_KEYS[*]})"
}

# ---------------------------------------------------------------------------------------------- build
build_inputs_newer_than() { # stamp
  local stamp="$1"
  [[ -f "$stamp" ]] || return 0
  [[ -n "$(find "$HERE/pom.xml" "$HERE"/hudi-*/pom.xml "$HERE/src" "$HERE/.mvn" -newer "$stamp" -print -quit)" ]]
}

cmd_build() {
  local stamp="$HERE/target/.build-stamp" k ok=1
  for k in "${VERSION_KEYS[@]}"; do
    [[ -f "$HERE/hudi-$k/target/classpath.txt" && -d "$HERE/hudi-$k/target/classes/io" ]] || ok=0
  done
  if [[ $ok == 1 ]] && ! build_inputs_newer_than "$stamp"; then
    log "build: up to date"
    return 0
  fi
  local mvn_args=(-q -B -s "$MVN_SETTINGS" -Dstyle.color=never -f "$HERE/pom.xml")
  log "build: mvn compile (all Hudi versions)"
  # The stamp gets the time the build *started*: a source saved while mvn runs (or while another
  # run.sh builds concurrently) stays newer than the stamp, so the next call compiles it.
  mkdir -p "$HERE/target"
  local new_stamp="$stamp.$$"
  touch "$new_stamp"
  # offline first (fast, no network once ~/.m2 is filled); online when something is missing
  if ! mvn "${mvn_args[@]}" -o compile >"$HERE/target/build.log.$$" 2>&1; then
    mvn "${mvn_args[@]}" compile >"$HERE/target/build.log.$$" 2>&1 \
      || { cat "$HERE/target/build.log.$$" >&2; rm -f "$new_stamp"; die "build failed"; }
  fi
  rm -f "$HERE/target/build.log.$$"
  mv -f "$new_stamp" "$stamp"
}

# java <key> <Main args...>
hj() {
  local key="$1"; shift
  local mod; mod="$(module_dir "$key")"
  [[ -f "$mod/target/classpath.txt" ]] || cmd_build
  timeout "${HJ_TIMEOUT:-900}" java "${JAVA_OPTS[@]}" "${HJ_JVM_EXTRA[@]}" -cp "$mod/target/classes:$(cat "$mod/target/classpath.txt")" io.hudikeeper.interop.Main "$@"
}

# like hj, but replaces the (sub)shell with the JVM: `hj_exec ... &` makes $! the JVM's pid
hj_exec() {
  local key="$1"; shift
  local mod; mod="$(module_dir "$key")"
  exec java "${JAVA_OPTS[@]}" "${HJ_JVM_EXTRA[@]}" -cp "$mod/target/classes:$(cat "$mod/target/classpath.txt")" io.hudikeeper.interop.Main "$@"
}

# --------------------------------------------------------------------------------------- scenarios
# Which scenarios a version can make. TIMELINE_SERVER_BASED markers need the embedded timeline
# server (hudi-timeline-service of the same release), which the reachable Maven Central mirror
# serves only for 0.13.1 and 0.15.0 (and 1.0.2, which does not link with 1.0.1; see README).
scenario_supported() { # key scenario
  local key="$1" sc="$2"
  if [[ "$sc" == *-timeline* && "$key" != 0.15 && "$key" != 0.13 ]]; then return 1; fi
  # Hudi 0.13.1's Java client writes no metadata table (HoodieJavaTable has no metadata writer before
  # 0.14): the 0.13 key makes the scenarios without one
  if [[ "$key" == 0.13 && "$sc" != *-nomdt-* ]]; then return 1; fi
  # a killed clustering with clustering expirations on: Hudi 1.2's hoodie.clustering.enable.expirations
  if [[ "-$sc-" == *-clusterfail-* && "$key" != 1.2 ]]; then return 1; fi
  return 0
}

# Runs the failing writer in its own JVM, waits for READY_TO_DIE, SIGKILLs it.
kill_failed_writer() { # key dir logdir [Main command and args, default: fail --dir <dir>]
  local key="$1" dir="$2" logs="$3"
  shift 3
  (( $# )) || set -- fail --dir "$dir"
  local out="$logs/fail.stdout" err="$logs/fail.stderr"
  : >"$out"
  hj_exec "$key" "$@" >"$out" 2>"$err" &
  local pid=$! waited=0
  while ! grep -q '^READY_TO_DIE' "$out"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      cat "$out" "$err" >&2 || true
      die "failed writer exited before READY_TO_DIE"
    fi
    sleep 0.2
    waited=$((waited + 1))
    if (( waited > ${FAIL_WAIT_TICKS:-1500} )); then
      kill -9 "$pid" || true; die "failed writer did not reach READY_TO_DIE in $(( ${FAIL_WAIT_TICKS:-1500} / 5 ))s"
    fi
  done
  kill -9 "$pid"
  wait "$pid" 2>/dev/null || true
  grep '^READY_TO_DIE' "$out" | head -1 | awk '{print $2}'
}

is_uri() { [[ "$1" =~ ^[A-Za-z][A-Za-z0-9+.-]*:// ]]; }

# generate on an object store (s3a://): the completed commits and the killed write through S3A, the
# failed instant recorded in the scenario.json Main wrote into the base path. No reference copy with
# Hudi's rollback (nothing copies a table within the store) and no scenario whose failure injection
# lives in the local file system (-mdtdone, -mdtinflight, -mdtcompact, -append) or that needs the
# timeline server or a second failed writer (-timeline, -twice). Logs: INTEROP_LOGS or a new /tmp folder.
generate_remote() { # key scenario base-uri
  local key="$1" sc="$2" dir="$3"
  [[ "$sc" =~ ^(cow|mor)-(mdt|nomdt)-direct(-requested)?(-urlenc|-hive|-slash|-nopart)?$ ]] \
    || die "scenario $sc cannot be made on an object store (see README \"Tables on S3\")"
  local logs="${INTEROP_LOGS:-}"
  [[ -n "$logs" ]] || logs="$(mktemp -d /tmp/interop-generate.XXXXXX)"
  mkdir -p "$logs"
  local t0=$SECONDS failed
  log "generate $key $sc -> $dir (logs: $logs)"
  export INTEROP_LOCK_LOG="$logs/locks.log"
  hj "$key" commits --dir "$dir" --scenario "$sc" >"$logs/commits.stdout" 2>"$logs/commits.stderr" \
    || { cat "$logs/commits.stderr" >&2; die "completed commits failed ($logs)"; }
  failed="$(kill_failed_writer "$key" "$dir" "$logs")"
  [[ -n "$failed" ]] || die "no failed instant reported"
  hj "$key" scenario-set --dir "$dir" --json "{\"failed_instant\": \"$failed\", \"stale_lock_file_left\": false}" \
    2>"$logs/scenario-set.stderr" || { cat "$logs/scenario-set.stderr" >&2; die "scenario-set failed"; }
  log "  killed writer of $failed; done in $((SECONDS - t0))s: $dir (failed write, no reference copy on an object store)"
}

generate_one() { # key scenario dir
  local key="$1" sc="$2" dir="$3"
  scenario_supported "$key" "$sc" || die "scenario $sc is not supported with Hudi $key (see README)"
  if is_uri "$dir"; then generate_remote "$key" "$sc" "$dir"; return; fi
  [[ -e "$dir" ]] && die "$dir already exists"
  local logs="$dir.logs" ref="$dir-hudi-rollback"
  rm -rf "$logs" "$ref" "$ref.logs"
  mkdir -p "$logs"
  local t0=$SECONDS
  log "generate $key $sc -> $dir"
  export INTEROP_LOCK_LOG="$logs/locks.log"
  hj "$key" commits --dir "$dir" --scenario "$sc" >"$logs/commits.stdout" 2>"$logs/commits.stderr" \
    || { cat "$logs/commits.stderr" >&2; die "completed commits failed ($logs)"; }
  local failed
  failed="$(kill_failed_writer "$key" "$dir" "$logs")"
  [[ -n "$failed" ]] || die "no failed instant reported"
  # record the failed instant in scenario.json
  python3 - "$dir/scenario.json" "$failed" <<'PY'
import json, sys
p, t = sys.argv[1], sys.argv[2]
d = json.load(open(p))
d["failed_instant"] = t
json.dump(d, open(p, "w"), indent=2)
PY
  if [[ "-$sc-" == *-twice-* ]]; then
    # -twice: a second writer fails the same way after the first (the same batch, so the same file
    # groups get a second pending log file); failed_instant stays the first, failed_instants has both
    mkdir -p "$logs/second"
    local failed2
    failed2="$(kill_failed_writer "$key" "$dir" "$logs/second")"
    [[ -n "$failed2" && "$failed2" > "$failed" ]] || die "the second failed writer reported '$failed2'"
    python3 - "$dir/scenario.json" "$failed" "$failed2" <<'PY'
import json, sys
p = sys.argv[1]
d = json.load(open(p))
d["failed_instants"] = sys.argv[2:]
json.dump(d, open(p, "w"), indent=2)
PY
    failed="$failed $failed2"
  fi
  local stale_lock=false
  [[ -e "$dir/.hoodie/lock" ]] && stale_lock=true
  python3 - "$dir/scenario.json" "$stale_lock" <<'PY'
import json, sys
p = sys.argv[1]
d = json.load(open(p))
# the writer was killed while holding FileSystemBasedLockProvider's lock (.hoodie/lock); with the
# default hoodie.write.lock.filesystem.expire=0 it never expires
d["stale_lock_file_left"] = sys.argv[2] == "true"
json.dump(d, open(p, "w"), indent=2)
PY
  log "  killed writer of $failed; stale heartbeat: $(ls "$dir/.hoodie/.heartbeat" 2>/dev/null | tr '\n' ' ')stale lock: $stale_lock"
  # reference copy with Hudi's own rollback
  cp -a "$dir" "$ref"
  if [[ $stale_lock == true ]]; then
    # Hudi would wait for this lock forever: remove it, as an operator would, in the reference copy only
    rm -f "$ref/.hoodie/lock" "$ref/.hoodie/.lock.crc"
  fi
  mkdir -p "$ref.logs"
  local ref_key="$key" ref_props="${INTEROP_EXTRA_PROPS:-}"
  if [[ "$sc" == *-mdtcompact* && "$key" == 1.0 ]]; then
    # Hudi 1.0.1 refuses this rollback (its validateRollback compares the failed instant's requested
    # time with the metadata table's compaction). Show it on a scratch copy, then make the reference
    # with Hudi 1.1.1 writing table version 8 (1.1.1 compares the completion time instead).
    local scratch="$dir-hudi-1.0-refusal"
    rm -rf "$scratch"; cp -a "$ref" "$scratch"
    if INTEROP_LOCK_LOG="$ref.logs/locks-1.0.log" hj 1.0 rollback --dir "$scratch" >"$ref.logs/rollback-1.0.stdout" 2>"$ref.logs/rollback-1.0.stderr"; then
      die "Hudi 1.0.1 rolled back $sc; expected its refusal (earlier than the latest compaction)"
    fi
    grep -q "earlier than the latest compaction" "$ref.logs/rollback-1.0.stdout" "$ref.logs/rollback-1.0.stderr" \
      || { cat "$ref.logs/rollback-1.0.stderr" >&2; die "Hudi 1.0.1's rollback failed for another reason"; }
    rm -rf "$scratch"
    python3 - "$dir/scenario.json" <<'PY'
import json, sys
p = sys.argv[1]
d = json.load(open(p))
d["hudi_own_rollback"] = "refused by Hudi 1.0.1 (earlier than the latest compaction); reference made by Hudi 1.1.1 with hoodie.write.table.version=8"
json.dump(d, open(p, "w"), indent=2)
PY
    cp "$dir/scenario.json" "$ref/scenario.json"
    ref_key=1.1
    ref_props="hoodie.write.table.version=8${ref_props:+;$ref_props}"
  fi
  INTEROP_EXTRA_PROPS="$ref_props" INTEROP_LOCK_LOG="$ref.logs/locks.log" hj "$ref_key" rollback --dir "$ref" >"$ref.logs/rollback.stdout" 2>"$ref.logs/rollback.stderr" \
    || { cat "$ref.logs/rollback.stdout" "$ref.logs/rollback.stderr" >&2; die "Hudi rollback of the reference copy failed"; }
  log "  done in $((SECONDS - t0))s: $dir (failed write), $ref (Hudi's rollback)"
}

cmd_generate() {
  [[ $# == 3 ]] || die "usage: run.sh generate <version-key> <scenario|all> <dir>"
  local key="$1" sc="$2" dir="$3"
  module_dir "$key" >/dev/null
  cmd_build
  if [[ "$sc" == all ]]; then
    is_uri "$dir" && die "generate ... all takes a local folder"
    mkdir -p "$dir"
    local s failed=()
    for s in "${ALL_SCENARIOS[@]}"; do
      if scenario_supported "$key" "$s"; then
        ( generate_one "$key" "$s" "$dir/$s" ) || failed+=("$s")
      else
        log "skip $s: not supported with Hudi $key"
      fi
    done
    if (( ${#failed[@]} )); then die "failed scenarios with Hudi $key: ${failed[*]}"; fi
  else
    generate_one "$key" "$sc" "$dir"
  fi
}

cmd_rollback() {
  [[ $# == 2 ]] || die "usage: run.sh rollback <version-key> <dir>"
  cmd_build
  hj "$1" rollback --dir "$2"
}

# Hudi's lazy rollback as `rollback` runs it (OCC, LAZY failed-writes policy, the INTEROP_LOCK lock;
# INTEROP_EXTRA_PROPS applies), started in the background with INTEROP_PAUSE_DELETES=<pause-file>: the JVM
# holds its first data-file delete (PausingLocalFileSystem). Waits until <pause-file>.paused appears,
# prints "PAUSED pid=<JVM pid> path=<held file>" and returns 0 while the JVM stays held; it goes on once
# <pause-file> exists (or after INTEROP_PAUSE_DELETES_SECONDS). The JVM's stdout/stderr go to
# <pause-file>.stdout/.stderr, its exit status to <pause-file>.rc when it ends. Returns 1 (with the JVM's
# output) if the JVM ends before it pauses, e.g. when there is nothing to delete.
cmd_rollback_paused() {
  [[ $# == 3 ]] || die "usage: run.sh rollback-paused <version-key> <dir> <pause-file>"
  local key="$1" dir="$2" pause="$3"
  module_dir "$key" >/dev/null
  [[ -f "$dir/scenario.json" ]] || die "$dir/scenario.json missing (rollback needs the scenario of the table)"
  [[ "$pause" == /* ]] || pause="$PWD/$pause"
  cmd_build
  rm -f "$pause" "$pause.paused" "$pause.paused.tmp" "$pause.rc" "$pause.rc.tmp" "$pause.stdout" "$pause.stderr"
  # all of the subshell's descriptors go to files: a caller reading run.sh's output gets EOF when run.sh
  # returns, not when the held JVM ends
  ( rc=0
    INTEROP_PAUSE_DELETES="$pause" hj "$key" rollback --dir "$dir" >"$pause.stdout" 2>"$pause.stderr" || rc=$?
    echo "$rc" >"$pause.rc.tmp" && mv -f "$pause.rc.tmp" "$pause.rc" ) </dev/null >/dev/null 2>&1 &
  local waited=0 limit=$(( 5 * ${PAUSE_WAIT_S:-300} ))
  while [[ ! -f "$pause.paused" ]]; do
    if [[ -f "$pause.rc" ]]; then
      cat "$pause.stdout" "$pause.stderr" >&2 || true
      die "Hudi's rollback ended (exit $(cat "$pause.rc")) before it deleted a data file"
    fi
    (( ++waited > limit )) && die "Hudi's rollback did not pause in ${PAUSE_WAIT_S:-300}s (see $pause.stderr)"
    sleep 0.2
  done
  echo "PAUSED $(cat "$pause.paused")"
}

cmd_verify() {
  local usage="usage: run.sh verify <version-key> <dir> [--expect <records.json>] [--native-hfile-reader|--hbase-hfile-reader]"
  [[ $# -ge 2 ]] || die "$usage"
  local key="$1" dir="$2" expect=""
  shift 2
  while (( $# )); do
    case "$1" in
      --expect) [[ $# -ge 2 ]] || die "$usage"; expect="$2"; shift 2 ;;
      # _hoodie.hfile.use.native.reader, put into the Hadoop configuration of every Hudi client the
      # validator builds (0.15.0 and 1.0.1 read it there); 1.1.1 has only the native reader
      --native-hfile-reader)
        [[ "$key" != 0.13 ]] || die "Hudi 0.13 has only its HBase-based HFile reader"
        export INTEROP_HFILE_NATIVE_READER=true; shift ;;
      --hbase-hfile-reader)
        [[ "$key" != 1.1 && "$key" != 1.2 ]] || die "Hudi $key has no HBase HFile reader"
        export INTEROP_HFILE_NATIVE_READER=false; shift ;;
      *) die "$usage" ;;
    esac
  done
  cmd_build
  # the follow-up write mutates the table: validate a scratch copy, keep <dir> as it is (a table on an
  # object store is copied to the local scratch folder object by object, with the keys it has there)
  local scratch rc=0
  scratch="$(mktemp -d /tmp/interop-verify.XXXXXX)"
  if is_uri "$dir"; then
    hj "$key" copy-local --from "$dir" --to "$scratch/table" >"$scratch/copy.stdout" 2>"$scratch/copy.stderr" \
      || { cat "$scratch/copy.stderr" >&2; die "copying $dir failed (kept in $scratch)"; }
  else
    [[ -f "$dir/scenario.json" ]] || die "$dir/scenario.json missing (verify needs the scenario of the table)"
    cp -a "$dir" "$scratch/table"
  fi
  [[ -f "$scratch/table/scenario.json" ]] || die "$dir has no scenario.json (verify needs the scenario of the table)"
  [[ -n "$expect" ]] || expect="$scratch/table/expected-records.json"
  hj "$key" verify --dir "$scratch/table" --expect "$(cd "$(dirname "$expect")" && pwd)/$(basename "$expect")" \
    2>"$scratch/verify.stderr" || rc=$?
  if [[ $rc == 0 ]]; then rm -rf "$scratch"; else log "verify failed; scratch copy and stderr kept in $scratch"; fi
  return $rc
}

# Hudi's own restore of <dir> to <instant>: restoreToSavepoint (default) or restoreToInstant.
cmd_restore() {
  local usage="usage: run.sh restore <version-key> <dir> <instant> [--savepoint|--to-instant]"
  [[ $# == 3 || $# == 4 ]] || die "$usage"
  local key="$1" dir="$2" instant="$3" mode=savepoint
  case "${4:---savepoint}" in
    --savepoint) mode=savepoint ;;
    --to-instant) mode=instant ;;
    *) die "$usage" ;;
  esac
  module_dir "$key" >/dev/null
  [[ -f "$dir/scenario.json" ]] || die "$dir/scenario.json missing (restore needs the scenario of the table)"
  cmd_build
  hj "$key" restore --dir "$dir" --instant "$instant" --mode "$mode"
}

# Self-test of the harness: per version, generate a COW and a MOR+MDT scenario, then
#   verify(Hudi's rollback) must pass, verify(failed table) must fail,
#   a second Hudi rollback of the failed table must diff equal to the reference.
# Keys after the root folder limit it to those versions (default: every key).
cmd_selftest() {
  local root="${1:-$(mktemp -d /tmp/interop-selftest.XXXXXX)}" k sc d pass=0 fail=0 keys=("${VERSION_KEYS[@]}")
  (( $# > 1 )) && keys=("${@:2}")
  for k in "${keys[@]}"; do module_dir "$k" >/dev/null; done
  cmd_build
  mkdir -p "$root"
  check() { # name command...
    local name="$1"; shift
    if "$@" >"$root/last.out" 2>&1; then pass=$((pass + 1)); log "PASS $name"
    else fail=$((fail + 1)); log "FAIL $name (see $root/last.out.$fail)"; cp "$root/last.out" "$root/last.out.$fail"; fi
  }
  not() { ! "$@"; }
  for k in "${keys[@]}"; do
    # 0.13: merge-on-read without a metadata table (its Java client writes none)
    local mor=mor-mdt-direct
    [[ "$k" == 0.13 ]] && mor=mor-nomdt-direct
    for sc in cow-nomdt-direct "$mor"; do
      d="$root/$k/$sc"
      check "generate $k $sc" "$0" generate "$k" "$sc" "$d"
      check "verify $k $sc-hudi-rollback" "$0" verify "$k" "$d-hudi-rollback"
      check "verify $k $sc (failed table must fail)" not "$0" verify "$k" "$d"
      rm -rf "$d-again"; cp -a "$d" "$d-again"
      check "rollback $k $sc again" "$0" rollback "$k" "$d-again"
      check "diff $k $sc again vs reference" "$0" diff "$d-again" "$d-hudi-rollback"
    done
  done
  echo "selftest ($root): $pass passed, $fail failed"
  [[ $fail == 0 ]]
}

cmd_archived() {
  [[ $# == 2 ]] || die "usage: run.sh archived <version-key> <dir>"
  module_dir "$1" >/dev/null
  cmd_build
  hj "$1" archived --dir "$2"
}

cmd_timeline() {
  [[ $# == 2 ]] || die "usage: run.sh timeline <version-key> <dir>"
  module_dir "$1" >/dev/null
  cmd_build
  hj "$1" timeline --dir "$2"
}

# ------------------------------------------------------------------------------------- benchmark
# Not part of selftest or CI. See README "Rollback benchmark (Hudi's own)".
BENCH_JVM=(-Xmx${BENCH_XMX:-4g} ${BENCH_JVM_FLAGS:-})

# <dir> may be an s3a://bucket/key base path: the table and its side files (scenario.json,
# expected-records.json) are then written through S3A (README "Tables on S3"), the JVM's logs go to
# BENCH_LOGS (else a new /tmp/interop-bench.* folder), and Java refuses a base path that holds a table.
cmd_bench_fail() {
  [[ $# == 3 || $# == 4 ]] || die "usage: run.sh bench-fail <version-key> <dir|s3a://bucket/key> <files> [partitions]"
  local key="$1" dir="$2" files="$3" parts="${4:-100}"
  module_dir "$key" >/dev/null
  [[ "$files" =~ ^[0-9]+$ && "$parts" =~ ^[0-9]+$ ]] || die "files and partitions must be numbers"
  local logs
  if is_uri "$dir"; then
    logs="${BENCH_LOGS:-}"
    [[ -n "$logs" ]] || logs="$(mktemp -d /tmp/interop-bench.XXXXXX)"
    mkdir -p "$logs"
  else
    [[ -e "$dir" ]] && die "$dir already exists"
    logs="$dir.logs"
    rm -rf "$logs"; mkdir -p "$logs"
  fi
  cmd_build
  HJ_JVM_EXTRA=("${BENCH_JVM[@]}")
  local t0 failed
  t0=$(date +%s%N)
  log "bench-fail $key: ~$files files in $parts partitions -> $dir (logs: $logs)"
  failed="$(FAIL_WAIT_TICKS=$((5 * ${BENCH_FAIL_TIMEOUT_S:-3600})) kill_failed_writer "$key" "$dir" "$logs" \
    bench-fail --dir "$dir" --files "$files" --partitions "$parts" --scenario "${BENCH_SCENARIO:-cow-nomdt-direct}")"
  [[ -n "$failed" ]] || die "no failed instant reported"
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  local written
  written="$(grep '^READY_TO_DIE' "$logs/fail.stdout" | head -1 | sed -n 's/.*files=\([0-9]*\).*/\1/p')"
  if is_uri "$dir"; then
    HJ_JVM_EXTRA=()
    hj "$key" scenario-set --dir "$dir" --json "{\"failed_instant\": \"$failed\", \"stale_lock_file_left\": false, \"bench\": {\"files_written\": ${written:-null}, \"generate_ms\": $ms}}" \
      >"$logs/scenario-set.stdout" 2>"$logs/scenario-set.stderr" \
      || { cat "$logs/scenario-set.stderr" >&2; die "scenario-set failed ($logs)"; }
  else
  python3 - "$dir/scenario.json" "$failed" "$ms" "$written" <<'PY'
import json, sys
p, t, ms, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
d = json.load(open(p))
d["failed_instant"] = t
d["stale_lock_file_left"] = False
d["bench"]["files_written"] = int(n) if n else None
d["bench"]["generate_ms"] = ms
json.dump(d, open(p, "w"), indent=2)
PY
  fi
  log "  killed writer of $failed after writing ${written:-?} files; generation took ${ms} ms (JVM start to kill)"
  echo "{\"failed_instant\": \"$failed\", \"files\": ${written:-null}, \"generate_ms\": $ms}"
}

# <dir> may be an s3a://bucket/key base path (a table bench-fail made there). BENCH_PHASE_URL, when set,
# gets a GET <url>/hudi-rollback-call right before rollbackFailedWrites() and <url>/hudi-jvm-after right
# after it (scripts/bench-s3-rollback's counting proxy attributes requests to the call with them).
cmd_bench_rollback() {
  [[ $# == 2 ]] || die "usage: run.sh bench-rollback <version-key> <dir|s3a://bucket/key>"
  local key="$1" dir="$2"
  module_dir "$key" >/dev/null
  cmd_build
  HJ_JVM_EXTRA=("${BENCH_JVM[@]}")
  local t0 rc=0
  t0=$(date +%s%N)
  HJ_TIMEOUT="${BENCH_ROLLBACK_TIMEOUT_S:-7200}" hj "$key" bench-rollback --dir "$dir" || rc=$?
  log "bench-rollback: JVM wall time $(( ($(date +%s%N) - t0) / 1000000 )) ms (JVM start to exit, heartbeat wait included)"
  return $rc
}

# Hudi's own Avro HFile reader on a standalone HFile: 0.x's HBase-based reader, or with --native
# hudi-io's native reader (the only one in 1.x). Prints keys and records as JSON (HFileRead.java).
cmd_hfile_read() {
  [[ $# == 2 || ( $# == 3 && "${3:-}" == --native ) ]] \
    || die "usage: run.sh hfile-read <version-key> <hfile> [--native]"
  local key="$1" file="$2" mod
  shift 2
  cmd_build
  mod="$(module_dir "$key")"
  timeout "${HJ_TIMEOUT:-900}" java "${JAVA_OPTS[@]}" \
    -cp "$mod/target/classes:$(cat "$mod/target/classpath.txt")" io.hudikeeper.interop.HFileRead "$file" "$@"
}

# <n> completed upsert commits in one JVM, each what `commit` writes (Main commits-n).
cmd_commits_n() {
  [[ $# == 3 && "$3" =~ ^[1-9][0-9]*$ ]] || die "usage: run.sh commits-n <version-key> <dir> <n>"
  module_dir "$1" >/dev/null
  [[ -f "$2/scenario.json" ]] || die "$2/scenario.json missing (commits-n needs the scenario of the table)"
  cmd_build
  HJ_TIMEOUT="${HJ_TIMEOUT:-3600}" hj "$1" commits-n --dir "$2" --n "$3"
}

cmd_versions() {
  cmd_build
  local k
  for k in "${VERSION_KEYS[@]}"; do echo "$k $(hj "$k" info | tr -d '\n ')"; done
}

case "${1:-}" in
  build) shift; cmd_build "$@" ;;
  versions) shift; cmd_versions ;;
  selftest) shift; cmd_selftest "$@" ;;
  generate) shift; cmd_generate "$@" ;;
  rollback) shift; cmd_rollback "$@" ;;
  rollback-paused) shift; cmd_rollback_paused "$@" ;;
  verify) shift; cmd_verify "$@" ;;
  diff) shift; exec python3 "$HERE/diff.py" "$@" ;;
  timeline) shift; cmd_timeline "$@" ;;
  archived) shift; cmd_archived "$@" ;;
  bench-fail) shift; cmd_bench_fail "$@" ;;
  bench-rollback) shift; cmd_bench_rollback "$@" ;;
  writer) shift; [[ $# == 4 ]] || die "usage: run.sh writer <version-key> <dir> <id> <commits>"
    cmd_build; hj_exec "$1" writer --dir "$2" --id "$3" --commits "$4" ;;
  savepoint) shift; [[ $# == 3 ]] || die "usage: run.sh savepoint <version-key> <dir> <instant>"
    cmd_build; hj "$1" savepoint --dir "$2" --instant "$3" ;;
  restore) shift; cmd_restore "$@" ;;
  commit) shift; [[ $# == 2 ]] || die "usage: run.sh commit <version-key> <dir>"
    cmd_build; hj "$1" commit --dir "$2" ;;
  commits-n) shift; cmd_commits_n "$@" ;;
  hold-lock) shift; [[ $# == 3 ]] || die "usage: run.sh hold-lock <version-key> <dir> <seconds>"
    cmd_build; hj_exec "$1" hold-lock --dir "$2" --seconds "$3" ;;
  lock-cycles) shift; [[ $# == 5 || $# == 6 ]] || die "usage: run.sh lock-cycles <version-key> <base-uri> <cycles> <hold-ms> <wait-ms> [pause-ms]"
    cmd_build; hj_exec "$1" lock-cycles --base "$2" --cycles "$3" --hold-ms "$4" --wait-ms "$5" --pause-ms "${6:-0}" ;;
  kill-writer) shift; [[ $# == 3 ]] || die "usage: run.sh kill-writer <version-key> <dir> <logdir>"
    cmd_build; mkdir -p "$3"; kill_failed_writer "$1" "$2" "$3" ;;
  hfile-read) shift; cmd_hfile_read "$@" ;;
  dump) shift; [[ $# == 2 ]] || die "usage: run.sh dump <version-key> <timeline-file>"; cmd_build; hj "$1" dump --file "$2" ;;
  *) sed -n '2,/^set -euo/p' "$0" | grep '^#' >&2; exit 2 ;;
esac
