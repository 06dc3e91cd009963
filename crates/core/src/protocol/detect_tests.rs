//! Tests of [`super`] (failed-write detection).

use super::*;
use crate::config::TimelineLayout;
use crate::storage::{FileMeta, RelPath};
use crate::timeline::{instant_to_epoch_ms, InstantZone};

const NOW: i64 = 1_737_864_503_628 + 3_600_000; // 2025-01-26 05:08:23.628 UTC
const HOUR: i64 = 3_600_000;

/// A timeline of files with these modification times (epoch ms).
fn timeline_with(files: &[(&str, i64)]) -> Timeline {
    let files = files
        .iter()
        .map(|(n, mtime)| FileMeta {
            path: RelPath::parse(&format!(".hoodie/timeline/{n}")).unwrap(),
            size: 0,
            last_modified: chrono::DateTime::from_timestamp_millis(*mtime).unwrap(),
        })
        .collect();
    Timeline::from_files(files, TimelineLayout::V2, InstantZone::Utc)
}

/// A timeline whose files were written at their instant times (an hour ago for names that
/// are no real time, like minute 60).
fn timeline(names: &[&str]) -> Timeline {
    let files: Vec<(&str, i64)> = names
        .iter()
        .map(|n| {
            let at = instant_to_epoch_ms(&n[..17], InstantZone::Utc).unwrap_or(NOW - HOUR);
            (*n, at)
        })
        .collect();
    timeline_with(&files)
}

#[derive(Default)]
struct Given<'a> {
    heartbeats: &'a [(&'a str, i64)],
    replace: &'a [(&'a str, ReplaceKind)],
    lazy_writers: Option<LazyWritersEvidence>,
    max_write_duration: Option<Duration>,
    clustering_expiration: Option<Duration>,
}

fn assess_with(t: &Timeline, policy: FailedWritesPolicy, given: &Given<'_>) -> Vec<Assessment> {
    let hb = given
        .heartbeats
        .iter()
        .map(|(k, v)| (k.to_string(), *v))
        .collect();
    let rk = given
        .replace
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    let input = DetectionInput {
        now_ms: NOW,
        policy,
        heartbeat: HeartbeatPolicy {
            interval: Duration::from_secs(60),
            tolerable_misses: 2,
            min_instant_age: Duration::from_secs(600),
            clock_skew_margin: Duration::ZERO,
        },
        heartbeats: &hb,
        replace_kinds: &rk,
        lazy_writers: given.lazy_writers,
        max_write_duration: given.max_write_duration,
        clustering_expiration: given.clustering_expiration,
    };
    assess(t, &input)
}

fn judge(t: &Timeline, policy: FailedWritesPolicy, given: &Given<'_>) -> Vec<(String, Verdict)> {
    assess_with(t, policy, given)
        .into_iter()
        .map(|a| (a.requested_time, a.verdict))
        .collect()
}

fn verdict_of(v: &[(String, Verdict)], t: &str) -> Verdict {
    v.iter()
        .find(|(i, _)| i == t)
        .map(|(_, v)| *v)
        .unwrap_or_else(|| panic!("{t} not assessed: {v:?}"))
}

const LAZY: FailedWritesPolicy = FailedWritesPolicy::Lazy;
const EAGER: FailedWritesPolicy = FailedWritesPolicy::Eager;

#[test]
fn lazy_verdicts_follow_the_heartbeat() {
    let t = timeline(&[
        "20250126040000000_20250126040001000.commit",
        "20250126041000000.commit.requested",
        "20250126041000000.inflight",
        "20250126042000000.deltacommit.requested",
        "20250126043000000.commit.requested",
        "20250126050500000.commit.requested",
    ]);
    let v = judge(
        &t,
        LAZY,
        &Given {
            heartbeats: &[
                ("20250126041000000", NOW - 120_001),
                ("20250126042000000", NOW - 1_000),
            ],
            lazy_writers: Some(LazyWritersEvidence::HeartbeatFilesNow),
            ..Default::default()
        },
    );
    assert_eq!(
        v,
        vec![
            ("20250126050500000".into(), Verdict::EagerWriterSuspected),
            ("20250126043000000".into(), Verdict::EagerWriterSuspected),
            ("20250126042000000".into(), Verdict::Live),
            ("20250126041000000".into(), Verdict::Expired),
        ]
    );
}

