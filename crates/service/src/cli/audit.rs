//! `hudi-keeper audit`: every data file of a table classified by the instant that wrote it.

use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use hudi_keeper_core::audit::repair::{repair, RepairOptions, RepairReport};
use hudi_keeper_core::audit::{audit, AuditOptions, AuditReport, Class, Counts};
use hudi_keeper_core::storage::Storage;
use hudi_keeper_core::Table;
use serde::Serialize;

use super::{parse_duration, Counted, LockArgs, TableArgs};

#[derive(Debug, Args)]
pub struct AuditArgs {
    #[command(flatten)]
    pub table: TableArgs,
    /// Print one JSON document instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Example files shown per class (all but `committed`).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u16))]
    pub examples: u16,
    /// Remove the `rollback_leftover` and `orphan` files older than --older-than, under the
    /// table lock (--lock), each classified again under it.
    #[arg(long)]
    pub repair: bool,
    /// With --repair: only files last modified longer ago than this (under 1h is refused).
    #[arg(long, value_parser = parse_duration, default_value = "3d", requires = "repair")]
    pub older_than: std::time::Duration,
    /// With --repair: show what would be removed; change nothing.
    #[arg(long, requires = "repair")]
    pub dry_run: bool,
    /// With --repair: copy each file to this base path (same table-relative path, the same
    /// --storage-option flags) before deleting it.
    #[arg(long, value_name = "URI", requires = "repair")]
    pub quarantine: Option<String>,
    /// With --repair: do not ask.
    #[arg(long, short = 'y', requires = "repair")]
    pub yes: bool,
    #[command(flatten)]
    pub lock: LockArgs,
}

/// The JSON document: the report and the object-store requests it took.
#[derive(Serialize)]
struct Output<'a> {
    #[serde(flatten)]
    report: &'a AuditReport,
    requests: std::collections::BTreeMap<&'static str, u64>,
}

pub async fn run(args: AuditArgs) -> anyhow::Result<ExitCode> {
    let (table, requests) = args.table.open_counted().await?;
    let options = AuditOptions {
        examples: usize::from(args.examples),
        ..AuditOptions::default()
    };
    if args.repair {
        return run_repair(&args, &table, &options, &requests).await;
    }
    let report = audit(&table, &options)
        .await
        .with_context(|| format!("cannot audit table `{}`", table.uri()))?;
    if args.json {
        let out = Output {
            report: &report,
            requests: requests.by_kind(),
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print!("{}", render(&report));
    }
    Ok(ExitCode::SUCCESS)
}

fn counts_line(out: &mut String, label: &str, c: &Counts) {
    let oldest = c
        .oldest_modified
        .map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|| "-".into());
    let _ = writeln!(
        out,
        "  {label:<20} {:>10} {:>16} {oldest}",
        c.files, c.bytes
    );
}

pub fn render(r: &AuditReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Table     {} (version {})", r.table, r.table_version);
    let _ = writeln!(
        out,
        "Active    oldest instant {}",
        r.oldest_active_instant.as_deref().unwrap_or("- (empty)")
    );
    let archive = if r.archive.complete {
        "read whole".to_string()
    } else {
        let why: Vec<String> = r
            .archive
            .unread
            .iter()
            .map(|(p, w)| format!("{p}: {w}"))
            .collect();
        format!(
            "not read whole, so no file is called an orphan ({})",
            why.join("; ")
        )
    };
    let _ = writeln!(
        out,
        "Archive   {} ({archive})",
        r.archive.locations.join(", ")
    );
    for (path, why) in &r.unreadable_metadata {
        let _ = writeln!(out, "Unread    {path}: {why} (no file is called an orphan)");
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "  {:<20} {:>10} {:>16} OLDEST FILE",
        "CLASS", "FILES", "BYTES"
    );
    for c in Class::ALL {
        counts_line(&mut out, c.as_str(), &r.count(c));
    }
    let flagged: Vec<_> = r
        .partitions
        .iter()
        .filter(|(_, by)| by.keys().any(|c| *c != Class::Committed))
        .collect();
    if !flagged.is_empty() {
        let _ = writeln!(out, "\nPartitions with files that are not committed:");
        for (p, by) in flagged {
            let name = if p.is_empty() {
                "(base path)"
            } else {
                p.as_str()
            };
            let _ = writeln!(out, "  {name}");
            for (c, counts) in by.iter().filter(|(c, _)| **c != Class::Committed) {
                counts_line(&mut out, &format!("  {}", c.as_str()), counts);
            }
        }
    }
    for (c, examples) in &r.examples {
        let _ = writeln!(out, "\nExamples, {}:", c.as_str());
        for e in examples {
            let _ = writeln!(out, "  {} ({} bytes): {}", e.path, e.size, e.reason);
        }
    }
    let _ = writeln!(
        out,
        "\n{} data files, {} other files; {} log files opened",
        r.data_files(),
        r.other_files,
        r.logs_opened
    );
    out
}

