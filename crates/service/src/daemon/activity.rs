//! The poll rate of a table: `poll_interval` while it is active (something pending at its last
//! poll, or its timeline changed within `idle_after`), `idle_poll_interval` once it is idle.
//!
//! **Only ever a delay.** What the rate follows is what the last polls saw, held in memory; it
//! decides when the next poll comes, never what a poll decides: every verdict rests on the
//! timeline and heartbeat files as the store shows them at that poll (`protocol::detect`), and
//! nothing here is read by it. A write that starts and dies between two idle polls is seen at
//! the next one, from then on polled at the fast rate, and rolled back once its heartbeat has
//! expired, at the latest `idle_poll_interval` + its heartbeat's expiry + one poll after it
//! started. A restart, a lost state or a replica taking the table over only start it active.

use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;
use std::time::Duration;

use hudi_keeper_core::timeline::Timeline;

use super::config::TableSettings;

/// What a table's last polls saw of its timeline, for its poll rate. Written by its polls
/// (which hold the table's mutex), read when the next one is scheduled.
#[derive(Debug, Default)]
pub(super) struct Activity {
    /// A digest of the timeline at the last poll that read it (0: none yet).
    digest: AtomicU64,
    /// When that digest last changed, in ms since [`origin`].
    changed_at_ms: AtomicU64,
    /// The last poll that read the timeline found a pending instant.
    pending: AtomicBool,
}

/// The daemon's clock for [`Activity`]: ms since the first use (the tokio clock, which tests
/// may pause and advance).
fn now_ms() -> u64 {
    static ORIGIN: OnceLock<tokio::time::Instant> = OnceLock::new();
    let origin = *ORIGIN.get_or_init(tokio::time::Instant::now);
    tokio::time::Instant::now()
        .saturating_duration_since(origin)
        .as_millis() as u64
}

/// A digest of what the timeline holds: each instant's time, action, state and completion
/// time, and the malformed files' names. Never 0.
pub(super) fn digest(timeline: &Timeline) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    for i in timeline.instants() {
        i.requested_time.hash(&mut h);
        i.action.hash(&mut h);
        i.state.hash(&mut h);
        i.completion_time.hash(&mut h);
    }
    for m in timeline.malformed() {
        m.name.hash(&mut h);
    }
    h.finish().max(1)
}

impl Activity {
    /// A poll read the timeline (`digest`) and found `pending` instants or none.
    pub(super) fn observe(&self, digest: u64, pending: bool) {
        if self.digest.swap(digest, Relaxed) != digest {
            self.changed_at_ms.store(now_ms(), Relaxed);
        }
        self.pending.store(pending, Relaxed);
    }

    /// Whether the table is idle: a poll read its timeline, found nothing pending, and its
    /// timeline has not changed for `idle_after`.
    pub(super) fn idle(&self, idle_after: Duration) -> bool {
        self.digest.load(Relaxed) != 0
            && !self.pending.load(Relaxed)
            && now_ms().saturating_sub(self.changed_at_ms.load(Relaxed))
                >= idle_after.as_millis() as u64
    }

    /// Forget what was seen (the table is active again until a poll finds it idle anew).
    pub(super) fn reset(&self) {
        self.digest.store(0, Relaxed);
        self.pending.store(false, Relaxed);
    }
}

/// When a table whose poll succeeded is polled next if it is idle: between 90% and 100% of its
/// `idle_poll_interval`, at random (never more, so that the documented bound holds). `None`:
/// it is active (or never backs off), and is polled at `poll_interval` (`scheduler`).
pub(super) fn idle_delay(settings: &TableSettings, activity: &Activity) -> Option<Duration> {
    let idle = settings.idle_poll_interval_ms?;
    if !activity.idle(Duration::from_millis(settings.idle_after_ms)) {
        return None;
    }
    let f: f64 = 0.9 + rand::random::<f64>() * 0.1;
    Some(Duration::from_millis(idle).mul_f64(f.min(1.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(idle: Option<u64>, after: u64) -> TableSettings {
        let mut s = crate::daemon::config::Config::default()
            .defaults
            .resolve(&serde_json::from_value(serde_json::json!({"name": "t", "uri": "/t", "failed_writes_policy": "observe"})).unwrap())
            .unwrap();
        s.poll_interval_ms = 1_000;
        s.idle_poll_interval_ms = idle;
        s.idle_after_ms = after;
        s
    }

    #[tokio::test(start_paused = true)]
    async fn a_table_backs_off_only_once_nothing_pending_and_unchanged_for_idle_after() {
        let s = settings(Some(60_000), 5_000);
        let a = Activity::default();
        // Never polled: active.
        assert!(idle_delay(&s, &a).is_none());
        a.observe(7, false);
        assert!(idle_delay(&s, &a).is_none(), "changed just now");
        tokio::time::advance(Duration::from_secs(5)).await;
        a.observe(7, false);
        let delay = idle_delay(&s, &a).unwrap();
        assert!(
            delay >= Duration::from_secs(54) && delay <= Duration::from_secs(60),
            "{delay:?}"
        );
        // A pending instant: fast at once, and while it stays.
        a.observe(8, true);
        assert!(idle_delay(&s, &a).is_none());
        tokio::time::advance(Duration::from_secs(60)).await;
        a.observe(8, true);
        assert!(idle_delay(&s, &a).is_none(), "still pending");
        // Resolved: the timeline changed, so fast for idle_after more.
        a.observe(9, false);
        assert!(idle_delay(&s, &a).is_none());
        tokio::time::advance(Duration::from_secs(5)).await;
        a.observe(9, false);
        assert!(idle_delay(&s, &a).is_some());
        a.reset();
        assert!(idle_delay(&s, &a).is_none());
        // Off: always fast.
        let off = settings(None, 0);
        a.observe(9, false);
        assert!(idle_delay(&off, &a).is_none());
    }

    fn resolve(
        defaults: serde_json::Value,
        table: serde_json::Value,
    ) -> Result<TableSettings, String> {
        let d: crate::daemon::config::Defaults = serde_json::from_value(defaults).unwrap();
        d.resolve(&serde_json::from_value(table).unwrap())
    }

    #[test]
    fn idle_settings_default_to_ten_minutes_after_five_and_tables_override_them() {
        let t = serde_json::json!({"name": "t", "uri": "/t", "failed_writes_policy": "observe"});
        let s = resolve(serde_json::json!({}), t.clone()).unwrap();
        assert_eq!(
            (s.poll_interval_ms, s.idle_poll_interval_ms, s.idle_after_ms),
            (30_000, Some(600_000), 300_000)
        );
        // 144 idle polls a day, one LIST each: at most 200 (issue #34).
        assert!(86_400_000 / s.idle_poll_interval_ms.unwrap() <= 200);
        let own = serde_json::json!({"name": "t", "uri": "/t", "failed_writes_policy": "observe", "idle_poll_interval": "1h", "idle_after": "1m"});
        let s = resolve(serde_json::json!({}), own).unwrap();
        assert_eq!(
            (s.idle_poll_interval_ms, s.idle_after_ms),
            (Some(3_600_000), 60_000)
        );
        // 0, or no longer than poll_interval: never backs off.
        for idle in ["0", "30s", "10s"] {
            let s = resolve(serde_json::json!({"idle_poll_interval": idle}), t.clone()).unwrap();
            assert_eq!(s.idle_poll_interval_ms, None, "{idle}");
        }
        let e = resolve(
            serde_json::json!({"idle_poll_interval": "50ms", "poll_interval": "100ms"}),
            t,
        )
        .unwrap_err();
        assert!(e.contains("idle_poll_interval"), "{e}");
    }
}