#[test]
fn a_lazy_write_without_heartbeat_is_failed_only_where_the_operator_states_every_writer_is_lazy() {
    let t = timeline(&["20250126040000000.deltacommit.requested"]);
    let unknown = judge(&t, LAZY, &Given::default());
    assert_eq!(
        verdict_of(&unknown, "20250126040000000"),
        Verdict::NoHeartbeatUnconfirmed
    );
    assert!(!Verdict::NoHeartbeatUnconfirmed.is_failed());
    assert!(Verdict::NoHeartbeatUnconfirmed.is_left_alone());
    // Heartbeat files of other writes, now or remembered, show LAZY writers; a LAZY writer
    // would have one, so this is an EAGER writer's write that may still run: left alone.
    for evidence in [
        LazyWritersEvidence::HeartbeatFilesNow,
        LazyWritersEvidence::SeenBefore,
    ] {
        let given = Given {
            lazy_writers: Some(evidence),
            ..Default::default()
        };
        let a = assess_with(&t, LAZY, &given);
        assert_eq!(a[0].verdict, Verdict::EagerWriterSuspected, "{evidence:?}");
        assert!(!a[0].verdict.is_failed());
        assert!(a[0].reason.contains(evidence.describe()), "{}", a[0].reason);
        assert!(WritersReport::new(LAZY, Some(evidence), None, Some(1), &a).eager_writer_suspected);
        // The operator's maximum write duration still makes it overdue.
        let given = Given {
            max_write_duration: Some(Duration::from_secs(1800)),
            ..given
        };
        assert_eq!(assess_with(&t, LAZY, &given)[0].verdict, Verdict::Overdue);
    }
    // The operator's statement, in the configuration every process reads.
    let a = assess_with(
        &t,
        LAZY,
        &Given {
            lazy_writers: Some(LazyWritersEvidence::Assumed),
            ..Default::default()
        },
    );
    assert_eq!(a[0].verdict, Verdict::NoHeartbeat);
    assert!(a[0].verdict.is_failed());
    assert!(
        a[0].reason.contains("stated every writer is LAZY"),
        "{}",
        a[0].reason
    );
}

#[test]
fn an_expired_heartbeat_proves_a_dead_writer_whatever_else_is_known() {
    let t = timeline(&["20250126040000000.deltacommit.requested"]);
    let hb = [("20250126040000000", NOW - HOUR)];
    for policy in [LAZY, EAGER] {
        let v = judge(
            &t,
            policy,
            &Given {
                heartbeats: &hb,
                ..Default::default()
            },
        );
        assert_eq!(verdict_of(&v, "20250126040000000"), Verdict::Expired);
    }
}

#[test]
fn a_young_write_without_heartbeat_on_a_lazy_table_is_a_sign_of_eager_writers() {
    let t = timeline(&["20250126050000000.deltacommit.requested"]); // 8 minutes old
    for lazy_writers in [None, Some(LazyWritersEvidence::SeenBefore)] {
        let given = Given {
            lazy_writers,
            ..Default::default()
        };
        let a = assess_with(&t, LAZY, &given);
        assert_eq!(a[0].verdict, Verdict::EagerWriterSuspected);
        assert!(!a[0].verdict.is_failed());
        let report = WritersReport::new(LAZY, lazy_writers, None, Some(0), &a);
        assert!(report.eager_writer_suspected);
        assert!(report.hint.contains("EAGER writers"), "{}", report.hint);
    }
    // Judged EAGER, the same write is only young.
    let a = assess_with(&t, EAGER, &Given::default());
    assert_eq!(a[0].verdict, Verdict::TooYoung);
    assert!(!WritersReport::new(EAGER, None, None, Some(0), &a).eager_writer_suspected);
    // An old write without heartbeat is no sign: it may be a LAZY writer that died.
    let old = timeline(&["20250126040000000.deltacommit.requested"]);
    let a = assess_with(&old, LAZY, &Given::default());
    assert!(!WritersReport::new(LAZY, None, None, Some(0), &a).eager_writer_suspected);
}

