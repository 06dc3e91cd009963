//! Hudi 1.1.1's (and 1.2.0's) StorageBasedLockProvider against hudi-keeper's storage lock, on the
//! S3-compatible server on loopback (issue #15, item 4). Hudi's own provider class runs in the harness JVM
//! (`run.sh lock-cycles`) with its S3 client of the harness's own (Hudi's, in hudi-aws 1.x, is not
//! served): Hudi's lease logic (acquire, renew every second, expiry, the 500 ms drift allowance) is
//! the one under test, and the table lock is `.hoodie/.locks/table_lock.json` on both sides.

use hudi_keeper_test_support as common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::interop::{enabled, enabled_full, run_sh_command as run_sh};
use hudi_keeper_core::exec::rollback::{rollback, RollbackOptions, Selection};
use hudi_keeper_core::protocol::detect::LazyWritersEvidence;
use hudi_keeper_core::protocol::heartbeat::HeartbeatPolicy;
use hudi_keeper_core::protocol::lock::storage_lock::{LockData, DEFAULT_PATH};
use hudi_keeper_core::protocol::lock::{acquire, LockOptions, LockProvider, StorageLockConfig};
use hudi_keeper_core::storage::{RelPath, Storage};
use hudi_keeper_core::{Error, Table};

/// One case at a time: each runs several JVMs, and the machine has two cores.
static SERIAL: Mutex<()> = Mutex::new(());

/// Hudi's shortest lease: the provider refuses a validity under 10 s or under 10 renew intervals.
const HUDI_VALIDITY_MS: i64 = 10_000;

fn storage_lock_env() -> Vec<(String, String)> {
    vec![(
        "INTEROP_LOCK".to_string(),
        format!(
            "storage,{},{},1",
            common::s3::endpoint(),
            HUDI_VALIDITY_MS / 1000
        ),
    )]
}

/// hudi-keeper's storage lock on the default lock file, with the given lease.
fn our_storage_lock(validity: Duration, renew: Duration, timeout: Duration) -> LockOptions {
    LockOptions {
        provider: LockProvider::Storage(StorageLockConfig {
            path: RelPath::parse(DEFAULT_PATH).expect("lock path"),
            validity,
            renew_interval: renew,
        }),
        timeout,
        retry_interval: Duration::from_millis(100),
    }
}

fn epoch_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// The lock file as the store has it now.
fn lock_file(rt: &tokio::runtime::Runtime, storage: &Storage) -> LockData {
    let bytes = rt
        .block_on(storage.get(&RelPath::parse(DEFAULT_PATH).expect("lock path")))
        .expect("read the lock file");
    LockData::parse(&bytes).expect("a lock file both sides can read")
}

/// One `run.sh lock-cycles` JVM: Hudi's StorageBasedLockProvider taking the lock of `base`.
struct HudiLockCycles {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
    seen: Vec<String>,
    stderr: PathBuf,
}

impl HudiLockCycles {
    fn spawn(
        key: &str,
        base: &str,
        cycles: u32,
        hold_ms: u64,
        wait_ms: u64,
        pause_ms: u64,
        log: &Path,
    ) -> Self {
        use std::io::BufRead;
        let stderr = log.with_extension("stderr");
        let mut child = run_sh(&storage_lock_env())
            .args([
                "lock-cycles",
                key,
                base,
                &cycles.to_string(),
                &hold_ms.to_string(),
                &wait_ms.to_string(),
                &pause_ms.to_string(),
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::fs::File::create(&stderr).expect("stderr file"))
            .spawn()
            .expect("spawn run.sh lock-cycles");
        let out = child.stdout.take().expect("stdout");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            lines,
            seen: Vec::new(),
            stderr,
        }
    }

    fn log(&self) -> String {
        let err = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let tail: Vec<&str> = err.lines().rev().take(40).collect();
        format!(
            "stdout so far: {:?}\nstderr (last lines, newest first):\n{}",
            self.seen,
            tail.join("\n")
        )
    }

