//! `hudi-keeper serve`: load the config, bind the listeners, and run the daemon
//! ([`crate::daemon::serve`]) until SIGINT or SIGTERM.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use tracing::{info, warn};

use crate::daemon::config::{self, Config};
use crate::daemon::{serve, shutdown_signal, Listeners};

/// `hudi-keeper serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The config file (TOML). Without this flag, `config/hudi-keeper.toml` is read when it
    /// exists; environment variables `HUDI_KEEPER_SERVER__…` / `HUDI_KEEPER_DEFAULTS__…` /
    /// `HUDI_KEEPER_CLUSTER__…` override it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Listen here instead of `server.listen`.
    #[arg(long)]
    pub listen: Option<std::net::SocketAddr>,
}

/// `hudi-keeper serve`.
pub async fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    // Before anything listens: SIGTERM from here on is a shutdown.
    let shutdown = shutdown_signal();
    let mut config = match &args.config {
        Some(p) => Config::load(p, true)?,
        None if Path::new(config::DEFAULT_PATH).exists() => {
            Config::load(Path::new(config::DEFAULT_PATH), false)?
        }
        None => {
            let home = demo_home()?;
            info!(
                home = %home.display(),
                "no --config and no {} here: running the embedded demo configuration, its state and demo table under {}",
                config::DEFAULT_PATH,
                home.display()
            );
            Config::load_embedded(&home)?
        }
    };
    if let Some(listen) = args.listen {
        config.server.listen = listen;
    }
    if config.server.auth_token.is_none() {
        warn!("server.auth_token is not set: the mutating API endpoints are off");
    }
    let listeners = bind(&config).await?;
    for entry in config.tables.iter().filter(|e| e.demo) {
        ensure_demo_table(&entry.uri)?;
    }
    serve(config, listeners, shutdown).await?;
    Ok(ExitCode::SUCCESS)
}

/// Bind `server.listen` and `server.probe_listen`, before anything else starts, so that a port
/// in use fails the start.
async fn bind(config: &Config) -> anyhow::Result<Listeners> {
    let api = tokio::net::TcpListener::bind(config.server.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.server.listen))?;
    let probes = match config.server.probe_listen {
        Some(addr) => Some(
            tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr} (server.probe_listen)"))?,
        ),
        None => None,
    };
    Ok(Listeners { api, probes })
}

/// Make the demo table if its folder is missing (a local path only).
fn ensure_demo_table(uri: &str) -> anyhow::Result<()> {
    let path = Path::new(uri.strip_prefix("file://").unwrap_or(uri));
    if uri.contains("://") && !uri.starts_with("file://") {
        anyhow::bail!("demo = true needs a local path, not `{uri}`");
    }
    if path.join(".hoodie/hoodie.properties").exists() {
        return Ok(());
    }
    let failed = super::demo::make_demo_table(path)?;
    info!(path = %path.display(), failed_instant = %failed, "made the demo table with a failed write");
    Ok(())
}

/// Where the embedded demo configuration keeps its state and demo table:
/// `$XDG_DATA_HOME/hudi-keeper`, else `$HOME/.local/share/hudi-keeper`.
fn demo_home() -> anyhow::Result<PathBuf> {
    let non_empty = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(data) = non_empty("XDG_DATA_HOME") {
        return Ok(data.join("hudi-keeper"));
    }
    match non_empty("HOME") {
        Some(home) => Ok(home.join(".local/share/hudi-keeper")),
        None => anyhow::bail!(
            "no --config, no {} here, and neither XDG_DATA_HOME nor HOME is set to keep the embedded demo's data in: pass --config",
            config::DEFAULT_PATH
        ),
    }
}