#[test]
fn under_eager_a_write_is_failed_only_once_a_newer_write_started_after_it() {
    let t = timeline(&[
        "20250126040000000.commit.requested",
        "20250126041000000.commit.requested",
        "20250126041000000.inflight",
    ]);
    let v = judge(&t, EAGER, &Given::default());
    assert_eq!(
        v,
        vec![
            ("20250126041000000".into(), Verdict::AwaitingNewerWrite),
            ("20250126040000000".into(), Verdict::Superseded),
        ]
    );
    assert!(Verdict::Superseded.is_failed());
    assert!(!Verdict::AwaitingNewerWrite.is_failed());

    // A newer completed write counts; a young newer pending write too.
    let t = timeline(&[
        "20250126040000000.deltacommit.requested",
        "20250126041000000.deltacommit.requested",
        "20250126041000000.deltacommit.inflight",
        "20250126041000000_20250126041500000.deltacommit",
    ]);
    let v = judge(&t, EAGER, &Given::default());
    assert_eq!(verdict_of(&v, "20250126040000000"), Verdict::Superseded);
    let t = timeline(&[
        "20250126040000000.deltacommit.requested",
        "20250126050500000.deltacommit.requested",
    ]);
    let v = judge(&t, EAGER, &Given::default());
    assert_eq!(verdict_of(&v, "20250126040000000"), Verdict::Superseded);
    assert_eq!(verdict_of(&v, "20250126050500000"), Verdict::TooYoung);
    // A pending replacecommit counts once known to be a write.
    let t = timeline(&[
        "20250126040000000.commit.requested",
        "20250126041000000.replacecommit.requested",
    ]);
    let write = [("20250126041000000", ReplaceKind::Write)];
    let v = judge(
        &t,
        EAGER,
        &Given {
            replace: &write,
            ..Default::default()
        },
    );
    assert_eq!(verdict_of(&v, "20250126040000000"), Verdict::Superseded);
}

#[test]
fn table_services_after_an_eager_write_do_not_show_its_writer_moved_on() {
    let t = timeline(&[
        "20250126040000000.deltacommit.requested",
        // A completed compaction (a `commit` whose requested file is a compaction's).
        "20250126041000000.compaction.requested",
        "20250126041000000.compaction.inflight",
        "20250126041000000_20250126041100000.commit",
        "20250126042000000.clean.requested",
        "20250126043000000.rollback.requested",
        "20250126044000000.clustering.requested",
        "20250126045000000.replacecommit.requested",
        "20250126046000000.logcompaction.requested",
        // A completed replacecommit may be a clustering: it does not count either.
        "20250126047000000.replacecommit.requested",
        "20250126047000000.replacecommit.inflight",
        "20250126047000000_20250126047100000.replacecommit",
    ]);
    let clustering = [("20250126045000000", ReplaceKind::Clustering)];
    let v = judge(
        &t,
        EAGER,
        &Given {
            replace: &clustering,
            ..Default::default()
        },
    );
    assert_eq!(
        verdict_of(&v, "20250126040000000"),
        Verdict::AwaitingNewerWrite
    );
}

#[test]
fn a_maximum_write_duration_makes_an_overdue_write_without_heartbeat_failed() {
    let t = timeline(&["20250126040000000.deltacommit.requested"]); // 68 minutes old
    let with_max = |policy, minutes: u64| {
        judge(
            &t,
            policy,
            &Given {
                max_write_duration: Some(Duration::from_secs(minutes * 60)),
                ..Default::default()
            },
        )[0]
        .1
    };
    assert_eq!(with_max(EAGER, 120), Verdict::AwaitingNewerWrite);
    assert_eq!(with_max(EAGER, 30), Verdict::Overdue);
    assert_eq!(with_max(LAZY, 120), Verdict::NoHeartbeatUnconfirmed);
    assert_eq!(with_max(LAZY, 30), Verdict::Overdue);
    assert!(Verdict::Overdue.is_failed());
    // Never over a live heartbeat, never under the minimum age.
    let live = [("20250126040000000", NOW - 1_000)];
    let v = judge(
        &t,
        EAGER,
        &Given {
            heartbeats: &live,
            max_write_duration: Some(Duration::from_secs(60)),
            ..Default::default()
        },
    );
    assert_eq!(v[0].1, Verdict::Live);
    let young = timeline(&["20250126050000000.deltacommit.requested"]); // 8 minutes old
    let v = judge(
        &young,
        EAGER,
        &Given {
            max_write_duration: Some(Duration::from_secs(60)),
            ..Default::default()
        },
    );
    assert_eq!(v[0].1, Verdict::TooYoung);
}

