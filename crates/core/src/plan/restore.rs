//! Restore planning (hudi-format.md §6, `tests/interop/observations/savepoint-restore.md`):
//! which instants a restore to `T` undoes, in Hudi's order, or why it must not run. Pure.
//!
//! Hudi's order: the pending writes first, then the completed instants after `T`, newest first
//! (by completion time in layout 2, by requested time in layout 1). Hudi checks little up front
//! (`restoreToInstant` fails midway on a savepointed commit); hudi-keeper refuses before it
//! changes anything whenever Hudi would stop halfway or leave the table worse.

use std::collections::BTreeMap;

use crate::config::TimelineLayout;
use crate::format::restore::RestorePlan;
use crate::format::rollback::InstantInfo;
use crate::plan::savepoint::cleaned_beyond;
use crate::protocol::detect::{Assessment, Verdict};
use crate::timeline::{Action, State, Timeline};

/// One instant a restore undoes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undo {
    /// Its time.
    pub instant: String,
    /// Its action as the plan records it (the completed action, or the pending one).
    pub action: Action,
    /// Its state now.
    pub state: State,
}

/// What a restore will do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedRestore {
    /// The pending restore this continues, if any.
    pub resumes: Option<String>,
    /// The plan to write (or the pending restore's own).
    pub plan: RestorePlan,
    /// The instants still to undo, in order (on resume, those still on the timeline).
    pub undo: Vec<Undo>,
}

/// What a restore is planned from.
#[derive(Debug, Clone)]
pub struct RestoreInput<'a> {
    /// The active timeline.
    pub timeline: &'a Timeline,
    /// Its layout.
    pub layout: TimelineLayout,
    /// The instant to take the table back to.
    pub target: &'a str,
    /// Whether `target` must be savepointed (`--savepoint`, Hudi's `restoreToSavepoint`).
    pub require_savepoint: bool,
    /// The failed-write assessment of every pending instant (heartbeats read now).
    pub assessments: &'a [Assessment],
    /// Pending restores with their plans (`None` when the plan could not be read).
    pub pending_restores: &'a [(String, Option<RestorePlan>)],
    /// The oldest commit the last completed clean retained (`earliestCommitToRetain`): an
    /// older restore point without a savepoint may have lost file versions to it.
    pub earliest_retained: Option<&'a str>,
}

/// Why a restore must not run; nothing is changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RestoreRefusal(pub String);

fn refuse<T>(reason: impl Into<String>) -> Result<T, RestoreRefusal> {
    Err(RestoreRefusal(reason.into()))
}

/// Plan a restore to `input.target`.
pub fn plan_restore(input: &RestoreInput<'_>) -> Result<PlannedRestore, RestoreRefusal> {
    let t = input.target;
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return refuse(format!("`{t}` is not an instant time"));
    }
    if let Some(resumed) = resume_pending(input)? {
        return Ok(resumed);
    }
    check_restore_point(input)?;
    let undo = undo_newest_first(input);
    check_undo(input, &undo, true)?;
    Ok(PlannedRestore {
        resumes: None,
        plan: RestorePlan {
            instants_to_rollback: undo
                .iter()
                .map(|u| InstantInfo {
                    commit_time: u.instant.clone(),
                    action: u.action.as_str().to_string(),
                })
                .collect(),
            version: Some(2),
            savepoint_to_restore_timestamp: Some(t.to_string()),
        },
        undo,
    })
}

