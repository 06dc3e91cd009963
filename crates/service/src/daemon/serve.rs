//! Running the daemon in a process: [`serve`] takes a loaded config, the listeners its caller
//! bound, and a future whose end stops it (a test's cancellation token, or the binary's
//! [`shutdown_signal`]: SIGINT or SIGTERM); the binary's `serve` command binds the listeners.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tracing::{error, info, warn};

use super::config::Config;
use super::error::StartError;
use super::{http, own_changes, Daemon};

/// The listeners [`serve`] answers on, bound before anything else starts (so that a port in
/// use fails the start).
#[derive(Debug)]
pub struct Listeners {
    /// The API, health and metrics (`server.listen`).
    pub api: TcpListener,
    /// The probes and metrics only (`server.probe_listen`), when configured.
    pub probes: Option<TcpListener>,
}

/// Serve `config`'s tables on `listeners` until `shutdown` ends (it is awaited only once the
/// daemon serves, so a signal handler it installs is installed then): lock the state folder,
/// build and start the daemon, serve the API (and the probes), then at shutdown stop new polls,
/// give running work `server.shutdown_grace`, release the locks of abandoned work, and return.
/// An error is a start that failed; once serving, it ends without one.
pub async fn serve(
    config: Config,
    listeners: Listeners,
    shutdown: impl Future<Output = ()>,
) -> Result<(), StartError> {
    let Listeners { api, probes } = listeners;
    let local = api.local_addr()?;
    let probe_local = probes.as_ref().map(|l| l.local_addr()).transpose()?;
    let grace = config.server.shutdown_grace;
    // Held until the process ends (the descriptor is never closed: work abandoned at shutdown
    // may still write to state_dir while the runtime winds down, after this function returns):
    // the changes recorded in state_dir/own-changes are this process's or an earlier one's that
    // is gone, so they are resumed at once.
    std::mem::forget(
        own_changes::lock_state_dir(&config.server.state_dir).map_err(StartError::StateDir)?,
    );
    let daemon = Daemon::new(config)?;
    daemon.start().await?;
    // Parsing a config of thousands of tables leaves megabytes of freed memory the allocator
    // would otherwise keep; hand it back once the registry is built.
    release_free_memory();
    trim_memory_now_and_then(&daemon);
    announce(&daemon, local, probe_local).await;
    let server = spawn_servers(&daemon, api, probes);
    shutdown.await;
    stop(&daemon, grace, server).await;
    Ok(())
}

/// Release free memory every 2 s while the first round of polls runs (each poll opens a
/// table's handle and frees its reads: without it, the freed pages would pile up until the
/// first trim, and the peak with them: 379 MiB against 288 after the trim at 100,000 tables),
/// then every minute: long-lived handles among short-lived poll buffers fragment the heap.
fn trim_memory_now_and_then(daemon: &Arc<Daemon>) {
    let d = daemon.clone();
    daemon.tracker.spawn(async move {
        let started = tokio::time::Instant::now();
        let mut first_round = true;
        loop {
            let wait = if first_round {
                Duration::from_secs(2)
            } else {
                Duration::from_secs(60)
            };
            tokio::select! {
                _ = tokio::time::sleep(wait) => release_free_memory(),
                _ = d.shutdown.cancelled() => return,
            }
            if first_round {
                first_round =
                    started.elapsed() < FIRST_ROUND_AT_MOST && d.some_table_not_polled_yet().await;
            }
        }
    });
}

/// How long the frequent trims of the first round of polls may go on at most.
const FIRST_ROUND_AT_MOST: Duration = Duration::from_secs(600);

/// Say where the daemon serves (log and stderr).
async fn announce(daemon: &Daemon, local: SocketAddr, probe_local: Option<SocketAddr>) {
    // Counted before the log line: the future stays `Send` (a caller may spawn `serve`).
    let tables = daemon.tables().await.len();
    info!(listen = %local, probe_listen = ?probe_local, tables, "hudi-keeper serving");
    eprintln!("hudi-keeper serving on http://{local}");
    if let Some(p) = probe_local {
        eprintln!("hudi-keeper probes on http://{p}");
    }
}

/// Serve the API on `api` and the probes on `probes`, until the daemon's shutdown; the API
/// server's task is returned.
fn spawn_servers(
    daemon: &Arc<Daemon>,
    api: TcpListener,
    probes: Option<TcpListener>,
) -> JoinHandle<Result<(), std::io::Error>> {
    let app = http::router(daemon.clone());
    let shutdown = daemon.shutdown.clone();
    let limits = http::ConnectionLimits::api(&daemon.config.server);
    let server = tokio::spawn(async move {
        http::serve(api, app, limits, shutdown).await;
        Ok::<(), std::io::Error>(())
    });
    if let Some(listener) = probes {
        let app = http::probe_router(daemon.clone());
        let shutdown = daemon.shutdown.clone();
        tokio::spawn(http::serve(
            listener,
            app,
            http::ConnectionLimits::probes(),
            shutdown,
        ));
    }
    server
}

