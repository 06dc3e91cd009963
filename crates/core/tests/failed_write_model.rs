//! A model test of failed-write detection (issue #29): random sequences of writers (LAZY and
//! EAGER) starting, heartbeating, dying and finishing; replicas of the daemon joining, leaving
//! and restarting with their state kept, lost or corrupt; polls at random times, some of whose
//! store answers are lost. Each poll decides with the real code the daemon runs: what it knows
//! of the writers (`LazyWritersEvidence::known`, `Observation::lazy_writers`) and the verdicts
//! (`assess`), on a timeline built from the modelled files and their modification times (a
//! simulated store and clock). Two properties:
//!
//! * **safety**: no write whose writer is alive is ever rolled back, whatever the replicas
//!   remember or forgot;
//! * **liveness**: a LAZY write whose heartbeat file has expired is rolled back by the first
//!   successful poll after its expiry (the issue allows two polls).
//!
//! The operator's statements are true in every sequence: `assume_lazy_writers` only where every
//! writer is LAZY, a `max_write_duration` only where no write runs longer, EAGER only with one
//! writer at a time. `HUDI_KEEPER_MODEL_CASES` sets the number of sequences (CI runs the
//! default; `scripts/model` runs many more). A failing sequence is shrunk and printed.

use std::collections::BTreeMap;
use std::time::Duration;

use hudi_keeper_core::inspect::Observation;
use hudi_keeper_core::protocol::detect::{
    assess, DetectionInput, FailedWritesPolicy, LazyWritersEvidence,
};
use hudi_keeper_core::protocol::heartbeat::HeartbeatPolicy;
use hudi_keeper_core::storage::{FileMeta, RelPath};
use hudi_keeper_core::table::TimelineLayout;
use hudi_keeper_core::timeline::{InstantZone, Timeline};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

/// The simulated clock starts here (2023-11-14, epoch ms).
const T0: i64 = 1_700_000_000_000;

/// The table's configuration in one sequence.
#[derive(Debug, Clone)]
struct Settings {
    policy: FailedWritesPolicy,
    /// Whether EAGER writers write this table too (never with `assume_lazy_writers`, never under
    /// the EAGER policy, where every writer is EAGER).
    eager_writers: bool,
    assume_lazy_writers: bool,
    /// No write runs longer (the model ends every write by then).
    max_write_duration_ms: Option<i64>,
    interval_ms: i64,
    tolerable_misses: u32,
    min_instant_age_ms: i64,
}

impl Settings {
    fn heartbeat(&self) -> HeartbeatPolicy {
        HeartbeatPolicy {
            interval: Duration::from_millis(self.interval_ms as u64),
            tolerable_misses: self.tolerable_misses,
            min_instant_age: Duration::from_millis(self.min_instant_age_ms as u64),
            clock_skew_margin: Duration::ZERO,
        }
    }

    /// When a heartbeat last written at `mtime` has expired.
    fn expired_at(&self, mtime: i64) -> i64 {
        mtime + self.interval_ms * i64::from(self.tolerable_misses) + 1
    }
}

fn settings() -> impl Strategy<Value = Settings> {
    (
        prop_oneof![
            Just(FailedWritesPolicy::Lazy),
            Just(FailedWritesPolicy::Eager)
        ],
        any::<bool>(),
        any::<bool>(),
        prop::option::of(60_000i64..3_600_000),
        500i64..60_000,
        1u32..4,
        // From far below the poll gaps the events make to far above them.
        1_000i64..1_200_000,
    )
        .prop_map(|(policy, eager, assume, max, interval, misses, min_age)| {
            let lazy = policy == FailedWritesPolicy::Lazy;
            Settings {
                policy,
                eager_writers: lazy && eager && !assume,
                assume_lazy_writers: lazy && assume,
                max_write_duration_ms: max,
                interval_ms: interval,
                tolerable_misses: misses,
                min_instant_age_ms: min_age,
            }
        })
}

/// What a state folder holds after a restart.
#[derive(Debug, Clone, Copy)]
enum StateDir {
    Kept,
    Lost,
    /// A file that cannot be read or parsed: skipped, as if lost.
    Corrupt,
}