/// A pending restore is finished first, and only towards its own restore point: its plan, to
/// resume, or `None` when no restore is pending.
fn resume_pending(input: &RestoreInput<'_>) -> Result<Option<PlannedRestore>, RestoreRefusal> {
    let tl = input.timeline;
    let t = input.target;
    match input.pending_restores {
        [] => Ok(None),
        [(r, None)] => refuse(format!(
            "restore {r} is pending but its plan cannot be read (a corrupt `{r}.restore.requested`); nothing was changed. Inspect the file; Hudi refuses writes until that restore is finished"
        )),
        [(r, Some(plan))] => {
            let point = plan.savepoint_to_restore_timestamp.as_deref();
            if point != Some(t) {
                return refuse(format!(
                    "restore {r} (to {}) is pending and must be finished first: run the restore to that instant again",
                    point.unwrap_or("an unrecorded instant")
                ));
            }
            let undo = plan
                .instants_to_rollback
                .iter()
                .filter_map(|i| {
                    tl.find(&i.commit_time)
                        .find(|x| x.action.is_write())
                        .map(|x| Undo {
                            instant: i.commit_time.clone(),
                            action: i.action.parse().unwrap_or(x.action),
                            state: x.state,
                        })
                })
                .collect::<Vec<_>>();
            // Its instants were judged dead when it was planned; an instant whose completed
            // file an interrupted child rollback removed is pending now, and is the restore's.
            check_undo(input, &undo, false)?;
            Ok(Some(PlannedRestore {
                resumes: Some(r.clone()),
                plan: plan.clone(),
                undo,
            }))
        }
        many => {
            let names: Vec<&str> = many.iter().map(|(r, _)| r.as_str()).collect();
            refuse(format!(
                "several restores are pending ({}); this is not a state Hudi leaves, so hudi-keeper will not guess. Nothing was changed",
                names.join(", ")
            ))
        }
    }
}

/// The restore point must be a completed commit on the active timeline, savepointed when that
/// is required, and (without a savepoint) no older than what the last clean retained.
fn check_restore_point(input: &RestoreInput<'_>) -> Result<(), RestoreRefusal> {
    let tl = input.timeline;
    let t = input.target;
    // The restore point: a completed commit on the active timeline.
    let point = tl.find(t).find(|i| {
        matches!(
            i.action,
            Action::Commit | Action::DeltaCommit | Action::ReplaceCommit
        )
    });
    match point {
        Some(i) if !i.is_pending() => {}
        Some(_) => {
            return refuse(format!(
                "{t} is not completed; a restore goes back to a completed commit"
            ))
        }
        None => {
            let earliest = tl.instants().first().map(|i| i.requested_time.as_str());
            return match earliest {
                Some(e) if t < e => refuse(format!(
                    "{t} is older than the active timeline (which starts at {e}): it is archived, and its files may be cleaned. Hudi cannot restore to it either"
                )),
                _ => refuse(format!("there is no completed commit at {t} on the active timeline")),
            };
        }
    }
    let savepointed = |time: &str| {
        tl.find(time)
            .any(|i| i.action == Action::Savepoint && !i.is_pending())
    };
    if input.require_savepoint && !savepointed(t) {
        return refuse(format!(
            "there is no savepoint at {t}. Savepoint it first (`hudi-keeper savepoint create --instant {t}`) or restore without one with `--to-instant` (Hudi's restoreToInstant), knowing that a clean may have removed files {t} needs"
        ));
    }
    // Without a savepoint, the cleaner kept only the versions the last clean retained: older
    // versions of `t`'s file groups may be gone, and undoing the newer ones would lose those
    // file groups entirely. (Hudi's restoreToInstant does not check; its savepoint does.)
    if let Some(e) = cleaned_beyond(t, input.earliest_retained).filter(|_| !savepointed(t)) {
        return refuse(format!(
            "{t} is older than {e}, the oldest commit the last clean retained: file versions of {t}'s view may be cleaned already, and undoing the newer versions would lose those file groups. Restore to {e} or a later commit, or to a savepointed commit (`hudi-keeper savepoint list`); a savepoint of {t} is refused for the same reason"
        ));
    }
    Ok(())
}

