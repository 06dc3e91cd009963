//! Ctrl-C (SIGINT) and SIGTERM while a command changes a table.
//!
//! The first signal asks the run to stop at its next safe point (between storage calls, where
//! the table is resumable): it releases its lock through the normal path and the command exits
//! with 128 + the signal number (130 for SIGINT, 143 for SIGTERM), naming the command that
//! resumes it. A second signal abandons the storage request in flight (as safe as a crash: the
//! executors resume from any storage call) and releases the lock at once. A third exits
//! immediately, leaving the lock to its expiry (a file-system lock without one stays until
//! deleted).
//!
//! The handlers are installed only once the table is about to change (after the confirmation
//! prompt): before that, a signal ends the process as usual, with nothing changed.

use std::future::Future;
use std::process::ExitCode;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hudi_keeper_core::protocol::lock::release_dropped_locks;
use tokio_util::sync::CancellationToken;

/// How long an abandoned run's lock release may take before the command exits anyway.
const RELEASE_BOUND: Duration = Duration::from_secs(30);

/// The signals received while a command changes a table.
#[derive(Debug, Clone)]
pub(crate) struct Interrupt {
    /// Stop at the next safe point.
    stop: CancellationToken,
    /// Abandon the storage request in flight.
    abandon: CancellationToken,
    /// The first signal's number.
    signal: Arc<AtomicI32>,
}

/// How an interrupted run ended.
#[derive(Debug)]
pub(crate) enum Outcome<T> {
    /// It ended by itself (finished, failed, or stopped at a safe point).
    Ended(T),
    /// A second signal abandoned it mid-request.
    Abandoned,
}

impl Interrupt {
    /// Catch SIGINT and SIGTERM from now on.
    pub(crate) fn install() -> Self {
        let me = Self {
            stop: CancellationToken::new(),
            abandon: CancellationToken::new(),
            signal: Arc::new(AtomicI32::new(0)),
        };
        let handler = me.clone();
        let mut signals = Signals::new();
        tokio::spawn(async move {
            let mut count = 0;
            while let Some(signal) = signals.next().await {
                count += 1;
                match count {
                    1 => {
                        handler.signal.store(signal, Ordering::SeqCst);
                        eprintln!(
                            "\n{}: stopping at the next safe point and releasing the table lock (again to abandon the request in flight and release the lock now)",
                            name(signal)
                        );
                        handler.stop.cancel();
                    }
                    2 => {
                        eprintln!(
                            "\n{}: abandoning the request in flight and releasing the table lock (once more to exit at once, leaving the lock behind)",
                            name(signal)
                        );
                        handler.abandon.cancel();
                    }
                    _ => {
                        eprintln!("\n{}: exiting now; the table lock may be left behind (a lease lapses by itself; a file-system lock file stays until an operator deletes it)", name(signal));
                        std::process::exit(128 + handler.first());
                    }
                }
            }
        });
        me
    }

    /// The token to stop the work at its next safe point.
    pub(crate) fn token(&self) -> CancellationToken {
        self.stop.clone()
    }

    fn first(&self) -> i32 {
        match self.signal.load(Ordering::SeqCst) {
            0 => 2,
            s => s,
        }
    }

    /// The exit code after a signal: 128 + its number (130 for SIGINT, 143 for SIGTERM).
    pub(crate) fn exit_code(&self) -> ExitCode {
        ExitCode::from(u8::try_from(128 + self.first()).unwrap_or(130))
    }

    /// Run `work` until it ends or a second signal abandons it; then wait (bounded) for the
    /// locks an abandoned run dropped to be released.
    pub(crate) async fn run<T>(&self, work: impl Future<Output = T>) -> Outcome<T> {
        let outcome = tokio::select! {
            r = work => Outcome::Ended(r),
            _ = self.abandon.cancelled() => Outcome::Abandoned,
        };
        if !release_dropped_locks(RELEASE_BOUND).await {
            eprintln!(
                "the table lock could not be released within {RELEASE_BOUND:?}; it is left behind"
            );
        }
        outcome
    }
}

fn name(signal: i32) -> &'static str {
    match signal {
        15 => "SIGTERM",
        _ => "SIGINT",
    }
}

/// SIGINT (2) and SIGTERM (15), caught from creation on.
struct Signals {
    #[cfg(unix)]
    int: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    fn new() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Self {
                int: signal(SignalKind::interrupt()).ok(),
                term: signal(SignalKind::terminate()).ok(),
            }
        }
        #[cfg(not(unix))]
        {
            Self {}
        }
    }

    /// The next signal's number; `None` when none can come any more.
    async fn next(&mut self) -> Option<i32> {
        #[cfg(unix)]
        {
            async fn recv(s: &mut Option<tokio::signal::unix::Signal>) -> Option<()> {
                match s {
                    Some(s) => s.recv().await,
                    None => std::future::pending().await,
                }
            }
            if self.int.is_none() && self.term.is_none() {
                return None;
            }
            tokio::select! {
                v = recv(&mut self.int) => v.map(|()| 2),
                v = recv(&mut self.term) => v.map(|()| 15),
            }
        }
        #[cfg(not(unix))]
        {
            tokio::signal::ctrl_c().await.ok().map(|()| 2)
        }
    }
}