/// Shut the daemon down: no new polls; running changes stop at their next safe point and
/// release their locks; polls' reads end. Whatever still runs after `grace` (a store that
/// hangs) is dropped, and the locks it held are released in the background.
async fn stop(daemon: &Daemon, grace: Duration, server: JoinHandle<Result<(), std::io::Error>>) {
    info!("shutting down: no new polls; running changes stop at their next safe point");
    daemon.shutdown.cancel();
    daemon.tracker.close();
    if tokio::time::timeout(grace, daemon.tracker.wait())
        .await
        .is_err()
    {
        warn!(grace_s = grace.as_secs(), "work still running after server.shutdown_grace is abandoned; its locks are released in the background, and a change cut short resumes like a crashed one");
        daemon.abandon.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(5), daemon.tracker.wait()).await;
    }
    if !hudi_keeper_core::protocol::lock::release_dropped_locks(Duration::from_secs(10)).await {
        error!("a table lock of abandoned work could not be released within 10 s; it is left behind (a lease lapses by itself, a file-system lock file stays until deleted)");
    }
    match tokio::time::timeout(Duration::from_secs(5), server).await {
        Ok(Ok(Ok(()))) | Err(_) => {}
        Ok(Ok(Err(e))) => warn!(error = %e, "HTTP server ended with an error"),
        Ok(Err(e)) => warn!(error = %e, "HTTP server task failed"),
    }
    info!("stopped");
}

/// Let glibc's allocator keep at most two arenas, before any thread but the main one runs.
/// By default each thread that allocates may get one of its own (up to eight per core): the
/// runtime's workers and blocking threads (every local file-system call runs on one) then each
/// keep the pages a poll freed, and the freed pages of the config's parse in the main arena are
/// not reused by the polls that open 100,000 table handles on other threads. Two arenas on the
/// daemon's small allocations cost no measurable contention (BENCHMARKS.md, the daemon with
/// many idle tables). `MALLOC_ARENA_MAX` in the environment still overrides it.
pub fn limit_allocator_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        extern "C" {
            fn mallopt(
                param: std::os::raw::c_int,
                value: std::os::raw::c_int,
            ) -> std::os::raw::c_int;
        }
        /// glibc's `M_ARENA_MAX` (malloc.h).
        const M_ARENA_MAX: std::os::raw::c_int = -8;
        if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
            // SAFETY: mallopt only changes the allocator's tuning; it takes no pointer, and is
            // called before the runtime starts other threads.
            unsafe {
                mallopt(M_ARENA_MAX, 2);
            }
        }
    }
}

/// Return freed heap pages to the OS (glibc keeps them otherwise).
pub(super) fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        extern "C" {
            fn malloc_trim(pad: usize) -> std::os::raw::c_int;
        }
        // SAFETY: malloc_trim only releases free memory of the allocator's own arenas; it takes
        // no pointer and is safe to call at any time from any thread.
        unsafe {
            malloc_trim(0);
        }
    }
}

/// A future that completes on SIGINT (Ctrl-C) or, on Unix, SIGTERM. The handlers are installed
/// when this is called, not when the future is first polled: called before the daemon binds its
/// listeners, a signal sent as soon as it answers (a readiness probe passed, then SIGTERM) is
/// always its shutdown, never the default action that kills the process.
pub fn shutdown_signal() -> impl Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let interrupt = signal(SignalKind::interrupt()).ok();
        let terminate = signal(SignalKind::terminate()).ok();
        async move {
            let wait = |s: Option<tokio::signal::unix::Signal>| async move {
                match s {
                    Some(mut s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                _ = wait(interrupt) => {}
                _ = wait(terminate) => {}
            }
        }
    }
    #[cfg(not(unix))]
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// `GET path` on `addr`, the response as text (the connection is closed after it).
    async fn get(addr: SocketAddr, path: &str) -> String {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        let req = format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    }

    /// A SIGTERM that comes after `shutdown_signal()` was called, before its future was first
    /// polled (the daemon answered a probe, then was told to stop), ends the wait: it does not
    /// take the default action, which kills the process with no shutdown at all.
    #[cfg(unix)]
    #[tokio::test]
    async fn a_sigterm_before_the_first_poll_is_a_shutdown() {
        let shutdown = shutdown_signal();
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &std::process::id().to_string()])
            .status()
            .expect("kill");
        assert!(sent.success());
        tokio::time::timeout(Duration::from_secs(10), shutdown)
            .await
            .expect("the SIGTERM ends the wait");
    }

    #[tokio::test]
    async fn serve_runs_in_process_on_the_listeners_it_is_given_until_shutdown() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::default();
        config.server.state_dir = dir.path().join("state");
        let api = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let probes = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (api_addr, probe_addr) = (api.local_addr().unwrap(), probes.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let running = tokio::spawn(serve(
            config,
            Listeners {
                api,
                probes: Some(probes),
            },
            async {
                let _ = stopped.await;
            },
        ));
        let health = get(api_addr, "/healthz").await;
        assert!(health.starts_with("HTTP/1.1 200"), "{health}");
        let tables = get(api_addr, "/api/v1/tables").await;
        assert!(tables.contains("\"total\":0"), "{tables}");
        let probe = get(probe_addr, "/api/v1/tables").await;
        assert!(probe.starts_with("HTTP/1.1 404"), "{probe}");
        stop.send(()).unwrap();
        running.await.unwrap().unwrap();
    }
}
