//! A table's timeline drawn as inline SVG, built as one string in one pass over the instants:
//! the instants on a time axis (by requested time), one row per action; completed instants as
//! green dots, pending ones as diamonds coloured by their verdict (red: a failed write the
//! daemon rolls back; orange: left alone; blue: running or too young to judge; hollow while only
//! requested) with their heartbeat's age beside them, and the writes that rollbacks undid as
//! crosses in their action's row. Every text is escaped here (the template inserts the SVG
//! as it is).

use std::collections::HashMap;
use std::fmt::Write as _;

use hudi_keeper_core::protocol::detect::{Assessment, Verdict};
use hudi_keeper_core::timeline::{instant_to_epoch_ms, Action, Instant, InstantZone, State};

use super::format::{age, escape_into};

/// A write a rollback or restore undid: it is gone from the timeline; only its time, its
/// action when the rollback recorded it, and what undid it are known.
#[derive(Debug, Clone)]
pub struct Undone {
    pub instant: String,
    pub action: Option<Action>,
    pub by: String,
}

const WIDTH: i64 = 1200;
const LEFT: i64 = 120;
const RIGHT: i64 = 100;
const TOP: i64 = 30;
const ROW: i64 = 34;

/// The class, fill and stroke of a pending instant with this verdict.
pub fn verdict_class(v: Verdict) -> &'static str {
    if v.is_failed() {
        "failed"
    } else if v.is_left_alone() || matches!(v, Verdict::EagerWriterSuspected | Verdict::Unknown) {
        "left-alone"
    } else if v == Verdict::NotACandidate {
        "not-a-candidate"
    } else {
        "waiting"
    }
}

fn colour(class: &str) -> &'static str {
    match class {
        "failed" => "#c62828",
        "left-alone" => "#ef6c00",
        "not-a-candidate" => "#6a1b9a",
        _ => "#1565c0",
    }
}

