//! Writer heartbeats: `.hoodie/.heartbeat/<instant>`, an empty file whose modification time is
//! the writer's last sign of life (hudi-format.md §2).
//!
//! [`HeartbeatPolicy`] is the checker side (pure); [`Heartbeat`] is the writer side.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::storage::{RelPath, Storage, StorageError};

/// The heartbeat folder, relative to a table base path.
pub const HEARTBEAT_DIR: &str = ".hoodie/.heartbeat";

/// The heartbeat file of `instant`.
pub fn heartbeat_path(instant: &str) -> Result<RelPath, StorageError> {
    Ok(RelPath::parse(HEARTBEAT_DIR)?.join(instant)?)
}

/// How writers beat and how stale a heartbeat may be before its writer counts as dead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeartbeatPolicy {
    /// The writers' `hoodie.client.heartbeat.interval_in_ms` (Hudi default 60 s).
    pub interval: Duration,
    /// The writers' `hoodie.client.heartbeat.tolerable.misses` (Hudi default 2).
    pub tolerable_misses: u32,
    /// A pending instant without any heartbeat file is never called dead before it is this old
    /// (by the store's clock: its first timeline file's modification time).
    pub min_instant_age: Duration,
    /// Added to every threshold, for the difference between this clock and the store's.
    pub clock_skew_margin: Duration,
}

impl Default for HeartbeatPolicy {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(60),
            tolerable_misses: 2,
            min_instant_age: Duration::from_secs(600),
            clock_skew_margin: Duration::from_secs(5),
        }
    }
}

/// What a heartbeat says about its writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum HeartbeatStatus {
    /// The heartbeat is fresh: the writer is alive.
    Alive {
        /// now − mtime, in ms (negative when the store's clock is ahead).
        age_ms: i64,
    },
    /// The heartbeat is older than interval × misses + skew margin.
    Expired {
        /// now − mtime, in ms.
        age_ms: i64,
    },
    /// No heartbeat file, and the instant is at least the minimum age old.
    Missing,
    /// No heartbeat file, but the instant is too young to call it dead.
    MissingTooYoung {
        /// now − the instant's start, in ms.
        instant_age_ms: i64,
    },
    /// No heartbeat file, and the instant's age is unknown: never dead (fail closed).
    MissingAgeUnknown,
    /// A heartbeat file whose modification time the store does not give (it reports the epoch
    /// or earlier): its writer may be beating right now, so never dead (fail closed).
    AgeUnknown,
}

impl HeartbeatStatus {
    /// The heartbeat's age, when there is a heartbeat file.
    pub fn age_ms(&self) -> Option<i64> {
        match self {
            HeartbeatStatus::Alive { age_ms } | HeartbeatStatus::Expired { age_ms } => {
                Some(*age_ms)
            }
            _ => None,
        }
    }
}

/// `d` in whole milliseconds, `i64::MAX` when longer (a duration from the config or the command
/// line may be anything up to `Duration::MAX`; a plain `as i64` would wrap it negative and turn
/// a threshold of ages into one every age passes).
pub fn duration_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl HeartbeatPolicy {
    /// Hudi's allowance: interval × tolerable misses.
    pub fn max_allowed_ms(&self) -> i64 {
        duration_ms(self.interval).saturating_mul(i64::from(self.tolerable_misses))
    }

    /// Judge a heartbeat: `expired ⇔ now − mtime > interval × misses + skew margin` (strictly
    /// greater, as Hudi); a heartbeat whose mtime is unknown (at or before the epoch) is
    /// [`HeartbeatStatus::AgeUnknown`], never expired. Without a heartbeat file, the instant's own age decides: at least
    /// `min_instant_age + skew margin` old is [`HeartbeatStatus::Missing`]; an instant whose
    /// start is unknown is [`HeartbeatStatus::MissingAgeUnknown`], never dead.
    ///
    /// `instant_started_ms` is when the instant started on the store's clock (the heartbeat's
    /// clock): its first timeline file's modification time.
    pub fn check(
        &self,
        now_ms: i64,
        heartbeat_mtime_ms: Option<i64>,
        instant_started_ms: Option<i64>,
    ) -> HeartbeatStatus {
        let skew = duration_ms(self.clock_skew_margin);
        match heartbeat_mtime_ms {
            // A store that gives no time reports the epoch (object_store fills a missing
            // Last-Modified with it): unknown, not ancient.
            Some(mtime) if mtime <= 0 => HeartbeatStatus::AgeUnknown,
            Some(mtime) => {
                let age_ms = now_ms.saturating_sub(mtime);
                if age_ms > self.max_allowed_ms().saturating_add(skew) {
                    HeartbeatStatus::Expired { age_ms }
                } else {
                    HeartbeatStatus::Alive { age_ms }
                }
            }
            None => match instant_started_ms {
                Some(t) => {
                    let instant_age_ms = now_ms.saturating_sub(t);
                    let min = duration_ms(self.min_instant_age).saturating_add(skew);
                    if instant_age_ms >= min {
                        HeartbeatStatus::Missing
                    } else {
                        HeartbeatStatus::MissingTooYoung { instant_age_ms }
                    }
                }
                None => HeartbeatStatus::MissingAgeUnknown,
            },
        }
    }
}