#[test]
fn fuzz_a_maximum_write_duration_past_i64_milliseconds_never_makes_a_write_overdue() {
    // 68 minutes old, no heartbeat file, the newest write under EAGER: left alone unless a
    // maximum write duration says otherwise. One longer than i64 milliseconds (the config
    // and the CLI saturate huge values to Duration::MAX) must not wrap to a negative limit.
    let t = timeline(&["20250126040000000.deltacommit.requested"]);
    for max in [
        Duration::MAX,
        Duration::from_millis(u64::MAX),
        Duration::from_secs(u64::MAX / 1000 + 1),
    ] {
        let v = judge(
            &t,
            EAGER,
            &Given {
                max_write_duration: Some(max),
                ..Default::default()
            },
        );
        assert_eq!(v[0].1, Verdict::AwaitingNewerWrite, "{max:?}");
    }
}

#[test]
fn instant_ages_come_from_the_store_clock_not_from_the_instant_time() {
    // Named long ago, written a second ago: it just started.
    let t = timeline_with(&[("20200101000000000.commit.requested", NOW - 1_000)]);
    let a = assess_with(
        &t,
        LAZY,
        &Given {
            lazy_writers: Some(LazyWritersEvidence::Assumed),
            ..Default::default()
        },
    );
    assert_eq!(a[0].instant_age_ms, Some(1_000));
    assert_eq!(a[0].verdict, Verdict::EagerWriterSuspected);
    // Named in the future (a writer in another zone), written an hour ago.
    let t = timeline_with(&[
        ("20990101000000000.commit.requested", NOW - HOUR),
        ("20990101000000000.inflight", NOW - 1_000),
    ]);
    let a = assess_with(
        &t,
        LAZY,
        &Given {
            lazy_writers: Some(LazyWritersEvidence::Assumed),
            ..Default::default()
        },
    );
    // The earliest timeline file dates it.
    assert_eq!(a[0].instant_age_ms, Some(HOUR));
    assert_eq!(a[0].verdict, Verdict::NoHeartbeat);
}

#[test]
fn an_instant_whose_age_cannot_be_established_is_never_failed() {
    // The store reports no modification time (the epoch).
    let t = timeline_with(&[
        ("20250126030000000.commit.requested", 0),
        ("20250126040000000.commit.requested", 0),
        ("20250126041000000.commit.requested", NOW - HOUR),
    ]);
    for (policy, lazy_writers) in [
        (LAZY, Some(LazyWritersEvidence::HeartbeatFilesNow)),
        (LAZY, None),
        (EAGER, None),
    ] {
        let a = assess_with(
            &t,
            policy,
            &Given {
                lazy_writers,
                max_write_duration: Some(Duration::from_secs(1)),
                ..Default::default()
            },
        );
        for t in ["20250126030000000", "20250126040000000"] {
            let x = a.iter().find(|a| a.requested_time == t).unwrap();
            assert_eq!(x.verdict, Verdict::AgeUnknown, "{policy:?} {t}");
            assert_eq!(x.instant_age_ms, None);
        }
    }
    assert!(!Verdict::AgeUnknown.is_failed());
    assert_eq!(
        Verdict::AgeUnknown.named_rollback(),
        NamedRollback::NeedsForce
    );
}

#[test]
fn a_heartbeat_file_without_a_modification_time_is_never_failed() {
    let t = timeline(&["20250126040000000.deltacommit.requested"]);
    let hb = [("20250126040000000", 0)];
    for policy in [LAZY, EAGER] {
        let a = assess_with(
            &t,
            policy,
            &Given {
                heartbeats: &hb,
                lazy_writers: Some(LazyWritersEvidence::HeartbeatFilesNow),
                max_write_duration: Some(Duration::from_secs(1)),
                ..Default::default()
            },
        );
        assert!(!a[0].verdict.is_failed(), "{policy:?}: {:?}", a[0]);
        assert_eq!(a[0].verdict, Verdict::AgeUnknown, "{policy:?}");
        assert_eq!(a[0].heartbeat_age_ms, None);
    }
}

