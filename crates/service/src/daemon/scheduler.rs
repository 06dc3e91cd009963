//! The scheduler: one timer heap for every table. A table that comes due is polled on a task
//! of its own once a poll slot is free, then put back with its next delay.

use std::sync::Arc;
use std::time::Duration;

use tracing::{info, info_span, Instrument};

use super::activity::idle_delay;
use super::{Daemon, TableState};

/// A table due at a time, with the generation it was scheduled under.
pub(super) type Due = (tokio::time::Instant, u64, Arc<TableState>);

/// An entry of a timer heap (the polls', the audits'), ordered by due time.
pub(super) struct HeapEntry {
    pub(super) due: tokio::time::Instant,
    pub(super) generation: u64,
    pub(super) state: Arc<TableState>,
}

impl PartialEq for HeapEntry {
    fn eq(&self, other: &Self) -> bool {
        self.due == other.due
    }
}
impl Eq for HeapEntry {}
impl PartialOrd for HeapEntry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for HeapEntry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.due.cmp(&other.due)
    }
}

/// One timer heap (the polls', the audits'): tables come in on `incoming` with their due time;
/// each one due goes to `dispatch`, in order of due time, which may wait (for a slot) while the
/// others stay in the heap. Until `shutdown`, or `incoming` closes.
pub(super) async fn run_timer_heap<F, Fut>(
    shutdown: tokio_util::sync::CancellationToken,
    mut incoming: tokio::sync::mpsc::UnboundedReceiver<Due>,
    mut dispatch: F,
) where
    F: FnMut(Arc<TableState>, u64) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    use std::cmp::Reverse;
    let mut heap: std::collections::BinaryHeap<Reverse<HeapEntry>> =
        std::collections::BinaryHeap::new();
    loop {
        let next = heap.peek().map(|Reverse(e)| e.due);
        tokio::select! {
            _ = shutdown.cancelled() => return,
            msg = incoming.recv() => match msg {
                Some((due, generation, state)) => heap.push(Reverse(HeapEntry { due, generation, state })),
                None => return,
            },
            _ = async {
                match next {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending().await,
                }
            } => {
                while let Some(Reverse(e)) = heap.peek() {
                    if e.due > tokio::time::Instant::now() {
                        break;
                    }
                    let Some(Reverse(e)) = heap.pop() else { break };
                    dispatch(e.state, e.generation).await;
                }
            }
        }
    }
}

impl Daemon {
    /// Put `state` on the timer heap, `after` from now (replacing any earlier entry of it).
    pub(super) fn schedule(&self, state: &Arc<TableState>, after: Duration) {
        let generation = state
            .generation
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        let due = tokio::time::Instant::now() + after;
        let _ = self.timer.send((due, generation, state.clone()));
    }

    /// The scheduler: one timer heap for every table (a task per table would cost each idle
    /// table a kilobyte or more). A due table is polled on its own task, at most
    /// `server.max_concurrent_polls` at once, so a slow table never holds up the others beyond
    /// that bound; when the poll ends, the table is put back with its next delay (its
    /// `poll_interval` with jitter, its `idle_poll_interval` once idle (`activity`), or a backoff
    /// after a failure).
    pub(super) async fn run_scheduler(
        self: Arc<Self>,
        incoming: tokio::sync::mpsc::UnboundedReceiver<Due>,
    ) {
        let shutdown = self.shutdown.clone();
        run_timer_heap(shutdown, incoming, |state, generation| {
            self.clone().dispatch(state, generation)
        })
        .await;
    }

    /// Whether `state` is still the registration of its table (not unregistered, nor replaced
    /// by a new registration of the same name since it was scheduled).
    pub(super) async fn still_registered(&self, state: &Arc<TableState>) -> bool {
        self.tables
            .read()
            .await
            .get(&state.entry.name)
            .is_some_and(|t| Arc::ptr_eq(t, state))
    }

    /// A table came due: once a poll slot is free, poll it on its own task (or skip it if
    /// halted, unregistered, or rescheduled since). The scheduler waits here for the slot, so
    /// tables due meanwhile stay in its heap.
    pub(super) async fn dispatch(self: Arc<Self>, state: Arc<TableState>, generation: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        if state.generation.load(Relaxed) != generation {
            return;
        }
        let name = state.entry.name.clone();
        if !self.still_registered(&state).await {
            return;
        }
        let interval = Duration::from_millis(state.settings.poll_interval_ms);
        if state.status().halted {
            state.metrics.poll("skipped_halted");
            self.schedule(&state, interval);
            return;
        }
        if !self.cluster().owns(&name) {
            // Another replica polls it (or none, while this one is not registered): this costs
            // a timer entry per interval and no request. A table this replica comes to own is
            // rescheduled at once (`apply_cluster`).
            self.schedule(&state, interval);
            return;
        }
        // The poll slot before the task: a table waiting for one is a heap entry, not a
        // spawned task holding its poll's future (about 3 KiB each), which at a start with
        // 100,000 tables due at once made 400 MB of queued tasks the allocator never gave back.
        let permit = tokio::select! {
            p = self.polls.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => return },
            _ = self.shutdown.cancelled() => return,
        };
        let daemon = self.clone();
        self.tracker.spawn(
            async move {
                // Never wait for the table while holding a poll slot: a change (through the
                // API, up to server.mutation_timeout) holds it, so this poll is skipped as
                // busy, neither a success nor a failure, and the table comes due again.
                let Ok(mut cached) = state.table.try_lock() else {
                    drop(permit);
                    state.metrics.poll("skipped_busy");
                    info!(table = %state.entry.name, "a change holds the table: poll skipped as busy");
                    if state.generation.load(Relaxed) == generation {
                        daemon.schedule(&state, jitter(interval, 0.1));
                    }
                    return;
                };
                // Unregistered or replaced while it waited for a slot (a registration that
                // replaces it holds its mutex until it is gone): never polled once its
                // replacement, with a mutex of its own, may be.
                if !daemon.still_registered(&state).await {
                    return;
                }
                let ok = tokio::select! {
                    ok = daemon.poll(&state, &mut cached, permit) => ok,
                    _ = daemon.abandon.cancelled() => return,
                };
                drop(cached);
                let failures = state.status().consecutive_failures;
                let (delay, idle) = if ok {
                    // Idle tables back off (`activity`): only ever a later poll.
                    match idle_delay(&state.settings, &state.activity) {
                        Some(d) => (d, true),
                        None => (jitter(interval, 0.1), false),
                    }
                } else {
                    let backoff = interval.saturating_mul(2u32.saturating_pow(failures.min(16)));
                    (backoff.min(daemon.config.server.max_backoff.max(interval)), false)
                };
                state.metrics.idle.store(idle, Relaxed);
                // Only if nothing (a resume) rescheduled it meanwhile.
                if state.generation.load(Relaxed) == generation {
                    daemon.schedule(&state, delay);
                }
            }
            .instrument(info_span!("table", table = %name)),
        );
    }
}

/// `base` ± `spread` (a fraction of it), at random.
pub(super) fn jitter(base: Duration, spread: f64) -> Duration {
    let f: f64 = rand::random::<f64>() * 2.0 - 1.0;
    let ms = base.as_millis() as f64 * (1.0 + f * spread.min(1.0));
    Duration::from_millis(ms.max(0.0) as u64)
}