/// Read the heartbeat file's modification time of `instant` (one HEAD). `None` when absent.
pub async fn read_heartbeat(
    storage: &Storage,
    instant: &str,
) -> Result<Option<DateTime<Utc>>, StorageError> {
    Ok(storage
        .head(&heartbeat_path(instant)?)
        .await?
        .map(|m| m.last_modified))
}

/// The writer side: keeps `.hoodie/.heartbeat/<instant>` fresh while a write runs.
///
/// [`Heartbeat::start`] writes the file once before returning, then a tokio task rewrites it
/// every interval until [`Heartbeat::stop`] (which deletes the file) or cancellation (which
/// leaves it, as a crashed writer would).
#[derive(Debug)]
pub struct Heartbeat {
    storage: Storage,
    path: RelPath,
    token: CancellationToken,
    task: JoinHandle<()>,
    last: watch::Receiver<HeartbeatState>,
}

/// What the writer task last did.
#[derive(Debug, Clone, Default)]
pub struct HeartbeatState {
    /// Successful beats so far, including the first.
    pub beats: u64,
    /// The last failure, if the last attempt failed.
    pub last_error: Option<Arc<StorageError>>,
    /// When the last successful beat was sent (the file's modification time is no earlier).
    pub last_ok: Option<tokio::time::Instant>,
    /// A claim's heartbeat ([`Heartbeat::claim`]) that went unrefreshed for too long: it stopped
    /// for good, since another process may have taken the instant over meanwhile.
    pub lapsed: bool,
}

impl Heartbeat {
    /// Write the first heartbeat of `instant`, then keep beating every `interval`. The task ends
    /// when `token` (or a child of it) is cancelled.
    pub async fn start(
        storage: Storage,
        instant: &str,
        interval: Duration,
        token: CancellationToken,
    ) -> Result<Self, StorageError> {
        Self::begin(storage, instant, interval, None, token).await
    }

    /// Like [`Heartbeat::start`], for a claim judged by others with `policy`, beating four times
    /// per [`claim_window`] (more often than the writers' interval: harmless to readers): once a beat
    /// could not be written for that window it stops for good (another process may take the
    /// instant for expired soon after), and [`Heartbeat::fence`] fails from then on.
    pub async fn claim(
        storage: Storage,
        instant: &str,
        policy: &HeartbeatPolicy,
        token: CancellationToken,
    ) -> Result<Self, StorageError> {
        // Beat four times per window: a slow store (a beat's age is counted from when it was
        // sent) and one lost beat are no lapse, even with one tolerated miss (a window shorter
        // than the interval).
        let window = claim_window(policy);
        Self::begin(storage, instant, window / 4, Some(window), token).await
    }

    async fn begin(
        storage: Storage,
        instant: &str,
        interval: Duration,
        lapse_after: Option<Duration>,
        token: CancellationToken,
    ) -> Result<Self, StorageError> {
        let path = heartbeat_path(instant)?;
        let sent = tokio::time::Instant::now();
        storage.put(&path, Bytes::new()).await?;
        let (tx, rx) = watch::channel(HeartbeatState {
            beats: 1,
            last_error: None,
            last_ok: Some(sent),
            lapsed: false,
        });
        let token = token.child_token();
        let task = tokio::spawn(beat(
            storage.clone(),
            path.clone(),
            (interval, lapse_after),
            token.clone(),
            tx,
        ));
        Ok(Self {
            storage,
            path,
            token,
            task,
            last: rx,
        })
    }

    /// What the writer task last did.
    pub fn state(&self) -> HeartbeatState {
        self.last.borrow().clone()
    }

    /// A fence that holds while this heartbeat is safely fresh for readers judging it by
    /// `policy`: it fails once the last successful beat is [`claim_window`] old, or the beats
    /// stopped for good, so whoever checks it stops before another process could call the
    /// heartbeat expired.
    pub fn fence(&self, policy: &HeartbeatPolicy) -> HeartbeatFence {
        HeartbeatFence {
            path: self.path.to_string(),
            last: self.last.clone(),
            stop_after: claim_window(policy),
        }
    }