    /// The next line starting with `prefix` (JVM start and a build included, within `bound`).
    fn expect(&mut self, prefix: &str, bound: Duration) -> String {
        let deadline = Instant::now() + bound;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.starts_with(prefix) {
                        return line;
                    }
                }
                Err(e) => panic!(
                    "no `{prefix}` line from Hudi's lock provider ({e}); {}",
                    self.log()
                ),
            }
        }
    }

    /// Wait for the JVM to end (successfully); every line it printed.
    fn finish(mut self) -> Vec<String> {
        let status = self.child.wait().expect("wait for the JVM");
        self.seen.extend(self.lines.try_iter());
        assert!(
            status.success(),
            "lock-cycles failed: {status}; {}",
            self.log()
        );
        self.seen
    }

    /// SIGKILL: a writer that dies holding the lock.
    fn kill(mut self) {
        self.child.kill().expect("SIGKILL the JVM");
        let _ = self.child.wait();
    }
}

/// `LOCKED <ms> <owner> <validUntil>` → (owner, validUntil).
fn locked_line(line: &str) -> (String, i64) {
    let f: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(f.len(), 4, "{line}");
    (f[2].to_string(), f[3].parse().expect("validUntil"))
}

fn field_ms(line: &str) -> i64 {
    line.split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no time in `{line}`"))
}

#[test]
fn a_hudi_1_1_storage_lock_holder_keeps_hudi_keeper_out_until_its_lease_lapses_after_a_sigkill() {
    if enabled() {
        hudi_holder_keeps_us_out("1.1");
    }
}

#[test]
fn a_hudi_1_2_storage_lock_holder_keeps_hudi_keeper_out_until_its_lease_lapses_after_a_sigkill() {
    if enabled_full("Hudi 1.2 storage lock holder") {
        hudi_holder_keeps_us_out("1.2");
    }
}

fn hudi_holder_keeps_us_out(key: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(common::s3::assert_conditional_writes_honoured());
    let work = tempfile::tempdir().expect("tempdir");
    let root = common::s3::unique("sl-hudi-holds");
    let storage = Storage::open(
        &format!("s3://{}/{root}", common::s3::BUCKET),
        &common::s3::options(),
    )
    .expect("storage");
    let base = format!("s3a://{}/{root}", common::s3::BUCKET);

    // Hudi takes the lock and keeps renewing it (every second) until it is killed.
    let mut hudi = HudiLockCycles::spawn(
        key,
        &base,
        1,
        600_000,
        30_000,
        0,
        &work.path().join("holder"),
    );
    let (owner, _) = locked_line(&hudi.expect("LOCKED ", Duration::from_secs(180)));
    let held = lock_file(&rt, &storage);
    assert_eq!(held.owner, owner, "the lock file is Hudi's lease");
    assert!(!held.expired);

    // hudi-keeper reads Hudi's lease as held, through 2.5 s of Hudi's renewals, and changes nothing.
    let ours = our_storage_lock(
        Duration::from_secs(10),
        Duration::from_secs(1),
        Duration::from_millis(2_500),
    );
    let err = rt
        .block_on(acquire(&storage, &ours))
        .expect_err("hudi-keeper took a lock Hudi holds");
    assert!(matches!(err, Error::LockTimeout { .. }), "{err}");
    assert!(err.to_string().contains(&owner), "{err}");
    let renewed = lock_file(&rt, &storage);
    assert_eq!(renewed.owner, owner);
    assert!(
        renewed.valid_until > held.valid_until,
        "Hudi renewed its lease: {held:?} then {renewed:?}"
    );

    // The holder dies. Its lease is never released, and hudi-keeper, trying all along, takes it
    // over only once it has lapsed by more than Hudi's 500 ms drift allowance.
    hudi.kill();
    std::thread::sleep(Duration::from_millis(500)); // a renewal already on the wire lands
    let dead = lock_file(&rt, &storage);
    assert_eq!(dead.owner, owner);
    assert!(!dead.expired, "a SIGKILLed holder cannot release");
    let ours = our_storage_lock(
        Duration::from_secs(10),
        Duration::from_secs(1),
        Duration::from_secs(60),
    );
    let guard = rt
        .block_on(acquire(&storage, &ours))
        .expect("the lapsed lease is taken over");
    let mine = lock_file(&rt, &storage);
    assert_ne!(mine.owner, owner);
    // hudi-keeper's lease runs from the moment it judged Hudi's lapsed (its validity later).
    let judged_at = mine.valid_until - 10_000;
    assert!(
        judged_at > dead.valid_until + 500,
        "hudi-keeper took Hudi's lease {} ms after its validUntil (the drift allowance is 500 ms): {dead:?} then {mine:?}",
        judged_at - dead.valid_until
    );
    let waited = guard.waited;
    assert!(waited > Duration::ZERO);
    rt.block_on(guard.release()).expect("release");
    eprintln!(
        "Hudi {key} storage lock, holder SIGKILLed: hudi-keeper took it over {} ms after its validUntil, after waiting {} ms",
        judged_at - dead.valid_until,
        waited.as_millis()
    );
}

