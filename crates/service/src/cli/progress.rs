//! Progress of a rollback's or a restore's deletes on stderr, through `indicatif`: one bar per
//! rolled-back instant with files done of total, rate and ETA. Drawn only for text output to a
//! terminal; otherwise nothing is shown until the final summary.

use std::io::IsTerminal;
use std::sync::Mutex;

use hudi_keeper_core::exec::rollback::Progress;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

const TEMPLATE: &str = "{prefix} [{wide_bar}] {pos}/{len} files, {per_sec:0}, ETA {eta}";

/// Whether bars are drawn: text output (not `--json`) and stderr a terminal.
pub(super) fn shown(json: bool, stderr_is_terminal: bool) -> bool {
    !json && stderr_is_terminal
}

/// The bars of one command; the current instant's bar is left as it stands when the next
/// instant starts or this is dropped (a run cut off by an error shows how far it got).
pub(super) struct Bars {
    target: Box<dyn Fn() -> ProgressDrawTarget + Send + Sync>,
    current: Mutex<Option<ProgressBar>>,
}

impl Bars {
    /// Bars on stderr when [`shown`]; `None` (nothing until the summary) otherwise.
    pub(super) fn for_stderr(json: bool) -> Option<Bars> {
        Self::choose(
            json,
            std::io::stderr().is_terminal(),
            ProgressDrawTarget::stderr,
        )
    }

    fn choose(
        json: bool,
        stderr_is_terminal: bool,
        target: impl Fn() -> ProgressDrawTarget + Send + Sync + 'static,
    ) -> Option<Bars> {
        shown(json, stderr_is_terminal).then(|| Bars {
            target: Box::new(target),
            current: Mutex::new(None),
        })
    }

    /// As the core's progress sink.
    pub(super) fn sink(bars: &Option<Bars>) -> Option<&dyn Progress> {
        bars.as_ref().map(|b| b as &dyn Progress)
    }
}

impl Progress for Bars {
    fn start(&self, instant: &str, total: usize) {
        let bar = ProgressBar::with_draw_target(Some(total as u64), (self.target)());
        if let Ok(style) = ProgressStyle::with_template(TEMPLATE) {
            bar.set_style(style.progress_chars("#>-"));
        }
        bar.set_prefix(format!("rolling back {instant}"));
        let Ok(mut current) = self.current.lock() else {
            return;
        };
        if let Some(previous) = current.replace(bar.clone()) {
            leave(&previous);
        }
        bar.tick();
        if total == 0 {
            bar.finish();
        }
    }

    fn deleted(&self) {
        if let Ok(current) = self.current.lock() {
            if let Some(bar) = current.as_ref() {
                bar.inc(1);
                // Done with the last delete: the rate is that of the deletes alone.
                if bar.length() == Some(bar.position()) {
                    bar.finish();
                }
            }
        }
    }
}

/// Leave `bar` on screen as it stands: abandoned, not finished, which would show it full.
fn leave(bar: &ProgressBar) {
    if !bar.is_finished() {
        bar.abandon();
    }
}

impl Drop for Bars {
    fn drop(&mut self) {
        if let Ok(mut current) = self.current.lock() {
            if let Some(bar) = current.take() {
                leave(&bar);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A terminal that keeps what is written to it.
    #[derive(Debug, Clone, Default)]
    struct Screen(Arc<Mutex<String>>);

    impl Screen {
        fn text(&self) -> String {
            self.0.lock().unwrap().clone()
        }
        fn push(&self, s: &str) {
            self.0.lock().unwrap().push_str(s);
        }
    }

    impl indicatif::TermLike for Screen {
        fn width(&self) -> u16 {
            120
        }
        fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn write_line(&self, s: &str) -> std::io::Result<()> {
            self.push(s);
            self.push("\n");
            Ok(())
        }
        fn write_str(&self, s: &str) -> std::io::Result<()> {
            self.push(s);
            Ok(())
        }
        fn clear_line(&self) -> std::io::Result<()> {
            self.push("\r");
            Ok(())
        }
        fn flush(&self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// The screens of the bars drawn so far, one per bar.
    #[derive(Clone, Default)]
    struct Screens(Arc<Mutex<Vec<Screen>>>);

    impl Screens {
        /// What each bar shows last: the text after its last carriage return.
        fn last_states(&self) -> Vec<String> {
            self.0
                .lock()
                .unwrap()
                .iter()
                .map(|s| {
                    let text = s.text();
                    text.rsplit('\r')
                        .next()
                        .unwrap_or_default()
                        .trim_end()
                        .to_string()
                })
                .collect()
        }
    }

    fn on(screens: &Screens, json: bool, terminal: bool) -> Option<Bars> {
        let screens = screens.clone();
        Bars::choose(json, terminal, move || {
            let screen = Screen::default();
            screens.0.lock().unwrap().push(screen.clone());
            ProgressDrawTarget::term_like(Box::new(screen))
        })
    }

    #[test]
    fn bars_are_drawn_only_for_text_output_to_a_terminal() {
        assert!(shown(false, true));
        assert!(!shown(false, false), "stderr not a terminal");
        assert!(!shown(true, true), "--json");
        assert!(!shown(true, false));
        let screens = Screens::default();
        assert!(on(&screens, false, false).is_none());
        assert!(on(&screens, true, true).is_none());
        assert!(Bars::sink(&on(&screens, true, true)).is_none());
        assert!(Bars::sink(&on(&screens, false, true)).is_some());
    }

    #[test]
    fn a_terminal_shows_files_done_of_total_with_rate_and_eta() {
        let screens = Screens::default();
        let bars = on(&screens, false, true);
        let p = Bars::sink(&bars).unwrap();
        p.start("20200102000000000", 3);
        for _ in 0..3 {
            p.deleted();
        }
        drop(bars);
        let states = screens.last_states();
        assert_eq!(states.len(), 1, "{states:?}");
        let line = &states[0];
        assert!(
            line.starts_with("rolling back 20200102000000000 ["),
            "{line}"
        );
        assert!(line.contains("] 3/3 files, "), "{line}");
        assert!(line.contains("/s, ETA "), "{line}");
    }

    #[test]
    fn each_instant_gets_its_own_bar_and_a_cut_off_one_shows_how_far_it_got() {
        let screens = Screens::default();
        let bars = on(&screens, false, true);
        let p = Bars::sink(&bars).unwrap();
        p.start("20200101000000000", 2);
        p.deleted();
        p.deleted();
        p.start("20200102000000000", 4);
        p.deleted();
        // An error ends the run here.
        drop(bars);
        let states = screens.last_states();
        assert_eq!(states.len(), 2, "{states:?}");
        assert!(states[0].starts_with("rolling back 20200101000000000"));
        assert!(states[0].contains(" 2/2 files"), "{}", states[0]);
        assert!(states[1].starts_with("rolling back 20200102000000000"));
        assert!(states[1].contains(" 1/4 files"), "{}", states[1]);
    }

    #[test]
    fn nothing_is_drawn_before_an_instant_starts() {
        let screens = Screens::default();
        let bars = on(&screens, false, true);
        Bars::sink(&bars).unwrap().deleted();
        drop(bars);
        assert!(screens.last_states().is_empty());
    }
}
