//! `hudi-keeper demo`: make a small table with a failed write in a local folder, then show a
//! newcomer what `inspect` sees and what `rollback` does.
//!
//! The demo table is made by hand in Hudi's layout (table version 8, merge-on-read): it is for
//! looking at, not for Hudi's readers (its data files are not Parquet).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context};
use chrono::{TimeZone, Utc};
use clap::Args;
use hudi_keeper_core::exec::rollback::{rollback, RollbackOptions, Selection};
use hudi_keeper_core::inspect::{inspect, InspectOptions};
use hudi_keeper_core::protocol::detect::FailedWritesPolicy;
use hudi_keeper_core::protocol::heartbeat::HeartbeatPolicy;
use hudi_keeper_core::storage::StorageOptions;
use hudi_keeper_core::timeline::{format_instant, InstantZone};
use hudi_keeper_core::Table;

/// The file that marks a folder as a demo table (so `demo` only ever replaces its own).
const DEMO_MARK: &str = ".hudi-keeper-demo";

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Where to make the demo table (replaced if it is an earlier demo table).
    #[arg(long, default_value = "demo-data/demo-table")]
    pub dir: PathBuf,
    /// Only make the table; do not roll it back.
    #[arg(long)]
    pub no_rollback: bool,
}

fn write(root: &Path, rel: &str, bytes: &[u8]) -> anyhow::Result<()> {
    let p = root.join(rel);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    std::fs::write(&p, bytes).with_context(|| format!("cannot write {}", p.display()))
}

/// Make the demo table: two completed deltacommits, then one whose writer died ten minutes ago.
pub fn make_demo_table(root: &Path) -> anyhow::Result<String> {
    if root.exists() {
        if !root.join(DEMO_MARK).exists() {
            bail!(
                "{} exists and is not a hudi-keeper demo table; pass another --dir",
                root.display()
            );
        }
        std::fs::remove_dir_all(root)
            .with_context(|| format!("cannot replace {}", root.display()))?;
    }
    let now = Utc::now().timestamp_millis();
    let at = |ms_ago: i64| {
        format_instant(
            Utc.timestamp_millis_opt(now - ms_ago)
                .single()
                .unwrap_or_else(Utc::now),
            InstantZone::Utc,
        )
    };
    let (t1, c1) = (at(3_600_000), at(3_598_000));
    let (t2, c2) = (at(1_800_000), at(1_798_000));
    let failed = at(900_000);
    write(root, DEMO_MARK, b"made by `hudi-keeper demo`\n")?;
    write(
        root,
        ".hoodie/hoodie.properties",
        b"hoodie.table.name=demo\nhoodie.table.type=MERGE_ON_READ\nhoodie.table.version=8\nhoodie.timeline.layout.version=2\nhoodie.table.timeline.timezone=UTC\nhoodie.table.base.file.format=PARQUET\n",
    )?;
    for (t, c) in [(&t1, &c1), (&t2, &c2)] {
        write(
            root,
            &format!(".hoodie/timeline/{t}.deltacommit.requested"),
            b"",
        )?;
        write(
            root,
            &format!(".hoodie/timeline/{t}.deltacommit.inflight"),
            b"",
        )?;
        write(root, &format!(".hoodie/timeline/{t}_{c}.deltacommit"), b"")?;
    }
    for p in ["city=amsterdam", "city=lisbon"] {
        write(
            root,
            &format!("{p}/.hoodie_partition_metadata"),
            b"commitTime=0\npartitionDepth=1\n",
        )?;
        write(
            root,
            &format!("{p}/{p}-fg-0_0-1-0_{t1}.parquet"),
            b"demo base file",
        )?;
        write(
            root,
            &format!("{p}/.{p}-fg-0_{t2}.log.1_0-2-0"),
            b"demo log file",
        )?;
    }
    // The failed write: timeline files, data files, markers, and a heartbeat that stopped.
    write(
        root,
        &format!(".hoodie/timeline/{failed}.deltacommit.requested"),
        b"",
    )?;
    write(
        root,
        &format!(".hoodie/timeline/{failed}.deltacommit.inflight"),
        b"",
    )?;
    for p in ["city=amsterdam", "city=lisbon"] {
        let log = format!(".{p}-fg-0_{failed}.log.1_0-3-0");
        write(root, &format!("{p}/{log}"), b"half-written log file")?;
        write(
            root,
            &format!(".hoodie/.temp/{failed}/{p}/{log}.marker.CREATE"),
            b"",
        )?;
    }
    let new_base = format!("city=porto/city=porto-fg-0_0-3-1_{failed}.parquet");
    write(root, &new_base, b"half-written base file")?;
    write(
        root,
        &format!(".hoodie/.temp/{failed}/{new_base}.marker.CREATE"),
        b"",
    )?;
    let heartbeat = root.join(format!(".hoodie/.heartbeat/{failed}"));
    write(root, &format!(".hoodie/.heartbeat/{failed}"), b"")?;
    let stopped = SystemTime::now() - Duration::from_secs(600);
    std::fs::File::options()
        .write(true)
        .open(&heartbeat)
        .and_then(|f| f.set_modified(stopped))
        .with_context(|| format!("cannot age {}", heartbeat.display()))?;
    Ok(failed)
}

pub async fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let failed = make_demo_table(&args.dir)?;
    let uri = std::fs::canonicalize(&args.dir)?
        .to_str()
        .context("the demo path is not UTF-8")?
        .to_string();
    println!("Made a demo Hudi table at {uri}: two completed deltacommits and one failed write ({failed}) whose writer stopped beating 10 minutes ago.\n");
    let table = Table::open(&uri, &StorageOptions::default()).await?;
    let heartbeat = HeartbeatPolicy {
        interval: Duration::from_secs(60),
        tolerable_misses: 2,
        min_instant_age: Duration::from_secs(600),
        clock_skew_margin: Duration::from_secs(5),
    };
    let options = InspectOptions {
        policy: FailedWritesPolicy::Lazy,
        heartbeat,
        now_ms: Utc::now().timestamp_millis(),
        lazy_writers: None,
        max_write_duration: None,
        clustering_expiration: None,
    };
    println!("$ hudi-keeper inspect {uri}");
    print!(
        "{}",
        super::inspect::render(&inspect(&table, &options).await?)
    );
    if args.no_rollback {
        println!("\nNext: hudi-keeper rollback {uri} --dry-run");
        println!("Then: hudi-keeper rollback {uri} --lock none --yes");
        return Ok(ExitCode::SUCCESS);
    }
    // No writer runs on the demo table, so it needs no lock; a real table needs its writers'.
    println!("\n$ hudi-keeper rollback {uri} --lock none --yes");
    let done = rollback(
        &table,
        &Selection::AllFailed,
        &RollbackOptions {
            heartbeat,
            ..RollbackOptions::default()
        },
        None,
    )
    .await?;
    for d in &done {
        println!(
            "rolled back {} with rollback {}: {} files deleted",
            d.instant, d.rollback_instant, d.files_deleted
        );
    }
    let options = InspectOptions {
        now_ms: Utc::now().timestamp_millis(),
        ..options
    };
    println!("\n$ hudi-keeper inspect {uri}");
    print!(
        "{}",
        super::inspect::render(&inspect(&table, &options).await?)
    );
    Ok(ExitCode::SUCCESS)
}