#[test]
fn naming_a_write_rolls_back_what_is_left_alone_and_needs_force_when_its_writer_may_be_alive() {
    for v in [
        Verdict::Expired,
        Verdict::NoHeartbeat,
        Verdict::Superseded,
        Verdict::Overdue,
        Verdict::NoHeartbeatUnconfirmed,
        Verdict::AwaitingNewerWrite,
    ] {
        assert_eq!(v.named_rollback(), NamedRollback::Allowed, "{v}");
    }
    for v in [
        Verdict::Live,
        Verdict::TooYoung,
        Verdict::EagerWriterSuspected,
        Verdict::AgeUnknown,
    ] {
        assert_eq!(v.named_rollback(), NamedRollback::NeedsForce, "{v}");
        assert!(!v.is_failed(), "{v}");
    }
    for v in [Verdict::NotACandidate, Verdict::Unknown] {
        assert_eq!(v.named_rollback(), NamedRollback::Never, "{v}");
    }
}

#[test]
fn writes_left_alone_are_counted_by_reason() {
    let t = timeline_with(&[
        ("20250126030000000.commit.requested", 0),
        ("20250126040000000.commit.requested", NOW - HOUR),
        ("20250126041000000.commit.requested", NOW - HOUR),
    ]);
    let a = assess_with(&t, EAGER, &Given::default());
    let r = WritersReport::new(EAGER, None, None, Some(0), &a);
    assert_eq!(
        r.left_alone,
        LeftAlone {
            no_heartbeat_unconfirmed: 0,
            awaiting_newer_write: 1,
            age_unknown: 1,
        }
    );
    let a = assess_with(&t, LAZY, &Given::default());
    let r = WritersReport::new(LAZY, None, None, Some(0), &a);
    assert_eq!(r.left_alone.no_heartbeat_unconfirmed, 2);
    assert!(!r.lazy_writers_known);
}

#[test]
fn table_services_and_clustering_are_never_candidates() {
    let t = timeline(&[
        "20250126041000000.compaction.requested",
        "20250126042000000.logcompaction.inflight",
        "20250126043000000.clustering.inflight",
        "20250126044000000.clean.requested",
        "20250126045000000.rollback.inflight",
        "20250126046000000.replacecommit.requested",
        "20250126047000000.replacecommit.inflight",
        "20250126048000000.replacecommit.inflight",
        "20250126049000000.indexing.inflight",
        "20250126049100000.restore.inflight",
    ]);
    let v = judge(
        &t,
        LAZY,
        &Given {
            replace: &[
                ("20250126046000000", ReplaceKind::Clustering),
                ("20250126047000000", ReplaceKind::Write),
                ("20250126048000000", ReplaceKind::Unknown("corrupt".into())),
            ],
            lazy_writers: Some(LazyWritersEvidence::Assumed),
            ..Default::default()
        },
    );
    let failed: Vec<_> = v.iter().filter(|(_, v)| v.is_failed()).collect();
    assert_eq!(
        failed,
        vec![&("20250126047000000".into(), Verdict::NoHeartbeat)]
    );
    assert!(v.contains(&("20250126048000000".into(), Verdict::Unknown)));
    assert_eq!(
        v.iter()
            .filter(|(_, v)| *v == Verdict::NotACandidate)
            .count(),
        8
    );
}

#[test]
fn eager_never_overrides_a_live_heartbeat_or_a_young_instant() {
    let t = timeline(&[
        "20250126041000000.commit.requested",
        "20250126050000000.commit.requested",
    ]);
    let v = judge(
        &t,
        EAGER,
        &Given {
            heartbeats: &[("20250126041000000", NOW - 5_000)],
            ..Default::default()
        },
    );
    assert_eq!(
        v,
        vec![
            ("20250126050000000".into(), Verdict::TooYoung),
            ("20250126041000000".into(), Verdict::Live),
        ]
    );
}