/// The SVG of `instants` (sorted), with the verdicts of the pending ones (`pending`, the
/// last poll's) and the writes rollbacks undid (`undone`). `now_ms` is this process's clock.
pub fn timeline_svg(
    instants: &[Instant],
    pending: &[Assessment],
    undone: &[Undone],
    zone: InstantZone,
    now_ms: i64,
) -> String {
    let verdicts: HashMap<&str, &Assessment> = pending
        .iter()
        .map(|a| (a.requested_time.as_str(), a))
        .collect();
    // Rows: the actions present, in Hudi's order; "rolled back" for undone writes whose action
    // is not known.
    let mut present = [false; Action::ALL.len()];
    let index = |a: Action| Action::ALL.iter().position(|x| *x == a).unwrap_or(0);
    for i in instants {
        present[index(i.action)] = true;
    }
    let mut unknown_row = false;
    for u in undone {
        match u.action {
            Some(a) => present[index(a)] = true,
            None => unknown_row = true,
        }
    }
    let mut rows: Vec<(&str, Option<Action>)> = Action::ALL
        .iter()
        .filter(|a| present[index(**a)])
        .map(|a| (a.as_str(), Some(*a)))
        .collect();
    if unknown_row {
        rows.push(("rolled back", None));
    }
    let row_of = |a: Option<Action>| rows.iter().position(|(_, r)| *r == a).unwrap_or(0) as i64;
    // The time axis.
    let times = instants
        .iter()
        .map(|i| i.requested_time.as_str())
        .chain(undone.iter().map(|u| u.instant.as_str()))
        .filter_map(|t| instant_to_epoch_ms(t, zone));
    let (lo, hi) = times.fold((i64::MAX, i64::MIN), |(lo, hi), t| (lo.min(t), hi.max(t)));
    let (lo, hi) = if lo > hi { (now_ms, now_ms) } else { (lo, hi) };
    let plot = WIDTH - LEFT - RIGHT;
    let x_of = |ms: Option<i64>| -> i64 {
        match ms {
            Some(t) if hi > lo => {
                LEFT + ((t - lo) as i128 * plot as i128 / (hi - lo) as i128) as i64
            }
            _ => LEFT + plot / 2,
        }
    };
    let height = TOP + ROW * rows.len().max(1) as i64 + 40;
    let mut out = String::with_capacity(600 + instants.len() * 260 + undone.len() * 260);
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="timeline" viewBox="0 0 {WIDTH} {height}" width="100%" role="img" aria-label="timeline">"#
    );
    // Row labels and guide lines.
    for (n, (label, _)) in rows.iter().enumerate() {
        let y = TOP + ROW * n as i64 + ROW / 2;
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" x2="{}" y1="{y}" y2="{y}" stroke="#e0e0e0"/><text x="{}" y="{}" text-anchor="end" class="row">"##,
            WIDTH - RIGHT,
            LEFT - 10,
            y + 4
        );
        escape_into(&mut out, label);
        out.push_str("</text>");
    }
    // The axis: five ticks.
    let axis_y = TOP + ROW * rows.len().max(1) as i64 + 8;
    for k in 0..5i64 {
        let t = lo + (hi - lo) * k / 4;
        let x = LEFT + plot * k / 4;
        let label = chrono::DateTime::from_timestamp_millis(t)
            .map(|d| d.format("%m-%d %H:%M:%S").to_string())
            .unwrap_or_default();
        let anchor = match k {
            0 => "start",
            4 => "end",
            _ => "middle",
        };
        let _ = write!(
            out,
            r##"<line x1="{x}" x2="{x}" y1="{TOP}" y2="{axis_y}" stroke="#f0f0f0"/><text x="{x}" y="{}" text-anchor="{anchor}" class="tick">{label}</text>"##,
            axis_y + 14
        );
    }
    for i in instants {
        let x = x_of(instant_to_epoch_ms(&i.requested_time, zone));
        let y = TOP + ROW * row_of(Some(i.action)) + ROW / 2;
        if !i.is_pending() {
            out.push_str(r#"<g class="instant completed" data-instant=""#);
            escape_into(&mut out, &i.requested_time);
            out.push_str(r#""><title>"#);
            escape_into(&mut out, &i.requested_time);
            let _ = write!(
                out,
                r##" {} completed</title><circle cx="{x}" cy="{y}" r="4" fill="#2e7d32"/></g>"##,
                i.action
            );
            continue;
        }
        let a = verdicts.get(i.requested_time.as_str());
        let class = a.map(|a| verdict_class(a.verdict)).unwrap_or("waiting");
        let c = colour(class);
        let fill = if i.state == State::Requested {
            "#ffffff"
        } else {
            c
        };
        out.push_str(r#"<g class="instant pending "#);
        out.push_str(class);
        out.push_str(r#"" data-instant=""#);
        escape_into(&mut out, &i.requested_time);
        out.push_str(r#"" data-verdict=""#);
        out.push_str(a.map(|a| a.verdict.as_str()).unwrap_or("not judged yet"));
        out.push_str(r#""><title>"#);
        escape_into(&mut out, &i.requested_time);
        let _ = write!(out, " {} {}", i.action, i.state.as_str());
        if let Some(a) = a {
            let _ = write!(out, ": {}: ", a.verdict);
            escape_into(&mut out, &a.reason);
        }
        let _ = write!(
            out,
            r#"</title><path d="M{x} {} l6 6 l-6 6 l-6 -6 z" fill="{fill}" stroke="{c}" stroke-width="2"/>"#,
            y - 6
        );
        let beat = match a.and_then(|a| a.heartbeat_age_ms) {
            Some(ms) => format!("heartbeat {}", age(ms)),
            None if a.is_some() => "no heartbeat".to_string(),
            None => String::new(),
        };
        let _ = write!(
            out,
            r#"<text x="{}" y="{}" class="beat">{beat}</text></g>"#,
            x + 9,
            y - 8
        );
    }
    for u in undone {
        let x = x_of(instant_to_epoch_ms(&u.instant, zone));
        let y = TOP + ROW * row_of(u.action) + ROW / 2;
        out.push_str(r#"<g class="instant rolled-back" data-instant=""#);
        escape_into(&mut out, &u.instant);
        out.push_str(r#""><title>"#);
        escape_into(&mut out, &u.instant);
        out.push_str(" rolled back by ");
        escape_into(&mut out, &u.by);
        let _ = write!(
            out,
            r##"</title><path d="M{} {} l10 10 m0 -10 l-10 10" stroke="#c62828" stroke-width="2.5"/></g>"##,
            x - 5,
            y - 5
        );
    }
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instant(t: &str, action: Action, state: State) -> Instant {
        Instant {
            requested_time: t.into(),
            action,
            state,
            completion_time: None,
            pending_action: action,
            files: Vec::new(),
        }
    }

    #[test]
    fn marks_pending_completed_and_undone_instants_and_escapes_text() {
        let instants = vec![
            instant("20260101000000000", Action::DeltaCommit, State::Completed),
            instant("20260101000800000", Action::Commit, State::Inflight),
            instant("20260101001000000", Action::DeltaCommit, State::Inflight),
        ];
        let pending = vec![
            Assessment {
                requested_time: "20260101000800000".into(),
                action: Action::Commit,
                state: State::Inflight,
                heartbeat_age_ms: Some(900_000),
                instant_age_ms: Some(1_200_000),
                verdict: Verdict::Expired,
                reason: "heartbeat expired".into(),
            },
            Assessment {
                requested_time: "20260101001000000".into(),
                action: Action::DeltaCommit,
                state: State::Inflight,
                heartbeat_age_ms: Some(120_000),
                instant_age_ms: Some(600_000),
                verdict: Verdict::AwaitingNewerWrite,
                reason: "writer <script>alert(1)</script> may run".into(),
            },
        ];
        let undone = vec![Undone {
            instant: "20260101000500000".into(),
            action: None,
            by: "20260101000600000".into(),
        }];
        let svg = timeline_svg(&instants, &pending, &undone, InstantZone::Utc, 0);
        assert!(svg.contains(r#"class="instant completed" data-instant="20260101000000000""#));
        assert!(svg.contains(
            r#"class="instant pending left-alone" data-instant="20260101001000000" data-verdict="awaiting_newer_write""#
        ));
        assert!(svg.contains(
            r#"class="instant pending failed" data-instant="20260101000800000" data-verdict="expired""#
        ));
        assert!(svg.contains("heartbeat 15 min"), "{svg}");
        assert!(svg.contains("heartbeat 2 min"), "{svg}");
        // One row per action present, in Hudi's order, and one for undone writes of no known
        // action.
        let rows: Vec<&str> = svg
            .split(r#"class="row">"#)
            .skip(1)
            .filter_map(|r| r.split('<').next())
            .collect();
        assert_eq!(rows, ["commit", "deltacommit", "rolled back"]);
        assert!(svg.contains(r#"class="instant rolled-back" data-instant="20260101000500000""#));
        assert!(svg.contains(">rolled back</text>"));
        assert!(!svg.contains("<script>"), "{svg}");
        assert!(svg.contains("&lt;script&gt;"));
    }

    #[test]
    fn an_empty_timeline_is_an_empty_drawing() {
        let svg = timeline_svg(&[], &[], &[], InstantZone::Utc, 0);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert!(!svg.contains("class=\"instant"));
    }

    #[test]
    fn a_thousand_instants_are_each_drawn_once() {
        let start = chrono::DateTime::from_timestamp_millis(1_767_225_600_000).unwrap_or_default();
        let time = |n: i64| {
            hudi_keeper_core::timeline::format_instant(
                start + chrono::Duration::seconds(60 * n),
                InstantZone::Utc,
            )
        };
        let mut instants: Vec<Instant> = (0..1000)
            .map(|n| instant(&time(n), Action::Commit, State::Completed))
            .collect();
        instants[999].state = State::Inflight;
        let pending = vec![Assessment {
            requested_time: time(999),
            action: Action::Commit,
            state: State::Inflight,
            heartbeat_age_ms: Some(1_000),
            instant_age_ms: Some(1_000),
            verdict: Verdict::Live,
            reason: String::new(),
        }];
        let undone: Vec<Undone> = (0..1000)
            .map(|n| Undone {
                instant: format!("{}5", &time(n)[..16]),
                action: Some(Action::Commit),
                by: time(n + 1),
            })
            .collect();
        let begun = std::time::Instant::now();
        let svg = timeline_svg(&instants, &pending, &undone, InstantZone::Utc, 0);
        // A figure for the log (`--nocapture`), not a test: timings depend on the machine.
        eprintln!(
            "1,000 instants and 1,000 undone writes: {} bytes of SVG in {:?}",
            svg.len(),
            begun.elapsed()
        );
        assert_eq!(svg.matches(r#"class="instant completed""#).count(), 999);
        assert_eq!(svg.matches(r#"class="instant pending waiting""#).count(), 1);
        assert_eq!(svg.matches(r#"class="instant rolled-back""#).count(), 1000);
        // Spread along the axis: the first at its left end, the last at its right end.
        let first = format!(r#"data-instant="{}"><title>"#, time(0));
        assert!(svg.contains(&first));
        assert!(
            svg.contains(&format!(r#"<circle cx="{LEFT}" "#)),
            "first at the left"
        );
        // The newest, an undone write 5 ms after the last instant, at the right end (its cross
        // starts 5 left of its place).
        assert!(
            svg.contains(&format!("M{} ", WIDTH - RIGHT - 5)),
            "last at the right"
        );
    }
}