async fn run_repair(
    args: &AuditArgs,
    table: &Table,
    audit_options: &AuditOptions,
    requests: &Counted,
) -> anyhow::Result<ExitCode> {
    let quarantine = match &args.quarantine {
        Some(uri) => Some(
            Storage::open(uri, &args.table.storage_options())
                .with_context(|| format!("cannot open the quarantine `{uri}`"))?,
        ),
        None => None,
    };
    let mut options = RepairOptions {
        older_than: args.older_than,
        lock: hudi_keeper_core::protocol::lock::LockOptions::none(),
        dry_run: true,
        quarantine,
    };
    // What would go, first: the dry run, and the question (unless --yes).
    let preview = repair(table, &options, audit_options)
        .await
        .with_context(|| format!("cannot audit table `{}`", table.uri()))?;
    if args.dry_run || preview.removed.is_empty() {
        print_repair(args, &preview, requests)?;
        return Ok(ExitCode::SUCCESS);
    }
    options.lock = args.lock.lock_options(table)?;
    options.dry_run = false;
    if !args.yes
        && !super::confirm(
            "repair",
            &render_repair(&preview),
            &format!(
                "Remove {} file(s) from {}?",
                preview.removed.len(),
                table.uri()
            ),
        )?
    {
        return Ok(ExitCode::SUCCESS);
    }
    let resume = |_: Option<&str>| {
        "this command again (it resumes the repair from its journal under .hoodie/.hudi-keeper/repairs/, then audits the table again and goes on with what is left)".to_string()
    };
    let done = match super::change_table(table, resume, |t| async move {
        repair(&t, &options, audit_options).await
    })
    .await?
    {
        Ok(done) => done,
        Err(code) => return Ok(code),
    };
    print_repair(args, &done, requests)?;
    Ok(ExitCode::SUCCESS)
}

fn print_repair(args: &AuditArgs, r: &RepairReport, requests: &Counted) -> anyhow::Result<()> {
    if args.json {
        let doc = serde_json::json!({"repair": r, "requests": requests.by_kind()});
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print!("{}", render(&r.audit));
        print!("{}", render_repair(r));
    }
    Ok(())
}

fn render_repair(r: &RepairReport) -> String {
    let mut out = String::new();
    let verb = if r.dry_run { "Would remove" } else { "Removed" };
    let _ = writeln!(
        out,
        "\n{verb} {} file(s) ({} bytes), older than {} s:",
        r.removed.len(),
        r.removed.iter().map(|x| x.size).sum::<u64>(),
        r.older_than_s
    );
    for x in &r.removed {
        let gone = if x.already_gone {
            ", already removed by the repair that was cut off"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "  {} ({}, {} bytes{gone})",
            x.path,
            x.class.as_str(),
            x.size
        );
    }
    if !r.resumed_journals.is_empty() {
        let verb = if r.dry_run { "Would resume" } else { "Resumed" };
        let _ = writeln!(
            out,
            "{verb} the cut-off repair(s) {} from their journals.",
            r.resumed_journals.join(", ")
        );
    }
    if let Some(j) = &r.journal {
        let _ = writeln!(
            out,
            "Journal: {}/{j}.json",
            hudi_keeper_core::audit::journal::JOURNAL_DIR
        );
    }
    if !r.kept.is_empty() {
        let _ = writeln!(out, "Kept {} file(s):", r.kept.len());
        for k in &r.kept {
            let _ = writeln!(out, "  {} ({}): {}", k.path, k.class.as_str(), k.reason);
        }
    }
    if r.more_to_do {
        let _ = writeln!(
            out,
            "More leftovers and orphans than one run handles: run again."
        );
    }
    if r.dry_run {
        let _ = writeln!(out, "Dry run: nothing was changed.");
    }
    out
}