#[derive(Debug, Clone)]
enum Event {
    /// A writer starts a write (an EAGER one where the table has EAGER writers and `eager`).
    Start { eager: bool },
    /// The writer of the `n`-th running write dies (killed, lost its lock, OOM).
    Die { n: usize },
    /// The writer of the `n`-th running write completes it.
    Finish { n: usize },
    /// Time passes.
    Advance { ms: i64 },
    /// Replica `r` polls the table (if it is up); its answers from the store are lost.
    Poll { r: usize, lost: bool },
    /// Replica `r` restarts.
    Restart { r: usize, kept: StateDir },
    /// Replica `r` leaves (scaled down, or its node is gone) or joins.
    Toggle { r: usize },
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        3 => any::<bool>().prop_map(|eager| Event::Start { eager }),
        2 => (0usize..4).prop_map(|n| Event::Die { n }),
        2 => (0usize..4).prop_map(|n| Event::Finish { n }),
        6 => prop_oneof![1i64..2_000, 1_000i64..120_000, 60_000i64..2_400_000]
            .prop_map(|ms| Event::Advance { ms }),
        6 => (0usize..3, prop::bool::weighted(0.1)).prop_map(|(r, lost)| Event::Poll { r, lost }),
        1 => (0usize..3, prop_oneof![Just(StateDir::Kept), Just(StateDir::Lost), Just(StateDir::Corrupt)])
            .prop_map(|(r, kept)| Event::Restart { r, kept }),
        1 => (0usize..3).prop_map(|r| Event::Toggle { r }),
    ]
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Running,
    Dead,
    Done,
    RolledBack,
}

#[derive(Debug, Clone)]
struct Write {
    instant: String,
    eager: bool,
    start: i64,
    fate: Fate,
    /// When its writer died or finished.
    end: Option<i64>,
}

impl Write {
    /// The heartbeat file's modification time at `now`: a LAZY writer writes it before its
    /// requested file and rewrites it every interval while it runs; it is deleted when the write
    /// completes or is rolled back; a dead writer's stays as it last wrote it.
    fn heartbeat(&self, s: &Settings, now: i64) -> Option<i64> {
        if self.eager || matches!(self.fate, Fate::Done | Fate::RolledBack) {
            return None;
        }
        let until = self.end.unwrap_or(now);
        Some(self.start + (until - self.start) / s.interval_ms * s.interval_ms)
    }
}

#[derive(Debug, Clone)]
struct Replica {
    up: bool,
    /// `state_dir/writer-evidence`: heartbeat files were seen on the table.
    seen_before: bool,
}

struct World {
    s: Settings,
    now: i64,
    writes: Vec<Write>,
    replicas: Vec<Replica>,
}

impl World {
    fn new(s: Settings) -> Self {
        let replica = Replica {
            up: true,
            seen_before: false,
        };
        World {
            s,
            now: T0,
            writes: Vec::new(),
            replicas: vec![replica; 3],
        }
    }

    fn running(&self) -> Vec<usize> {
        (0..self.writes.len())
            .filter(|i| self.writes[*i].fate == Fate::Running)
            .collect()
    }

    /// The `n`-th running write (modulo), if any.
    fn nth_running(&self, n: usize) -> Option<usize> {
        let r = self.running();
        (!r.is_empty()).then(|| r[n % r.len()])
    }

    fn end(&mut self, i: usize, fate: Fate, at: i64) {
        self.writes[i].fate = fate;
        self.writes[i].end = Some(at);
    }

    /// Time passes; a write reaching the operator's maximum duration has ended by then (the
    /// operator's statement is true): its writer died at that moment.
    fn advance(&mut self, ms: i64) {
        let to = self.now + ms;
        if let Some(max) = self.s.max_write_duration_ms {
            for i in self.running() {
                let limit = self.writes[i].start + max - 1;
                if limit < to {
                    self.end(i, Fate::Dead, limit.max(self.now));
                }
            }
        }
        self.now = to;
    }

