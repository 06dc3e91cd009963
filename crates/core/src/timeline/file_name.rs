//! The file-name grammar of the active timeline, layouts 1 and 2 (hudi-format.md §1.5-1.6).
//!
//! | state     | layout 1            | layout 2                                   |
//! |-----------|---------------------|--------------------------------------------|
//! | requested | `T.<action>.requested` | same                                    |
//! | inflight  | `T.<action>.inflight`, `T.inflight` for `commit` | same          |
//! | completed | `T.<action>`        | `T_C.<action>`, or legacy `T.<action>`     |
//!
//! Only the combinations Hudi writes are accepted, so `format(parse(x)) == x` for every name
//! that parses.

use std::fmt;

use super::action::{Action, State};
use crate::config::TimelineLayout;

/// Why a timeline-looking file name was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{name}` is not a valid timeline file name: {reason}")]
pub struct FileNameError {
    /// The file name.
    pub name: String,
    /// What is wrong with it.
    pub reason: String,
}

/// A parsed timeline file name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TimelineFileName {
    /// The instant (requested) time.
    pub requested_time: String,
    /// The completion time carried in a layout-2 completed file name.
    pub completion_time: Option<String>,
    /// The action in the name (for a completed file, the completed action).
    pub action: Action,
    /// The state the file records.
    pub state: State,
}

/// Whether Hudi writes a file for `action` in `state` under `layout`.
pub fn is_valid(layout: TimelineLayout, action: Action, state: State) -> bool {
    use Action::*;
    if action == Clustering && layout == TimelineLayout::V1 {
        return false;
    }
    match state {
        // A savepoint starts inflight.
        State::Requested => action != Savepoint,
        State::Inflight => true,
        // Compaction, log compaction and clustering complete under another action.
        State::Completed => action.completed_action() == action,
    }
}

fn is_time(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

impl TimelineFileName {
    /// Parse `name` as a file of a `layout` timeline.
    pub fn parse(name: &str, layout: TimelineLayout) -> Result<Self, FileNameError> {
        let bad = |reason: &str| FileNameError {
            name: name.to_string(),
            reason: reason.to_string(),
        };
        let (time_part, ext) = name
            .split_once('.')
            .ok_or_else(|| bad("it has no action extension"))?;
        let (requested_time, completion_time) = match time_part.split_once('_') {
            Some((t, c)) => (t, Some(c)),
            None => (time_part, None),
        };
        if !is_time(requested_time) {
            return Err(bad("the instant time is not all digits"));
        }
        if let Some(c) = completion_time {
            if layout == TimelineLayout::V1 {
                return Err(bad("layout 1 names carry no completion time"));
            }
            if !is_time(c) {
                return Err(bad("the completion time is not all digits"));
            }
        }
        let (action_name, state) = match ext {
            "inflight" => ("commit", State::Inflight),
            _ => match ext.split_once('.') {
                Some((a, "requested")) => (a, State::Requested),
                Some((a, "inflight")) => (a, State::Inflight),
                Some(_) => return Err(bad("unknown state extension")),
                None => (ext, State::Completed),
            },
        };
        let action: Action = action_name.parse().map_err(|e| bad(&format!("{e}")))?;
        if action == Action::Commit && state == State::Inflight && ext != "inflight" {
            return Err(bad("an inflight commit is written as `T.inflight`"));
        }
        if !is_valid(layout, action, state) {
            return Err(bad(&format!(
                "Hudi does not write a {state} `{action}` file in timeline layout {}",
                layout.number()
            )));
        }
        if completion_time.is_some() && state != State::Completed {
            return Err(bad("only completed files carry a completion time"));
        }
        Ok(TimelineFileName {
            requested_time: requested_time.to_string(),
            completion_time: completion_time.map(str::to_string),
            action,
            state,
        })
    }

    /// The file name of a requested or inflight file, or of a completed file (with `_C` in
    /// layout 2 when a completion time is set).
    pub fn format(&self, layout: TimelineLayout) -> String {
        let t = &self.requested_time;
        match self.state {
            State::Requested => format!("{t}.{}.requested", self.action),
            State::Inflight if self.action == Action::Commit => format!("{t}.inflight"),
            State::Inflight => format!("{t}.{}.inflight", self.action),
            State::Completed => match (&self.completion_time, layout) {
                (Some(c), TimelineLayout::V2) => format!("{t}_{c}.{}", self.action),
                _ => format!("{t}.{}", self.action),
            },
        }
    }
}

impl fmt::Display for TimelineFileName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let layout = if self.completion_time.is_some() {
            TimelineLayout::V2
        } else {
            TimelineLayout::V1
        };
        f.write_str(&self.format(layout))
    }
}