    /// Stop beating and leave the file as it is (what a killed writer leaves behind).
    pub async fn abandon(self) {
        self.token.cancel();
        let _ = self.task.await;
    }

    /// Stop beating and delete the heartbeat file (what a writer does when its commit is done).
    pub async fn stop(self) -> Result<(), StorageError> {
        self.token.cancel();
        let _ = self.task.await;
        self.storage.delete(&self.path).await
    }
}

/// How long a claim's heartbeat may go unrefreshed before its holder stops: the allowance
/// readers give it (interval × tolerable misses) less a margin of half an interval, at most a
/// quarter of the allowance. The skew margin readers add is not counted on.
pub fn claim_window(policy: &HeartbeatPolicy) -> Duration {
    let allowance = policy
        .interval
        .saturating_mul(policy.tolerable_misses.max(1));
    allowance.saturating_sub((policy.interval / 2).min(allowance / 4))
}

/// The claim a [`Heartbeat`] stakes, checked before every write of whoever relies on it (see
/// [`Heartbeat::fence`]).
#[derive(Debug, Clone)]
pub struct HeartbeatFence {
    path: String,
    last: watch::Receiver<HeartbeatState>,
    stop_after: Duration,
}

impl crate::storage::WriteFence for HeartbeatFence {
    fn check_write(&self) -> Result<(), String> {
        let state = self.last.borrow();
        match state.last_ok {
            // A zero allowance (a zero interval, tests only: configurations refuse it): readers
            // call the heartbeat expired at once, so it is no claim to keep.
            _ if self.stop_after.is_zero() => Ok(()),
            Some(sent) if !state.lapsed && sent.elapsed() < self.stop_after => Ok(()),
            _ => Err(format!(
                "heartbeat `{}` was not refreshed for {}{}: another process may soon take it for expired",
                self.path,
                crate::human::Ms(state.last_ok.map_or(0, |s| s.elapsed().as_millis())),
                state
                    .last_error
                    .as_ref()
                    .map(|e| format!(" (last error: {e})"))
                    .unwrap_or_default()
            )),
        }
    }
}