    fn start(&mut self, eager: bool) {
        let eager = match self.s.policy {
            FailedWritesPolicy::Eager => true,
            FailedWritesPolicy::Lazy => eager && self.s.eager_writers,
        };
        // Under EAGER a single writer writes the table: its next write starts once the last
        // one ended.
        if self.s.policy == FailedWritesPolicy::Eager && !self.running().is_empty() {
            return;
        }
        // Instant times are unique and increasing (Hudi takes them under the lock).
        if let Some(last) = self.writes.last() {
            let gap = (last.start + 1 - self.now).max(0);
            self.advance(gap);
        }
        let at = self.now;
        self.writes.push(Write {
            instant: instant_time(at),
            eager,
            start: at,
            fate: Fate::Running,
            end: None,
        });
    }

    /// The timeline and heartbeat files as the store shows them now.
    fn store(&self) -> (Timeline, Observation) {
        let mut files = Vec::new();
        let mut heartbeats = BTreeMap::new();
        let mut heartbeat_files = 0;
        for w in &self.writes {
            if w.fate == Fate::RolledBack {
                continue;
            }
            let t = &w.instant;
            files.push(file(&format!("{t}.deltacommit.requested"), w.start));
            files.push(file(&format!("{t}.deltacommit.inflight"), w.start));
            if w.fate == Fate::Done {
                let end = w.end.unwrap_or(w.start);
                let done = format!("{t}_{}.deltacommit", instant_time(end));
                files.push(file(&done, end));
            } else if let Some(mtime) = w.heartbeat(&self.s, self.now) {
                heartbeats.insert(t.clone(), mtime);
            }
            if w.heartbeat(&self.s, self.now).is_some() {
                heartbeat_files += 1;
            }
        }
        let timeline = Timeline::from_files(files, TimelineLayout::V2, InstantZone::Utc);
        let observed = Observation {
            heartbeats,
            replace_kinds: BTreeMap::new(),
            // The daemon lists the heartbeat folder only when a pending write is there to judge.
            heartbeat_files: timeline.pending().next().map(|_| heartbeat_files),
        };
        (timeline, observed)
    }

    /// A poll by replica `r`: the daemon's decision, with the real code.
    fn poll(&mut self, r: usize, lost: bool) -> Result<(), String> {
        if !self.replicas[r].up {
            return Ok(());
        }
        if lost {
            // A lost answer fails the poll (a read error is never "nothing to do").
            return Ok(());
        }
        let (timeline, observed) = self.store();
        let known =
            LazyWritersEvidence::known(self.s.assume_lazy_writers, self.replicas[r].seen_before);
        let lazy_writers = observed.lazy_writers(known);
        let input = DetectionInput {
            now_ms: self.now,
            policy: self.s.policy,
            heartbeat: self.s.heartbeat(),
            heartbeats: &observed.heartbeats,
            replace_kinds: &observed.replace_kinds,
            lazy_writers,
            max_write_duration: self
                .s
                .max_write_duration_ms
                .map(|ms| Duration::from_millis(ms as u64)),
            clustering_expiration: None,
        };
        let assessments = assess(&timeline, &input);
        // The daemon remembers heartbeat files it saw (`note_heartbeats`).
        if observed.heartbeat_files.unwrap_or(0) > 0 {
            self.replicas[r].seen_before = true;
        }
        let failed: Vec<_> = assessments
            .iter()
            .filter(|a| a.verdict.is_failed())
            .collect();
        for a in &failed {
            let Some(i) = self
                .writes
                .iter()
                .position(|w| w.instant == a.requested_time)
            else {
                return Err(format!(
                    "a verdict on an unknown instant {}",
                    a.requested_time
                ));
            };
            if self.writes[i].fate == Fate::Running {
                return Err(format!(
                    "SAFETY: replica {r} rolled back {} at +{} ms, whose {} writer is alive: {} ({})",
                    self.writes[i].instant,
                    self.now - T0,
                    if self.writes[i].eager { "EAGER" } else { "LAZY" },
                    a.verdict,
                    a.reason
                ));
            }
        }
        for a in &failed {
            if let Some(i) = self
                .writes
                .iter()
                .position(|w| w.instant == a.requested_time)
            {
                self.writes[i].fate = Fate::RolledBack;
            }
        }
        // Liveness: every LAZY write whose heartbeat expired before this poll is gone now.
        for w in &self.writes {
            if w.fate != Fate::Dead {
                continue;
            }
            if let Some(mtime) = w.heartbeat(&self.s, self.now) {
                if self.now >= self.s.expired_at(mtime) {
                    return Err(format!(
                        "LIVENESS: replica {r} polled at +{} ms and left {}, whose heartbeat expired at +{} ms",
                        self.now - T0,
                        w.instant,
                        self.s.expired_at(mtime) - T0
                    ));
                }
            }
        }
        Ok(())
    }