#[test]
fn completed_instants_are_not_assessed() {
    let t = timeline(&["20250126040000000_20250126040001000.deltacommit"]);
    assert!(judge(&t, LAZY, &Given::default()).is_empty());
}

#[test]
fn a_pending_rollback_with_a_fresh_heartbeat_is_in_progress_whatever_its_age() {
    // Requested a day ago; its rollback heartbeat is 30 s old.
    let r = "20250125050823628";
    let t = timeline_with(&[(&format!("{r}.rollback.requested"), NOW - 24 * HOUR)]);
    let fresh = Given {
        heartbeats: &[(r, NOW - 30_000)],
        ..Given::default()
    };
    let a = &assess_with(&t, FailedWritesPolicy::Lazy, &fresh)[0];
    assert_eq!(a.verdict, Verdict::RollbackInProgress, "{}", a.reason);
    assert_eq!(a.verdict.named_rollback(), NamedRollback::Never);
    // Expired, or absent: not in progress (resumed by the executor's rules).
    for heartbeats in [&[(r, NOW - HOUR)][..], &[][..]] {
        let given = Given {
            heartbeats,
            ..Given::default()
        };
        let a = &assess_with(&t, FailedWritesPolicy::Eager, &given)[0];
        assert_eq!(a.verdict, Verdict::NotACandidate, "{}", a.reason);
    }
    // A heartbeat the store gives no time for: in progress (fail closed).
    let unknown = Given {
        heartbeats: &[(r, 0)],
        ..Given::default()
    };
    let a = &assess_with(&t, FailedWritesPolicy::Lazy, &unknown)[0];
    assert_eq!(a.verdict, Verdict::RollbackInProgress, "{}", a.reason);
}

#[test]
fn an_expired_clustering_is_failed_only_with_expirations_on_a_heartbeat_file_and_the_threshold() {
    let c = "20250126030823628";
    // Requested two hours ago.
    let t = timeline_with(&[(&format!("{c}.clustering.requested"), NOW - 2 * HOUR)]);
    let verdict = |policy, heartbeats: &[(&str, i64)], threshold: Option<Duration>| {
        let given = Given {
            heartbeats,
            clustering_expiration: threshold,
            ..Given::default()
        };
        assess_with(&t, policy, &given)[0].verdict
    };
    let lazy = FailedWritesPolicy::Lazy;
    let hour = Some(Duration::from_secs(3600));
    let expired: &[(&str, i64)] = &[(c, NOW - HOUR)];
    assert_eq!(verdict(lazy, expired, hour), Verdict::Expired);
    // Off (Hudi's default), or under EAGER: never.
    assert_eq!(verdict(lazy, expired, None), Verdict::NotACandidate);
    assert_eq!(
        verdict(FailedWritesPolicy::Eager, expired, hour),
        Verdict::NotACandidate
    );
    // No heartbeat file (its job may not have expirations on), a fresh one, or younger than
    // the threshold: left alone.
    assert_eq!(verdict(lazy, &[], hour), Verdict::NotACandidate);
    assert_eq!(
        verdict(lazy, &[(c, NOW - 1_000)], hour),
        Verdict::NotACandidate
    );
    assert_eq!(
        verdict(lazy, expired, Some(Duration::from_secs(3 * 3600))),
        Verdict::NotACandidate
    );
}

/// Reasons give durations as people read them, not counts of milliseconds.
#[test]
fn reasons_give_durations_in_minutes_and_seconds() {
    let t = "20250126040823628";
    let tl = timeline(&[&format!("{t}.deltacommit.requested")]);
    let a = assess_with(
        &tl,
        FailedWritesPolicy::Lazy,
        &Given {
            heartbeats: &[(t, NOW - 600_005)],
            ..Given::default()
        },
    );
    assert_eq!(a[0].verdict, Verdict::Expired, "{}", a[0].reason);
    assert!(
        a[0].reason.starts_with(
            "heartbeat 10m 00s old, beyond 2m 00s (interval × tolerable misses) + 0ms skew margin"
        ),
        "{}",
        a[0].reason
    );
    for a in &a {
        assert!(!a.reason.contains(" ms"), "{}", a.reason);
    }
}