#[test]
fn hudi_keepers_storage_lock_keeps_a_hudi_1_1_writer_out_until_its_lease_lapses_after_a_sigkill() {
    if enabled() {
        our_holder_keeps_hudi_out("1.1");
    }
}

#[test]
fn hudi_keepers_storage_lock_keeps_a_hudi_1_2_writer_out_until_its_lease_lapses_after_a_sigkill() {
    if enabled_full("hudi-keeper's storage lock against a Hudi 1.2 writer") {
        our_holder_keeps_hudi_out("1.2");
    }
}

fn our_holder_keeps_hudi_out(key: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    use common::runs::{finishing, s3_fixture, store_flags, within};
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(common::s3::assert_conditional_writes_honoured());
    let work = tempfile::tempdir().expect("tempdir");
    let (f, root) = s3_fixture(&rt, "sl-ours-holds", common::fixtures::Kind::CowV8, false);
    let storage = f.storage();
    let base = format!("s3a://{}/{root}", common::s3::BUCKET);

    // hudi-keeper, the binary as deployed, rolls back the fixture's failed write under the storage
    // lock (a 6 s lease renewed every second: slack for a loaded machine); the store never answers
    // its completed rollback, so it stays inside its lock window, renewing.
    let proxy = common::proxy::SlowProxy::start(&common::s3::endpoint(), Duration::from_millis(20));
    let timeline = format!("/{root}/.hoodie/timeline/");
    proxy.hang(&["PUT ", &timeline, ".rollback HTTP"]);
    let mut ours = common::bin()
        .args([
            "rollback",
            &f.uri,
            "--yes",
            "--instant",
            common::fixtures::TF,
            "--force",
        ])
        .args(["--lock", "storage", "--lock-storage-validity", "6s"])
        .args([
            "--lock-storage-renew-interval",
            "1s",
            "--lock-timeout",
            "30s",
        ])
        .args(store_flags(&proxy.endpoint()))
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(work.path().join("ours.stderr")).expect("stderr file"))
        .spawn()
        .expect("spawn hudi-keeper");
    assert!(
        within(Duration::from_secs(60), || finishing(&rt, &f, &root)),
        "hudi-keeper never held the lock inside its rollback: {}",
        std::fs::read_to_string(work.path().join("ours.stderr")).unwrap_or_default()
    );
    let held = lock_file(&rt, &storage);

    // Hudi reads hudi-keeper's lease as held (through its renewals) and does not take it.
    let refused =
        HudiLockCycles::spawn(key, &base, 1, 0, 2_500, 0, &work.path().join("refused")).finish();
    assert!(
        refused.iter().any(|l| l.starts_with("NOT_LOCKED "))
            && !refused.iter().any(|l| l.starts_with("LOCKED ")),
        "Hudi took a lock hudi-keeper holds: {refused:?}"
    );
    let renewed = lock_file(&rt, &storage);
    assert_eq!(
        renewed.owner, held.owner,
        "the lease is still hudi-keeper's"
    );
    assert!(!renewed.expired && renewed.valid_until > held.valid_until);

    // A Hudi writer waits for the lock; hudi-keeper dies holding it.
    let mut waiter =
        HudiLockCycles::spawn(key, &base, 1, 0, 60_000, 0, &work.path().join("waiter"));
    ours.kill().expect("SIGKILL hudi-keeper");
    let _ = ours.wait();
    std::thread::sleep(Duration::from_millis(500)); // a renewal already on the wire lands
    let dead = lock_file(&rt, &storage);
    assert_eq!(dead.owner, held.owner);
    assert!(!dead.expired, "a SIGKILLed holder cannot release");
    let (hudi_owner, hudi_until) = locked_line(&waiter.expect("LOCKED ", Duration::from_secs(120)));
    assert_ne!(hudi_owner, dead.owner);
    waiter.finish();
    // Hudi's lease runs from the moment it judged hudi-keeper's lapsed (its validity later).
    let judged_at = hudi_until - HUDI_VALIDITY_MS;
    assert!(
        judged_at > dead.valid_until + 500,
        "Hudi took hudi-keeper's lease {} ms after its validUntil (the drift allowance is 500 ms): {dead:?}",
        judged_at - dead.valid_until
    );
    let released = lock_file(&rt, &storage);
    assert_eq!(released.owner, hudi_owner);
    assert!(released.expired, "Hudi released with `expired: true`");
    eprintln!(
        "hudi-keeper's storage lock, holder SIGKILLed: Hudi {key} took it over {} ms after its validUntil",
        judged_at - dead.valid_until
    );
}