/// Whether a name looks like a timeline file (starts with a digit). Other names in the timeline
/// folder (`hoodie.properties`, `.crc` files, folders) are not timeline files at all.
pub fn looks_like_timeline_file(name: &str) -> bool {
    name.as_bytes().first().is_some_and(u8::is_ascii_digit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const L1: TimelineLayout = TimelineLayout::V1;
    const L2: TimelineLayout = TimelineLayout::V2;

    fn parse(n: &str, l: TimelineLayout) -> TimelineFileName {
        TimelineFileName::parse(n, l).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn layout_1_names_from_real_tables() {
        let f = parse("20250126040823628.inflight", L1);
        assert_eq!((f.action, f.state), (Action::Commit, State::Inflight));
        let f = parse("20250126040823628.deltacommit.requested", L1);
        assert_eq!((f.action, f.state), (Action::DeltaCommit, State::Requested));
        let f = parse("20250126040823628.compaction.inflight", L1);
        assert_eq!((f.action, f.state), (Action::Compaction, State::Inflight));
        let f = parse("20250126040823628.replacecommit", L1);
        assert_eq!(
            (f.action, f.state),
            (Action::ReplaceCommit, State::Completed)
        );
        let f = parse("20250126040823628.savepoint.inflight", L1);
        assert_eq!((f.action, f.state), (Action::Savepoint, State::Inflight));
        let f = parse("20210101010101.commit", L1);
        assert_eq!(f.requested_time, "20210101010101");
    }

    #[test]
    fn layout_2_names_carry_the_completion_time() {
        let f = parse("20250126040823628_20250126040825001.deltacommit", L2);
        assert_eq!(f.requested_time, "20250126040823628");
        assert_eq!(f.completion_time.as_deref(), Some("20250126040825001"));
        assert_eq!((f.action, f.state), (Action::DeltaCommit, State::Completed));
        let f = parse("20250126040823628.clustering.requested", L2);
        assert_eq!((f.action, f.state), (Action::Clustering, State::Requested));
        // A legacy completed file carried over from 0.x.
        let f = parse("20250126040823628.commit", L2);
        assert_eq!(f.completion_time, None);
    }

    #[test]
    fn names_hudi_never_writes_are_rejected() {
        for (n, l) in [
            ("20250126040823628.commit.inflight", L1),
            ("20250126040823628.compaction", L1),
            ("20250126040823628_20250126040825001.commit", L1),
            ("20250126040823628.clustering.requested", L1),
            ("20250126040823628_2025.inflight", L2),
            ("20250126040823628.savepoint.requested", L2),
            ("20250126040823628.bogus", L2),
            ("20250126040823628.commit.done", L2),
            ("2025012604082362x.commit", L2),
            ("20250126040823628", L2),
            ("20250126040823628_.commit", L2),
        ] {
            assert!(
                TimelineFileName::parse(n, l).is_err(),
                "{n} accepted in {l:?}"
            );
        }
    }

    #[test]
    fn non_timeline_names_are_recognised() {
        assert!(!looks_like_timeline_file("hoodie.properties"));
        assert!(!looks_like_timeline_file(".20250126040823628.commit.crc"));
        assert!(!looks_like_timeline_file("history"));
        assert!(looks_like_timeline_file("20250126040823628.commit"));
    }

    fn arb_name(layout: TimelineLayout) -> impl Strategy<Value = String> {
        let actions: Vec<Action> = Action::ALL.to_vec();
        (
            "[0-9]{14}|[0-9]{17}|[0-9]{20}",
            proptest::option::of("[0-9]{17}"),
            proptest::sample::select(actions),
            prop_oneof![
                Just(State::Requested),
                Just(State::Inflight),
                Just(State::Completed)
            ],
        )
            .prop_filter_map("valid combination", move |(t, c, a, s)| {
                if !is_valid(layout, a, s) {
                    return None;
                }
                let c = if s == State::Completed && layout == TimelineLayout::V2 {
                    c
                } else {
                    None
                };
                Some(
                    TimelineFileName {
                        requested_time: t,
                        completion_time: c,
                        action: a,
                        state: s,
                    }
                    .format(layout),
                )
            })
    }

    proptest! {
        #[test]
        fn format_inverts_parse_in_layout_1(name in arb_name(L1)) {
            let parsed = TimelineFileName::parse(&name, L1).unwrap();
            prop_assert_eq!(parsed.format(L1), name);
        }

        #[test]
        fn format_inverts_parse_in_layout_2(name in arb_name(L2)) {
            let parsed = TimelineFileName::parse(&name, L2).unwrap();
            prop_assert_eq!(parsed.format(L2), name);
        }

        #[test]
        fn parse_never_panics_and_accepted_names_round_trip(name in "[0-9_]{0,20}\\.?[a-z]{0,14}\\.?[a-z]{0,10}") {
            for l in [L1, L2] {
                if let Ok(p) = TimelineFileName::parse(&name, l) {
                    prop_assert_eq!(p.format(l), name.clone());
                }
            }
        }
    }
}

#[cfg(test)]
mod fuzz_tests {
    //! Timeline folder listings as the store returns them: any names, near-valid names, and
    //! valid names damaged. Parsing never panics, every accepted name round-trips, and a
    //! timeline built from such a listing puts every timeline-looking name in an instant or in
    //! `malformed`.

    use chrono::{TimeZone, Utc};
    use proptest::prelude::*;

    use super::*;
    use crate::fuzz;
    use crate::storage::{FileMeta, RelPath};
    use crate::timeline::time::{instant_to_epoch_ms, InstantZone};
    use crate::timeline::Timeline;

    const VALID: [&str; 8] = [
        "20250126040823628.inflight",
        "20250126040823628.deltacommit.requested",
        "20250126040823628_20250126040825001.deltacommit",
        "20250126040823628.clustering.requested",
        "20250126040823628.rollback",
        "20210101010101.commit",
        "20250126040823628.savepoint.inflight",
        "00000000000000010.deltacommit",
    ];

    fn names() -> impl Strategy<Value = Vec<String>> {
        let damaged = fuzz::mutated_one_of(VALID.iter().map(|n| n.as_bytes().to_vec()).collect())
            .prop_map(|b| String::from_utf8_lossy(&b).into_owned());
        let one = prop_oneof![
            3 => damaged,
            2 => fuzz::text_from("0123456789._abcdefghilmnoqrstuv", 48),
            1 => any::<String>(),
        ];
        prop::collection::vec(one, 0..12)
    }

    fn check(names: &[String]) {
        let mut files = Vec::new();
        for n in names {
            for l in [TimelineLayout::V1, TimelineLayout::V2] {
                if let Ok(p) = TimelineFileName::parse(n, l) {
                    assert_eq!(&p.format(l), n, "{n} in {l:?}");
                    let _ = instant_to_epoch_ms(&p.requested_time, InstantZone::Utc);
                    let _ = instant_to_epoch_ms(&p.requested_time, InstantZone::Local);
                }
            }
            let _ = instant_to_epoch_ms(n, InstantZone::Utc);
            if let Ok(path) = RelPath::parse(&format!(".hoodie/{n}")) {
                if path.parent().as_str() == ".hoodie" {
                    files.push(FileMeta {
                        path,
                        size: 0,
                        last_modified: Utc.timestamp_millis_opt(1_737_864_503_628).unwrap(),
                    });
                }
            }
        }
        for l in [TimelineLayout::V1, TimelineLayout::V2] {
            let looking = files
                .iter()
                .filter(|f| looks_like_timeline_file(f.file_name()))
                .count();
            let t = Timeline::from_files(files.clone(), l, InstantZone::Utc);
            let kept: usize = t.instants().iter().map(|i| i.files.len()).sum();
            assert_eq!(kept + t.malformed().len(), looking, "{names:?} in {l:?}");
            let _ = t.max_time();
            let _ = t.last_completed();
        }
    }

    proptest! {
        #![proptest_config(fuzz::config(1024))]

        #[test]
        fn fuzz_timeline_listings(names in names()) {
            check(&names);
        }
    }
}