async fn beat(
    storage: Storage,
    path: RelPath,
    (interval, lapse_after): (Duration, Option<Duration>),
    token: CancellationToken,
    tx: watch::Sender<HeartbeatState>,
) {
    if interval.is_zero() {
        // Readers call any heartbeat of a zero interval expired at once: nothing to keep fresh.
        token.cancelled().await;
        return;
    }
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = token.cancelled() => return,
            _ = ticker.tick() => {}
        }
        let sent = tokio::time::Instant::now();
        let lapsed = |s: &HeartbeatState| matches!((s.last_ok, lapse_after), (Some(ok), Some(window)) if sent.duration_since(ok) >= window);
        if lapsed(&tx.borrow()) {
            tracing::warn!(path = %path, "heartbeat not refreshed in time; stopped for good, the claim is given up");
            tx.send_modify(|s| s.lapsed = true);
            return;
        }
        let result = storage.put(&path, Bytes::new()).await;
        tx.send_modify(|s| match result {
            Ok(()) => {
                s.beats += 1;
                s.last_error = None;
                s.last_ok = Some(sent);
            }
            Err(e) => {
                tracing::warn!(path = %path, error = %e, "heartbeat write failed");
                s.last_error = Some(Arc::new(e));
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::testing::CountingInterceptor;
    use crate::storage::OpKind;
    use object_store::memory::InMemory;

    fn policy() -> HeartbeatPolicy {
        HeartbeatPolicy {
            interval: Duration::from_millis(1000),
            tolerable_misses: 2,
            min_instant_age: Duration::from_millis(10_000),
            clock_skew_margin: Duration::ZERO,
        }
    }

    #[test]
    fn expiry_is_strictly_greater_than_interval_times_misses() {
        let p = policy();
        let now = 1_000_000;
        assert_eq!(
            p.check(now, Some(now - 2000), None),
            HeartbeatStatus::Alive { age_ms: 2000 }
        );
        assert_eq!(
            p.check(now, Some(now - 2001), None),
            HeartbeatStatus::Expired { age_ms: 2001 }
        );
        assert_eq!(
            p.check(now, Some(now + 500), None),
            HeartbeatStatus::Alive { age_ms: -500 }
        );
    }

    #[test]
    fn the_skew_margin_extends_the_allowance() {
        let p = HeartbeatPolicy {
            clock_skew_margin: Duration::from_millis(300),
            ..policy()
        };
        let now = 1_000_000;
        assert!(matches!(
            p.check(now, Some(now - 2300), None),
            HeartbeatStatus::Alive { .. }
        ));
        assert!(matches!(
            p.check(now, Some(now - 2301), None),
            HeartbeatStatus::Expired { .. }
        ));
        // And the minimum age of instants without heartbeat.
        assert!(matches!(
            p.check(now, None, Some(now - 10_299)),
            HeartbeatStatus::MissingTooYoung { .. }
        ));
        assert_eq!(
            p.check(now, None, Some(now - 10_300)),
            HeartbeatStatus::Missing
        );
    }

    #[test]
    fn a_missing_file_counts_as_missing_only_for_instants_of_the_minimum_age() {
        let p = policy();
        let now = 1_000_000;
        assert_eq!(
            p.check(now, None, Some(now - 9_999)),
            HeartbeatStatus::MissingTooYoung {
                instant_age_ms: 9_999
            }
        );
        assert_eq!(
            p.check(now, None, Some(now - 10_000)),
            HeartbeatStatus::Missing
        );
        // A store clock ahead of ours makes the instant younger, never older.
        assert!(matches!(
            p.check(now, None, Some(now + 5_000)),
            HeartbeatStatus::MissingTooYoung { .. }
        ));
    }

    #[test]
    fn an_instant_of_unknown_age_without_heartbeat_is_never_missing() {
        let p = policy();
        assert_eq!(
            p.check(1_000_000, None, None),
            HeartbeatStatus::MissingAgeUnknown
        );
    }

    #[test]
    fn a_heartbeat_without_a_modification_time_is_never_expired() {
        // The store reports no time (the epoch, or before it): the writer may be beating now.
        let p = policy();
        let now = 1_000_000_000;
        for mtime in [0, -1, i64::MIN] {
            let s = p.check(now, Some(mtime), Some(now - 3_600_000));
            assert!(
                !matches!(s, HeartbeatStatus::Expired { .. }),
                "{mtime}: {s:?}"
            );
            assert_eq!(s.age_ms(), None, "{mtime}: {s:?}");
            assert_eq!(s, HeartbeatStatus::AgeUnknown);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_writer_beats_every_interval_and_deletes_on_stop() {
        let counter = Arc::new(CountingInterceptor::new());
        let storage = Storage::from_store(Arc::new(InMemory::new()), "t", "memory://t")
            .with_interceptor(counter.clone());
        let hb = Heartbeat::start(
            storage.clone(),
            "20250101000000000",
            Duration::from_secs(10),
            CancellationToken::new(),
        )
        .await
        .unwrap();
        assert_eq!(counter.count(OpKind::Put), 1);
        assert!(read_heartbeat(&storage, "20250101000000000")
            .await
            .unwrap()
            .is_some());
        tokio::time::sleep(Duration::from_secs(35)).await;
        assert_eq!(counter.count(OpKind::Put), 4);
        assert_eq!(hb.state().beats, 4);
        hb.stop().await.unwrap();
        assert!(read_heartbeat(&storage, "20250101000000000")
            .await
            .unwrap()
            .is_none());
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert_eq!(counter.count(OpKind::Put), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn cancellation_stops_beating_and_leaves_the_file() {
        let storage = Storage::from_store(Arc::new(InMemory::new()), "t", "memory://t");
        let token = CancellationToken::new();
        let hb = Heartbeat::start(storage.clone(), "1", Duration::from_secs(1), token.clone())
            .await
            .unwrap();
        token.cancel();
        hb.abandon().await;
        assert!(read_heartbeat(&storage, "1").await.unwrap().is_some());
    }

    /// Fails every put after the first.
    #[derive(Debug, Default)]
    struct PutsFailAfterFirst(std::sync::atomic::AtomicU64);

    impl crate::storage::Interceptor for PutsFailAfterFirst {
        fn before(&self, op: OpKind, path: &RelPath) -> Result<(), StorageError> {
            if op == OpKind::Put && self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst) > 0 {
                return Err(StorageError::Injected {
                    op,
                    n: 0,
                    path: path.to_string(),
                });
            }
            Ok(())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_claim_whose_beats_fail_fences_its_holder_before_readers_call_it_expired_and_stays_given_up(
    ) {
        use crate::storage::WriteFence;
        // Readers call it expired after 20 s + skew; the claim holds for 15 s after a beat.
        let p = HeartbeatPolicy {
            interval: Duration::from_secs(10),
            tolerable_misses: 2,
            ..HeartbeatPolicy::default()
        };
        assert_eq!(claim_window(&p), Duration::from_secs(15));
        let storage = Storage::from_store(Arc::new(InMemory::new()), "t", "memory://t")
            .with_interceptor(Arc::new(PutsFailAfterFirst::default()));
        let hb = Heartbeat::claim(storage.clone(), "1", &p, CancellationToken::new())
            .await
            .unwrap();
        let fence = hb.fence(&p);
        tokio::time::sleep(Duration::from_secs(14)).await;
        assert!(
            fence.check_write().is_ok(),
            "the beat at 10 s failed, but 14 s is in time"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
        let why = fence.check_write().unwrap_err();
        assert!(why.contains("not refreshed"), "{why}");
        // At the next beat (20 s) it gives up for good: no later beat revives it.
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert!(hb.state().lapsed);
        assert!(fence.check_write().is_err());
        hb.abandon().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_claim_kept_fresh_keeps_its_fence_open() {
        use crate::storage::WriteFence;
        let p = HeartbeatPolicy {
            interval: Duration::from_secs(10),
            ..HeartbeatPolicy::default()
        };
        let storage = Storage::from_store(Arc::new(InMemory::new()), "t", "memory://t");
        let hb = Heartbeat::claim(storage, "1", &p, CancellationToken::new())
            .await
            .unwrap();
        let fence = hb.fence(&p);
        for _ in 0..10 {
            tokio::time::sleep(Duration::from_secs(7)).await;
            assert!(fence.check_write().is_ok());
        }
        hb.stop().await.unwrap();
    }
}

#[cfg(test)]
mod fuzz_tests {
    //! The thresholds come from the config or the command line (any duration, saturated to
    //! `Duration::MAX` when huge) and the times from the store: judged without panicking or
    //! wrapping, a heartbeat within the allowance is never expired.

    use proptest::prelude::*;

    use super::*;
    use crate::fuzz;

    fn duration() -> impl Strategy<Value = Duration> {
        prop_oneof![
            (0u64..10_000_000).prop_map(Duration::from_millis),
            any::<u64>().prop_map(Duration::from_millis),
            any::<u64>().prop_map(Duration::from_secs),
            Just(Duration::MAX),
        ]
    }

    /// Store and local clocks within ±10 000 years of the epoch, in ms.
    fn clock() -> impl Strategy<Value = i64> {
        -315_569_520_000_000i64..315_569_520_000_000
    }

    #[test]
    fn fuzz_an_interval_past_i64_milliseconds_keeps_a_fresh_heartbeat_alive() {
        let policy = HeartbeatPolicy {
            interval: Duration::MAX,
            ..HeartbeatPolicy::default()
        };
        let now = 1_737_864_503_628;
        assert_eq!(
            policy.check(now, Some(now - 600_000), None),
            HeartbeatStatus::Alive { age_ms: 600_000 }
        );
        let policy = HeartbeatPolicy {
            min_instant_age: Duration::MAX,
            ..HeartbeatPolicy::default()
        };
        assert!(matches!(
            policy.check(now, None, Some(now - 3_600_000)),
            HeartbeatStatus::MissingTooYoung { .. }
        ));
    }

    proptest! {
        #![proptest_config(fuzz::config(2048))]

        #[test]
        fn fuzz_heartbeat_thresholds_never_wrap(
            interval in duration(),
            tolerable_misses in prop_oneof![0u32..5, any::<u32>()],
            min_instant_age in duration(),
            clock_skew_margin in duration(),
            now in clock(),
            mtime in prop::option::of(clock()),
            started in prop::option::of(clock()),
        ) {
            let policy = HeartbeatPolicy { interval, tolerable_misses, min_instant_age, clock_skew_margin };
            let status = policy.check(now, mtime, started);
            let ms = |d: Duration| d.as_millis() as i128;
            match (mtime, status) {
                (Some(m), HeartbeatStatus::Expired { .. }) => {
                    let allowance = ms(interval) * i128::from(tolerable_misses) + ms(clock_skew_margin);
                    prop_assert!(i128::from(now) - i128::from(m) > allowance, "{policy:?} expired a heartbeat {} ms old", now - m);
                }
                (None, HeartbeatStatus::Missing) => {
                    let s = started.unwrap_or_default();
                    prop_assert!(
                        i128::from(now) - i128::from(s) >= ms(min_instant_age) + ms(clock_skew_margin),
                        "{policy:?} called an instant {} ms old dead", now - s
                    );
                }
                _ => {}
            }
        }
    }
}
