//! `hudi-keeper health`: ask a running daemon's `/healthz` (for container health checks, where
//! no HTTP client may be installed).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Args;

#[derive(Debug, Args)]
pub struct HealthArgs {
    /// The daemon's listen address.
    #[arg(long, default_value = "127.0.0.1:9464")]
    pub addr: SocketAddr,
    /// Give up after this long.
    #[arg(long, value_parser = super::parse_duration, default_value = "3s")]
    pub timeout: Duration,
    /// Ask `/readyz` instead of `/healthz`.
    #[arg(long)]
    pub ready: bool,
}

pub fn run(args: HealthArgs) -> anyhow::Result<ExitCode> {
    let path = if args.ready { "/readyz" } else { "/healthz" };
    let mut s = TcpStream::connect_timeout(&args.addr, args.timeout)
        .with_context(|| format!("cannot connect to {}", args.addr))?;
    s.set_read_timeout(Some(args.timeout))?;
    s.set_write_timeout(Some(args.timeout))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        args.addr
    )?;
    let mut reply = String::new();
    if let Err(e) = s.read_to_string(&mut reply) {
        // A read past `--timeout` is WouldBlock on Unix ("Resource temporarily unavailable").
        if matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ) {
            bail!(
                "no answer from {} within {:?} (--timeout)",
                args.addr,
                args.timeout
            );
        }
        return Err(e).with_context(|| format!("no answer from {}", args.addr));
    }
    let status = reply.split_whitespace().nth(1).unwrap_or_default();
    if status != "200" {
        bail!(
            "{path} answered {}",
            reply.lines().next().unwrap_or("nothing")
        );
    }
    println!("ok");
    Ok(ExitCode::SUCCESS)
}