/// Records, from the requests hudi-keeper makes on the lock file, the spans in which it surely
/// held the lease: from the answer to a conditional write that followed a read of the lock file
/// (an acquisition) to the start of its last conditional write before the next acquisition (the
/// release; a renewal if the release never came). Each recorded span lies inside a real hold.
/// And the attempts that found the lease taken: a read of the lock file followed by another read
/// with no successful write between (it was held, or a conditional write lost the race).
#[derive(Debug, Default)]
struct LeaseSpans(Mutex<LeaseSpansState>);

#[derive(Debug, Default)]
struct LeaseSpansState {
    read_before_write: bool,
    write_started_ms: i64,
    spans: Vec<(i64, i64)>,
    refused: usize,
}

impl hudi_keeper_core::storage::Interceptor for LeaseSpans {
    fn before(
        &self,
        op: hudi_keeper_core::storage::OpKind,
        path: &RelPath,
    ) -> Result<(), hudi_keeper_core::storage::StorageError> {
        use hudi_keeper_core::storage::OpKind;
        if path.to_string() == DEFAULT_PATH {
            let mut s = self.0.lock().unwrap_or_else(|e| e.into_inner());
            match op {
                OpKind::Get => {
                    if s.read_before_write {
                        s.refused += 1;
                    }
                    s.read_before_write = true;
                }
                OpKind::PutIfAbsent | OpKind::PutIfMatch | OpKind::Put => {
                    s.write_started_ms = epoch_ms()
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn after(
        &self,
        op: hudi_keeper_core::storage::OpKind,
        path: &RelPath,
    ) -> Result<(), hudi_keeper_core::storage::StorageError> {
        use hudi_keeper_core::storage::OpKind;
        if path.to_string() == DEFAULT_PATH
            && matches!(op, OpKind::PutIfAbsent | OpKind::PutIfMatch | OpKind::Put)
        {
            let now = epoch_ms();
            let mut s = self.0.lock().unwrap_or_else(|e| e.into_inner());
            if s.read_before_write {
                s.read_before_write = false;
                s.spans.push((now, now));
            } else {
                let started = s.write_started_ms;
                if let Some(last) = s.spans.last_mut() {
                    last.1 = last.1.max(started);
                }
            }
        }
        Ok(())
    }
}

#[test]
fn hudi_1_1_lock_holders_and_hudi_keeper_rolling_back_under_the_storage_lock_never_hold_it_at_once()
{
    if enabled() {
        holders_and_us_never_at_once("1.1");
    }
}

#[test]
fn hudi_1_2_lock_holders_and_hudi_keeper_rolling_back_under_the_storage_lock_never_hold_it_at_once()
{
    if enabled_full("Hudi 1.2 lock holders and hudi-keeper under the storage lock") {
        holders_and_us_never_at_once("1.2");
    }
}

fn holders_and_us_never_at_once(key: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    const JAVA: usize = 2;
    const CYCLES: u32 = 4;
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(common::s3::assert_conditional_writes_honoured());
    let work = tempfile::tempdir().expect("tempdir");
    let (f, root) =
        common::runs::s3_fixture(&rt, "sl-contend", common::fixtures::Kind::CowV8, false);
    let base = format!("s3a://{}/{root}", common::s3::BUCKET);
    let spans = std::sync::Arc::new(LeaseSpans::default());
    let storage = Storage::open(&f.uri, &common::s3::options())
        .expect("storage")
        .with_interceptor(spans.clone());

    // Hudi's provider in two JVMs, as two writers' lock managers: tryLock, hold 300 ms, unlock.
    let mut hudi: Vec<HudiLockCycles> = (0..JAVA)
        .map(|i| {
            HudiLockCycles::spawn(
                key,
                &base,
                CYCLES,
                300,
                60_000,
                300,
                &work.path().join(format!("hudi{i}")),
            )
        })
        .collect();

    // Meanwhile hudi-keeper rolls back one failed write after another, under the storage lock
    // (two lock windows per rollback: scheduling, then finishing).
    let options = RollbackOptions {
        lazy_writers: Some(LazyWritersEvidence::Assumed),
        heartbeat: HeartbeatPolicy {
            min_instant_age: Duration::ZERO,
            clock_skew_margin: Duration::ZERO,
            ..Default::default()
        },
        lock: our_storage_lock(
            Duration::from_secs(10),
            Duration::from_secs(1),
            Duration::from_secs(120),
        ),
        ..Default::default()
    };
    let mut failed = vec![common::fixtures::TF.to_string()];
    let mut rolled_back: Vec<String> = Vec::new();
    let mut lock_waits = 0usize;
    let started = Instant::now();
    loop {
        let running = hudi
            .iter_mut()
            .any(|h| matches!(h.child.try_wait(), Ok(None)));
        if !running && rolled_back.len() >= 2 {
            break;
        }
        if started.elapsed() >= Duration::from_secs(300) {
            // What each holder got to, and what hudi-keeper did meanwhile: a stall shows where.
            let logs: Vec<String> = hudi
                .iter_mut()
                .enumerate()
                .map(|(i, h)| {
                    h.seen.extend(h.lines.try_iter());
                    format!("hudi{i}: {}", h.log())
                })
                .collect();
            panic!(
                "the lock holders did not finish in 5 minutes; hudi-keeper rolled back {} writes ({lock_waits} after waiting for the lock)\n{}",
                rolled_back.len(),
                logs.join("\n")
            );
        }
        let table = rt
            .block_on(Table::open_storage(storage.clone()))
            .expect("open table");
        for d in rt
            .block_on(rollback(&table, &Selection::AllFailed, &options, None))
            .expect("rollback under the storage lock")
        {
            if d.lock_wait_ms > 0 {
                lock_waits += 1;
            }
            rolled_back.push(d.instant);
        }
        std::thread::sleep(Duration::from_millis(400));
        let t = common::fixtures::instant_now(0);
        rt.block_on(f.start_write(&t));
        failed.push(t);
    }
    // The write started last was not rolled back yet: once more.
    let table = rt
        .block_on(Table::open_storage(storage.clone()))
        .expect("open table");
    for d in rt
        .block_on(rollback(&table, &Selection::AllFailed, &options, None))
        .expect("rollback under the storage lock")
    {
        rolled_back.push(d.instant);
    }

    // Every hold, as each holder saw it: Hudi's from tryLock's return to the call of unlock,
    // hudi-keeper's from its lease requests (see LeaseSpans).
    let mut holds: Vec<(String, i64, i64)> = Vec::new();
    // Hudi's attempts: from the call of tryLock to its return with the lock.
    let mut attempts: Vec<(String, i64, i64)> = Vec::new();
    for (i, h) in hudi.into_iter().enumerate() {
        let lines = h.finish();
        let mut locked_at = None;
        let mut trying_at = None;
        for l in &lines {
            if l.starts_with("TRYING ") {
                trying_at = Some(field_ms(l));
            } else if l.starts_with("LOCKED ") {
                locked_at = Some(field_ms(l));
                if let (Some(t), Some(at)) = (trying_at.take(), locked_at) {
                    attempts.push((format!("hudi{i}"), t, at));
                }
            } else if l.starts_with("RELEASING ") {
                let from = locked_at.take().expect("RELEASING after LOCKED");
                holds.push((format!("hudi{i}"), from, field_ms(l)));
            }
        }
        assert!(
            lines
                .iter()
                .any(|l| l == &format!("SUMMARY {{\"locked\": {CYCLES}, \"not_locked\": 0}}")),
            "Hudi's provider did not get the lock {CYCLES} times: {lines:?}"
        );
    }
    let (ours, refused) = {
        let s = spans.0.lock().unwrap_or_else(|e| e.into_inner());
        (s.spans.clone(), s.refused)
    };
    assert!(ours.len() >= 2 * rolled_back.len(), "{ours:?}");
    holds.extend(ours.iter().map(|&(a, b)| ("hudi-keeper".to_string(), a, b)));
    // The holders did contend: hudi-keeper found the lease taken, or a Hudi holder waited in
    // tryLock while another held the lock (else "no overlap" would prove nothing).
    let hudi_waits = attempts
        .iter()
        .filter(|(who, tried, locked)| {
            holds
                .iter()
                .any(|(other, a, b)| other != who && a < locked && b > tried)
        })
        .count();
    assert!(
        refused > 0 || hudi_waits > 0,
        "no contention: hudi-keeper never found the lease taken and no Hudi holder waited for another ({} Hudi attempts timed)",
        attempts.len()
    );
    for (i, a) in holds.iter().enumerate() {
        for b in &holds[i + 1..] {
            assert!(
                a.0 == b.0 || a.2 <= b.1 || b.2 <= a.1,
                "two holders at once: {a:?} and {b:?}"
            );
        }
    }
    let once: BTreeSet<&String> = rolled_back.iter().collect();
    assert_eq!(
        once.len(),
        rolled_back.len(),
        "rolled back twice: {rolled_back:?}"
    );
    assert_eq!(
        once,
        failed.iter().collect::<BTreeSet<_>>(),
        "every failed write is rolled back exactly once"
    );
    let released = lock_file(&rt, &f.storage());
    assert!(released.expired, "the last holder released: {released:?}");
    eprintln!(
        "storage lock on S3, Hudi {key} x{JAVA} ({} holds, {hudi_waits} waited for another holder) and hudi-keeper ({} holds, {} rollbacks, {lock_waits} with a lock wait, {refused} attempts found the lease taken): no overlap, {:.0} s",
        JAVA * CYCLES as usize,
        ours.len(),
        rolled_back.len(),
        started.elapsed().as_secs_f64()
    );
}