/// The writes after the restore point, in the order they are undone: pending ones newest first,
/// then completed ones by completion (layout 2) or requested time, newest first.
fn undo_newest_first(input: &RestoreInput<'_>) -> Vec<Undo> {
    let mut pending = Vec::new();
    let mut completed = Vec::new();
    for i in input
        .timeline
        .after(input.target)
        .filter(|i| i.action.is_write())
    {
        let u = Undo {
            instant: i.requested_time.clone(),
            action: i.action,
            state: i.state,
        };
        if i.is_pending() {
            pending.push(u);
        } else {
            let key = match input.layout {
                TimelineLayout::V1 => i.requested_time.clone(),
                TimelineLayout::V2 => i
                    .completion_time
                    .clone()
                    .unwrap_or_else(|| i.requested_time.clone()),
            };
            completed.push((key, u));
        }
    }
    pending.sort_by(|a, b| b.instant.cmp(&a.instant));
    completed.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.instant.cmp(&a.1.instant)));
    pending
        .into_iter()
        .chain(completed.into_iter().map(|(_, u)| u))
        .collect()
}

/// Refuse what Hudi would stop halfway on, or what would leave the table worse: a savepointed
/// instant to undo, a pending write that may be alive, a pending table service, a pending clean.
fn check_undo(
    input: &RestoreInput<'_>,
    undo: &[Undo],
    check_liveness: bool,
) -> Result<(), RestoreRefusal> {
    let tl = input.timeline;
    let t = input.target;
    if let Some(sp) = tl
        .after(t)
        .find(|i| i.action == Action::Savepoint)
        .map(|i| i.requested_time.as_str())
    {
        return refuse(format!(
            "commit {sp} is savepointed and would be undone; delete that savepoint first (`hudi-keeper savepoint delete --instant {sp}`). Hudi would stop halfway here"
        ));
    }
    let assessed: BTreeMap<&str, &Assessment> = input
        .assessments
        .iter()
        .map(|a| (a.requested_time.as_str(), a))
        .collect();
    for u in undo
        .iter()
        .filter(|u| check_liveness && u.state != State::Completed)
    {
        match assessed.get(u.instant.as_str()) {
            Some(a) if a.verdict.is_failed() => {}
            Some(a) => {
                return refuse(format!(
                    "pending {} {} is not a failed write ({}: {}); a restore must not run under a live writer or undo a table service. Wait for it, or stop its writer",
                    u.action, u.instant, a.verdict, a.reason
                ))
            }
            None => {
                return refuse(format!(
                    "pending {} {} was not assessed; nothing was changed",
                    u.action, u.instant
                ))
            }
        }
    }
    // A rollback another process runs right now (its rollback heartbeat is fresh): a restore
    // removes pending rollbacks after its restore point and must not run beside one anyway.
    if let Some(a) = input
        .assessments
        .iter()
        .find(|a| a.verdict == Verdict::RollbackInProgress)
    {
        return refuse(format!(
            "rollback {} is running in another process ({}); a restore must not run beside it. Wait for it to finish",
            a.requested_time, a.reason
        ));
    }
    if let Some(c) = tl
        .after(t)
        .find(|i| i.action == Action::Clean && i.is_pending())
    {
        return refuse(format!(
            "clean {} is pending; its plan was made from commits the restore undoes, and finishing it afterwards could delete files the restored table reads. Let a Hudi writer finish it, then restore",
            c.requested_time
        ));
    }
    Ok(())
}

