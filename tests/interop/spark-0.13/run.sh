#!/usr/bin/env bash
# Hudi 0.13.1 through Spark: table-version-5 tables WITH a metadata table (the 0.13.1 Java client of
# ../run.sh writes none). See ../README.md, "Hudi 0.13.1 through Spark (spark-0.13)". scripts/test
# builds it; tests/interop_spark013.rs drives it (a subset in CI, the rest with HUDI_KEEPER_INTEROP_FULL=1).
#
#   run.sh build                       idempotent (offline first; target/classpath.txt, no fat jar)
#   run.sh info                        Hudi, Spark and Java versions (starts Spark once)
#   run.sh generate <scenario> <dir>   completed commits, one failed write (SIGKILLed writer), and the
#                                      reference copy <dir>-hudi-rollback rolled back by Hudi 0.13.1
#   run.sh rollback <dir>              Hudi 0.13.1's rollbackFailedWrites() on <dir> (in place; JSON)
#   run.sh verify <dir> [--expect <records.json>] [--no-followup]
#                                      read <dir> back with Hudi 0.13.1 through Spark (on a scratch copy;
#                                      JSON report; exit 1 on a failed check)
#   run.sh mdt-dump <dir>              the metadata table's timeline and every block of its files
#                                      partition (JSON; read-only)
#   run.sh savepoint <dir> <instant>   Hudi 0.13.1's savepoint of a completed commit (in place; JSON)
#   run.sh restore <dir> <instant> [--savepoint|--to-instant]
#                                      Hudi 0.13.1's restoreToSavepoint (default) or
#                                      restoreToInstant(<instant>, true) (in place; JSON; exit 1 and
#                                      "restore to ... failed: <exception>" last on stderr when refused)
#
# scenarios (the harness grammar, ../README.md; short names in brackets):
#   cow-mdt-direct [cow-mdt], mor-mdt-direct [mor-mdt]   killed after the write, before its commit: the
#                                      metadata table has nothing of the failed instant
#   cow-mdt-direct-mdtdone [cow-mdt-mdtdone], mor-mdt-direct-mdtdone [mor-mdt-mdtdone]
#                                      killed inside commit(), after the metadata table's deltacommit of
#                                      the failed instant completed, before the data table's did
#   cow-mdt-direct-mdtinflight, mor-mdt-direct-mdtinflight   killed before the metadata table's
#                                      deltacommit of the failed instant completed (its log blocks written)
#   <cow|mor>-<mdt|nomdt>-direct[-requested]   also accepted
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
INTEROP="$(cd "$HERE/.." && pwd)"
MVN_SETTINGS="$INTEROP/.mvn/settings.xml"
case "${LC_ALL:-${LC_CTYPE:-${LANG:-}}}" in
  *[Uu][Tt][Ff]-8* | *[Uu][Tt][Ff]8*) ;;
  *) export LC_ALL=C.UTF-8 ;;
esac

# ../run.sh's Java 17 flags (Hadoop, Kryo, Hudi's JOL) plus what Spark 3.2 opens on Java 17 (its
# launcher's JavaModuleOptions: sun.nio.ch, sun.nio.cs, sun.security.action, sun.util.calendar, ...).
JAVA_OPTS=(
  -Xmx1g -XX:+UseSerialGC -XX:TieredStopAtLevel=1
  -Djava.net.preferIPv4Stack=true -Djdk.attach.allowAttachSelf=true
  -Djol.skipHotspotSAAttach=true
  -Dio.netty.tryReflectionSetAccessible=true
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
  --add-opens=java.base/java.text=ALL-UNNAMED
  --add-opens=java.base/java.math=ALL-UNNAMED
  --add-opens=java.base/java.security=ALL-UNNAMED
  --add-opens=java.base/sun.nio.ch=ALL-UNNAMED
  --add-opens=java.base/sun.nio.cs=ALL-UNNAMED
  --add-opens=java.base/sun.security.action=ALL-UNNAMED
  --add-opens=java.base/sun.util.calendar=ALL-UNNAMED
  --add-opens=java.base/jdk.internal.misc=ALL-UNNAMED
  --add-exports=java.base/jdk.internal.misc=ALL-UNNAMED
  --add-exports=java.base/sun.nio.ch=ALL-UNNAMED
)
# Spark otherwise binds to the first non-loopback address (and warns)
export SPARK_LOCAL_IP=127.0.0.1
read -ra HJ_JVM_EXTRA <<<"${HJ_JVM_FLAGS:-}"

die() { echo "spark-0.13/run.sh: $*" >&2; exit 1; }
log() { echo "[spark-0.13 $(date +%H:%M:%S)] $*" >&2; }