    fn apply(&mut self, e: &Event) -> Result<(), String> {
        match *e {
            Event::Start { eager } => self.start(eager),
            Event::Die { n } => {
                if let Some(i) = self.nth_running(n) {
                    self.end(i, Fate::Dead, self.now);
                }
            }
            Event::Finish { n } => {
                if let Some(i) = self.nth_running(n) {
                    self.end(i, Fate::Done, self.now);
                }
            }
            Event::Advance { ms } => self.advance(ms),
            Event::Poll { r, lost } => self.poll(r, lost)?,
            Event::Restart { r, kept } => {
                self.replicas[r].up = true;
                match kept {
                    StateDir::Kept => {}
                    StateDir::Lost | StateDir::Corrupt => self.replicas[r].seen_before = false,
                }
            }
            Event::Toggle { r } => self.replicas[r].up = !self.replicas[r].up,
        }
        Ok(())
    }
}

fn file(name: &str, mtime: i64) -> FileMeta {
    FileMeta {
        path: RelPath::parse(&format!(".hoodie/timeline/{name}")).expect("a timeline path"),
        size: 0,
        last_modified: chrono::DateTime::from_timestamp_millis(mtime).expect("a time"),
    }
}

fn instant_time(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .expect("a time")
        .format("%Y%m%d%H%M%S%3f")
        .to_string()
}

fn run(s: &Settings, events: &[Event]) -> Result<(), String> {
    let mut world = World::new(s.clone());
    for e in events {
        world.apply(e)?;
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("HUDI_KEEPER_MODEL_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3_000)
}

#[test]
fn no_live_writer_is_rolled_back_and_an_expired_lazy_write_is_rolled_back_at_the_next_poll() {
    let config = Config {
        cases: cases(),
        // A failing sequence is printed shrunk; nothing is written into the repository.
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let strategy = (settings(), prop::collection::vec(event(), 1..80));
    let result = runner.run(&strategy, |(s, events)| {
        run(&s, &events).map_err(proptest::test_runner::TestCaseError::fail)
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    eprintln!("{} sequences, none failed", cases());
}

/// The model finds the failure issue #29 describes when fed the old rule's kind of decision:
/// a replica that never saw a young EAGER write, on a table with a live LAZY writer, must leave
/// that write alone once it is old.
#[test]
fn a_replica_that_never_saw_a_write_young_leaves_an_eager_write_alone_beside_a_live_lazy_one() {
    let s = Settings {
        policy: FailedWritesPolicy::Lazy,
        eager_writers: true,
        assume_lazy_writers: false,
        max_write_duration_ms: None,
        interval_ms: 1_000,
        tolerable_misses: 2,
        min_instant_age_ms: 20_000,
    };
    let events = [
        Event::Start { eager: false },
        Event::Start { eager: true },
        Event::Poll { r: 0, lost: false },
        Event::Toggle { r: 0 },
        Event::Advance { ms: 44_000 },
        Event::Poll { r: 1, lost: false },
        Event::Restart {
            r: 0,
            kept: StateDir::Corrupt,
        },
        Event::Poll { r: 0, lost: false },
    ];
    let mut world = World::new(s);
    for e in &events {
        world.apply(e).unwrap_or_else(|e| panic!("{e}"));
    }
    assert!(
        world.writes.iter().all(|w| w.fate == Fate::Running),
        "{:?}",
        world.writes
    );
}