/// The rollback instants a finished restore to `target` removes (Hudi removes every rollback
/// after the restore point, completed ones too), newest first.
pub fn rollbacks_to_remove(timeline: &Timeline, target: &str) -> Vec<String> {
    let mut out: Vec<String> = timeline
        .after(target)
        .filter(|i| i.action == Action::Rollback)
        .map(|i| i.requested_time.clone())
        .collect();
    out.sort_by(|a, b| b.cmp(a));
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::detect::Verdict;
    use crate::storage::{FileMeta, RelPath};
    use crate::timeline::InstantZone;

    fn timeline(names: &[&str], layout: TimelineLayout) -> Timeline {
        let dir = match layout {
            TimelineLayout::V1 => ".hoodie",
            TimelineLayout::V2 => ".hoodie/timeline",
        };
        Timeline::from_files(
            names
                .iter()
                .map(|n| FileMeta {
                    path: RelPath::parse(&format!("{dir}/{n}")).unwrap(),
                    size: 1,
                    last_modified: chrono::DateTime::from_timestamp_millis(0).unwrap(),
                })
                .collect(),
            layout,
            InstantZone::Utc,
        )
    }

    fn dead(t: &str) -> Assessment {
        Assessment {
            requested_time: t.into(),
            action: Action::Commit,
            state: State::Inflight,
            heartbeat_age_ms: Some(1_000_000),
            instant_age_ms: None,
            verdict: Verdict::Expired,
            reason: "expired".into(),
        }
    }

    fn input<'a>(
        tl: &'a Timeline,
        layout: TimelineLayout,
        t: &'a str,
        a: &'a [Assessment],
    ) -> RestoreInput<'a> {
        RestoreInput {
            timeline: tl,
            layout,
            target: t,
            require_savepoint: true,
            assessments: a,
            pending_restores: &[],
            earliest_retained: None,
        }
    }

    fn times(p: &PlannedRestore) -> Vec<&str> {
        p.undo.iter().map(|u| u.instant.as_str()).collect()
    }

    const V1: &[&str] = &[
        "101.commit",
        "102.commit",
        "102.savepoint.inflight",
        "102.savepoint",
        "103.commit",
        "104.rollback",
        "105.commit",
        "106.inflight",
    ];

    #[test]
    fn layout_1_undoes_the_dead_pending_write_then_commits_newest_requested_first() {
        let tl = timeline(V1, TimelineLayout::V1);
        let a = [dead("106")];
        let p = plan_restore(&input(&tl, TimelineLayout::V1, "102", &a)).unwrap();
        assert_eq!(times(&p), ["106", "105", "103"]);
        assert_eq!(p.plan.version, Some(2));
        assert_eq!(
            p.plan.savepoint_to_restore_timestamp.as_deref(),
            Some("102")
        );
        assert_eq!(p.plan.instants_to_rollback[0].action, "commit");
        assert_eq!(rollbacks_to_remove(&tl, "102"), ["104"]);
    }

    #[test]
    fn a_restore_point_the_last_clean_did_not_retain_is_refused_unless_savepointed() {
        let tl = timeline(V1, TimelineLayout::V1);
        let a = [dead("106")];
        let at = |t: &'static str| RestoreInput {
            require_savepoint: false,
            earliest_retained: Some("103"),
            ..input(&tl, TimelineLayout::V1, t, &a)
        };
        let e = plan_restore(&at("101")).unwrap_err().0;
        assert!(
            e.contains("the oldest commit the last clean retained"),
            "{e}"
        );
        assert!(e.contains("Restore to 103"), "{e}");
        // A savepoint kept 102's files from the cleaner; 103 itself was retained.
        assert_eq!(
            times(&plan_restore(&at("102")).unwrap()),
            ["106", "105", "103"]
        );
        assert_eq!(times(&plan_restore(&at("103")).unwrap()), ["106", "105"]);
    }

    #[test]
    fn layout_2_orders_completed_instants_by_completion_time() {
        let tl = timeline(
            &[
                "101_111.commit",
                "102_112.commit",
                "102.savepoint.inflight",
                "102_113.savepoint",
                "103_130.commit",
                "104_120.commit",
            ],
            TimelineLayout::V2,
        );
        let p = plan_restore(&input(&tl, TimelineLayout::V2, "102", &[])).unwrap();
        assert_eq!(times(&p), ["103", "104"]);
    }

    #[test]
    fn refuses_without_a_savepoint_unless_asked_to_restore_to_an_instant() {
        let tl = timeline(V1, TimelineLayout::V1);
        let a = [dead("106")];
        let err = plan_restore(&input(&tl, TimelineLayout::V1, "103", &a)).unwrap_err();
        assert!(err.0.contains("no savepoint at 103"), "{err}");
        let mut i = input(&tl, TimelineLayout::V1, "103", &a);
        i.require_savepoint = false;
        assert_eq!(times(&plan_restore(&i).unwrap()), ["106", "105"]);
    }

    #[test]
    fn refuses_to_undo_a_savepointed_commit_up_front() {
        let tl = timeline(V1, TimelineLayout::V1);
        let a = [dead("106")];
        let mut i = input(&tl, TimelineLayout::V1, "101", &a);
        i.require_savepoint = false;
        let err = plan_restore(&i).unwrap_err();
        assert!(err.0.contains("102 is savepointed"), "{err}");
    }

    #[test]
    fn refuses_a_live_write_a_pending_compaction_and_a_pending_clean() {
        let tl = timeline(V1, TimelineLayout::V1);
        let mut live = dead("106");
        live.verdict = Verdict::Live;
        let err = plan_restore(&input(&tl, TimelineLayout::V1, "102", &[live])).unwrap_err();
        assert!(err.0.contains("not a failed write"), "{err}");

        let mut names = V1.to_vec();
        names.push("107.compaction.requested");
        let tl = timeline(&names, TimelineLayout::V1);
        let mut c = dead("107");
        c.verdict = Verdict::NotACandidate;
        let err =
            plan_restore(&input(&tl, TimelineLayout::V1, "102", &[dead("106"), c])).unwrap_err();
        assert!(err.0.contains("compaction 107"), "{err}");

        let mut names = V1.to_vec();
        names.push("107.clean.requested");
        let tl = timeline(&names, TimelineLayout::V1);
        let err = plan_restore(&input(&tl, TimelineLayout::V1, "102", &[dead("106")])).unwrap_err();
        assert!(err.0.contains("clean 107 is pending"), "{err}");
    }

    #[test]
    fn refuses_archived_missing_and_pending_restore_points() {
        let tl = timeline(V1, TimelineLayout::V1);
        let a = [dead("106")];
        let mut i = input(&tl, TimelineLayout::V1, "100", &a);
        i.require_savepoint = false;
        assert!(plan_restore(&i).unwrap_err().0.contains("archived"));
        i.target = "1035";
        assert!(plan_restore(&i)
            .unwrap_err()
            .0
            .contains("no completed commit"));
        i.target = "106";
        assert!(plan_restore(&i).unwrap_err().0.contains("not completed"));
        i.target = "../x";
        assert!(plan_restore(&i)
            .unwrap_err()
            .0
            .contains("not an instant time"));
    }

    #[test]
    fn a_pending_restore_is_resumed_only_towards_its_own_point() {
        let mut names = V1.to_vec();
        names.extend(["107.restore.requested", "107.restore.inflight"]);
        let tl = timeline(&names, TimelineLayout::V1);
        let plan = RestorePlan {
            instants_to_rollback: ["106", "105", "103"]
                .iter()
                .map(|t| InstantInfo {
                    commit_time: t.to_string(),
                    action: "commit".into(),
                })
                .collect(),
            version: Some(2),
            savepoint_to_restore_timestamp: Some("102".into()),
        };
        let pending = [("107".to_string(), Some(plan.clone()))];
        let a = [dead("106")];
        let mut i = input(&tl, TimelineLayout::V1, "102", &a);
        i.pending_restores = &pending;
        let p = plan_restore(&i).unwrap();
        assert_eq!(p.resumes.as_deref(), Some("107"));
        assert_eq!(times(&p), ["106", "105", "103"]);
        i.target = "101";
        assert!(plan_restore(&i)
            .unwrap_err()
            .0
            .contains("must be finished first"));
        let corrupt = [("107".to_string(), None)];
        i.pending_restores = &corrupt;
        assert!(plan_restore(&i).unwrap_err().0.contains("cannot be read"));
    }
}