# ---------------------------------------------------------------------------------------------- build
cmd_build() {
  local stamp="$HERE/target/.build-stamp"
  if [[ -f "$stamp" && -f "$HERE/target/classpath.txt" && -d "$HERE/target/classes/io" ]] \
      && [[ -z "$(find "$HERE/pom.xml" "$HERE/src" "$INTEROP/src/common" "$INTEROP/src/v013" "$INTEROP/.mvn" \
                  -newer "$stamp" -print -quit)" ]]; then
    log "build: up to date"
    return 0
  fi
  local mvn_args=(-q -B -s "$MVN_SETTINGS" -Dstyle.color=never -f "$HERE/pom.xml")
  log "build: mvn compile (Hudi 0.13.1 Spark 3.2 bundle, Spark 3.2)"
  mkdir -p "$HERE/target"
  local new_stamp="$stamp.$$"
  touch "$new_stamp"
  if ! mvn "${mvn_args[@]}" -o compile >"$HERE/target/build.log.$$" 2>&1; then
    mvn "${mvn_args[@]}" compile >"$HERE/target/build.log.$$" 2>&1 \
      || { cat "$HERE/target/build.log.$$" >&2; rm -f "$new_stamp"; die "build failed"; }
  fi
  rm -f "$HERE/target/build.log.$$"
  mv -f "$new_stamp" "$stamp"
}

cp_of() { echo "$HERE/target/classes:$(cat "$HERE/target/classpath.txt")"; }

# java.io.tmpdir of the JVMs (Spark's scratch folders, blockmgr-*/spark-*, which a SIGKILLed JVM leaves
# behind): SPARK013_TMP when set (generate and verify point it into their log or scratch folder)
tmp_flag() {
  if [[ -n "${SPARK013_TMP:-}" ]]; then mkdir -p "$SPARK013_TMP"; echo "-Djava.io.tmpdir=$SPARK013_TMP"; fi
}

# java <Main args...>
hj() {
  [[ -f "$HERE/target/classpath.txt" ]] || cmd_build
  local tmp; tmp=($(tmp_flag))
  timeout "${HJ_TIMEOUT:-900}" java "${JAVA_OPTS[@]}" "${tmp[@]}" "${HJ_JVM_EXTRA[@]}" -cp "$(cp_of)" \
    io.hudikeeper.interop.Main "$@"
}

# like hj, but replaces the (sub)shell with the JVM: `hj_exec ... &` makes $! the JVM's pid
hj_exec() {
  local tmp; tmp=($(tmp_flag))
  exec java "${JAVA_OPTS[@]}" "${tmp[@]}" "${HJ_JVM_EXTRA[@]}" -cp "$(cp_of)" io.hudikeeper.interop.Main "$@"
}

# short names of the brief -> the harness grammar
canonical() {
  case "$1" in
    cow-mdt | mor-mdt) echo "$1-direct" ;;
    cow-mdt-mdtdone | mor-mdt-mdtdone | cow-mdt-mdtinflight | mor-mdt-mdtinflight) echo "${1/-mdt-/-mdt-direct-}" ;;
    *) echo "$1" ;;
  esac
}

# Runs the failing writer in its own JVM, waits for READY_TO_DIE, SIGKILLs it; prints the instant.
kill_failed_writer() { # dir logdir
  local dir="$1" logs="$2"
  local out="$logs/fail.stdout" err="$logs/fail.stderr"
  : >"$out"
  hj_exec fail --dir "$dir" >"$out" 2>"$err" &
  local pid=$! waited=0
  while ! grep -q '^READY_TO_DIE' "$out"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      cat "$out" "$err" >&2 || true
      die "failed writer exited before READY_TO_DIE"
    fi
    sleep 0.2
    waited=$((waited + 1))
    if (( waited > ${FAIL_WAIT_TICKS:-3000} )); then
      kill -9 "$pid" || true; die "failed writer did not reach READY_TO_DIE in $(( ${FAIL_WAIT_TICKS:-3000} / 5 ))s"
    fi
  done
  kill -9 "$pid"
  wait "$pid" 2>/dev/null || true
  grep '^READY_TO_DIE' "$out" | head -1 | awk '{print $2}'
}

cmd_generate() {
  [[ $# == 2 ]] || die "usage: run.sh generate <scenario> <dir>"
  local sc dir="$2"
  sc="$(canonical "$1")"
  [[ "$sc" =~ ^(cow|mor)-(mdt|nomdt)-direct(-mdtdone|-mdtinflight|-requested)?$ ]] \
    || die "scenario $1 is not made by spark-0.13 (see run.sh's header)"
  [[ "$sc" =~ -nomdt-.*-mdt ]] && die "$sc: -mdtdone/-mdtinflight need the metadata table"
  [[ -e "$dir" ]] && die "$dir already exists"
  [[ "$dir" == /* ]] || dir="$PWD/$dir"
  cmd_build
  local logs="$dir.logs" ref="$dir-hudi-rollback" t0=$SECONDS t1
  rm -rf "$logs" "$ref" "$ref.logs"
  mkdir -p "$logs"
  export INTEROP_LOCK_LOG="$logs/locks.log" SPARK013_TMP="$logs/tmp"
  log "generate $sc -> $dir"
  hj commits --dir "$dir" --scenario "$sc" >"$logs/commits.stdout" 2>"$logs/commits.stderr" \
    || { tail -50 "$logs/commits.stderr" >&2; die "completed commits failed ($logs)"; }
  log "  commits done in $((SECONDS - t0))s"
  t1=$SECONDS
  local failed
  failed="$(kill_failed_writer "$dir" "$logs")"
  [[ -n "$failed" ]] || die "no failed instant reported"
  local stale_lock=false
  [[ -e "$dir/.hoodie/lock" ]] && stale_lock=true
  hj scenario-set --dir "$dir" --json "{\"failed_instant\": \"$failed\", \"stale_lock_file_left\": $stale_lock}" \
    2>"$logs/scenario-set.stderr" || { cat "$logs/scenario-set.stderr" >&2; die "scenario-set failed"; }
  log "  killed writer of $failed after $((SECONDS - t1))s; stale lock: $stale_lock"
  # reference copy with Hudi's own rollback
  t1=$SECONDS
  cp -a "$dir" "$ref"
  if [[ $stale_lock == true ]]; then
    # Hudi would wait for this lock forever: remove it, as an operator would, in the reference copy only
    rm -f "$ref/.hoodie/lock" "$ref/.hoodie/.lock.crc"
  fi
  mkdir -p "$ref.logs"
  INTEROP_LOCK_LOG="$ref.logs/locks.log" hj rollback --dir "$ref" >"$ref.logs/rollback.stdout" 2>"$ref.logs/rollback.stderr" \
    || { cat "$ref.logs/rollback.stdout" >&2; tail -50 "$ref.logs/rollback.stderr" >&2; die "Hudi rollback of the reference copy failed"; }
  rm -rf "$SPARK013_TMP"
  log "  Hudi's rollback of the reference copy in $((SECONDS - t1))s; all done in $((SECONDS - t0))s: $dir, $ref"
}

cmd_rollback() {
  [[ $# == 1 ]] || die "usage: run.sh rollback <dir>"
  [[ -f "$1/scenario.json" ]] || die "$1/scenario.json missing"
  cmd_build
  hj rollback --dir "$1"
}

cmd_verify() {
  local usage="usage: run.sh verify <dir> [--expect <records.json>] [--no-followup]"
  [[ $# -ge 1 ]] || die "$usage"
  local dir="$1" expect="" followup=true
  shift
  while (( $# )); do
    case "$1" in
      --expect) [[ $# -ge 2 ]] || die "$usage"; expect="$2"; shift 2 ;;
      --no-followup) followup=false; shift ;;
      *) die "$usage" ;;
    esac
  done
  [[ -f "$dir/scenario.json" ]] || die "$dir/scenario.json missing (verify needs the scenario of the table)"
  cmd_build
  local scratch rc=0
  scratch="$(mktemp -d /tmp/interop-spark013-verify.XXXXXX)"
  cp -a "$dir" "$scratch/table"
  if [[ -n "$expect" ]]; then
    expect="$(cd "$(dirname "$expect")" && pwd)/$(basename "$expect")"
  else
    expect="$scratch/table/expected-records.json"
  fi
  SPARK013_TMP="$scratch/tmp" hj verify --dir "$scratch/table" --expect "$expect" --followup "$followup" \
    2>"$scratch/verify.stderr" || rc=$?
  rm -rf "$scratch/tmp"
  if [[ $rc == 0 ]]; then rm -rf "$scratch"; else log "verify failed; scratch copy and stderr kept in $scratch"; fi
  return $rc
}

cmd_savepoint() {
  [[ $# == 2 ]] || die "usage: run.sh savepoint <dir> <instant>"
  [[ -f "$1/scenario.json" ]] || die "$1/scenario.json missing (savepoint needs the scenario of the table)"
  cmd_build
  log "savepoint $2 of $1"
  hj savepoint --dir "$1" --instant "$2"
}

# Hudi's own restore of <dir> to <instant>: restoreToSavepoint (default) or restoreToInstant.
cmd_restore() {
  local usage="usage: run.sh restore <dir> <instant> [--savepoint|--to-instant]"
  [[ $# == 2 || $# == 3 ]] || die "$usage"
  local dir="$1" instant="$2" mode
  case "${3:---savepoint}" in
    --savepoint) mode=savepoint ;;
    --to-instant) mode=instant ;;
    *) die "$usage" ;;
  esac
  [[ -f "$dir/scenario.json" ]] || die "$dir/scenario.json missing (restore needs the scenario of the table)"
  cmd_build
  log "restore $dir to $instant ($mode)"
  hj restore --dir "$dir" --instant "$instant" --mode "$mode"
}

cmd_mdt_dump() {
  [[ $# == 1 ]] || die "usage: run.sh mdt-dump <dir>"
  cmd_build
  hj mdt-dump --dir "$1"
}

cmd="${1:-}"
(( $# )) && shift
case "$cmd" in
  build) cmd_build ;;
  info) cmd_build; hj info ;;
  generate) cmd_generate "$@" ;;
  rollback) cmd_rollback "$@" ;;
  verify) cmd_verify "$@" ;;
  mdt-dump) cmd_mdt_dump "$@" ;;
  savepoint) cmd_savepoint "$@" ;;
  restore) cmd_restore "$@" ;;
  *) sed -n '2,30p' "${BASH_SOURCE[0]}" >&2; exit 2 ;;
esac
