//! `hudi-keeper audit`: every data file of a table classified by the instant that wrote it.

use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use hudi_keeper_core::audit::repair::{repair, RepairOptions, RepairReport};
use hudi_keeper_core::audit::repair_metadata_table::{repair_metadata_table, MetadataTableRepair};
use hudi_keeper_core::audit::{
    audit, AuditOptions, AuditReport, Class, Counts, MetadataTableCheck,
};
use hudi_keeper_core::storage::Storage;
use hudi_keeper_core::Table;
use serde::Serialize;

use super::{count, parse_duration, Counted, LockArgs, TableArgs};

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
    /// With --repair: also delete the metadata table when it disagrees with the store (files it
    /// lists that the store lacks, committed files it does not list), for the next writer to
    /// rebuild. Refused while any write is pending on the table.
    #[arg(long, requires = "repair")]
    pub repair_metadata_table: bool,
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
    render_metadata_table(&mut out, &r.metadata_table);
    let _ = writeln!(
        out,
        "\n{} data files, {} other files; {} log files opened",
        r.data_files(),
        r.other_files,
        r.logs_opened
    );
    out
}

fn render_metadata_table(out: &mut String, m: &MetadataTableCheck) {
    let _ = writeln!(out);
    if let Some(why) = &m.not_checked {
        let _ = writeln!(out, "Metadata table: not checked: {why}");
        return;
    }
    let _ = writeln!(
        out,
        "Metadata table: {} files in {} partitions listed; {} listed but missing from the store, {} committed files not listed",
        m.listed_files, m.listed_partitions, m.missing_from_store, m.not_listed
    );
    for (p, d) in &m.partitions {
        let name = if p.is_empty() {
            "(base path)"
        } else {
            p.as_str()
        };
        let _ = writeln!(
            out,
            "  {name}: {} missing from the store, {} not listed",
            d.missing_from_store, d.not_listed
        );
        for e in &d.missing_examples {
            let _ = writeln!(out, "    missing from the store: {e}");
        }
        for e in &d.not_listed_examples {
            let _ = writeln!(out, "    not listed: {e}");
        }
    }
    if m.disagrees() {
        let _ = writeln!(
            out,
            "  (`audit --repair --repair-metadata-table` deletes the metadata table for the next writer to rebuild)"
        );
    }
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
        metadata_table_first: args.repair_metadata_table,
    };
    // What would go, first: the dry run, and the question (unless --yes).
    let preview = repair(table, &options, audit_options)
        .await
        .with_context(|| format!("cannot audit table `{}`", table.uri()))?;
    // The metadata table's part is decided before anything changes: a refusal refuses all.
    let mdt_preview = if args.repair_metadata_table {
        Some(
            repair_metadata_table(table, &preview.audit, &options, audit_options)
                .await
                .with_context(|| {
                    format!("cannot repair the metadata table of `{}`", table.uri())
                })?,
        )
    } else {
        None
    };
    if args.dry_run || (preview.removed.is_empty() && mdt_preview.is_none()) {
        print_repair(args, &preview, mdt_preview.as_ref(), requests)?;
        return Ok(ExitCode::SUCCESS);
    }
    options.lock = args.lock.lock_options(table)?;
    options.dry_run = false;
    let question = match &mdt_preview {
        Some(_) => format!(
            "Remove {} and delete the metadata table of {}?",
            count(preview.removed.len() as u64, "file", "files"),
            table.uri()
        ),
        None => format!(
            "Remove {} from {}?",
            count(preview.removed.len() as u64, "file", "files"),
            table.uri()
        ),
    };
    let shown = render_repair(&preview) + &render_mdt_repair(mdt_preview.as_ref());
    if !args.yes && !super::confirm("repair", &shown, &question)? {
        return Ok(ExitCode::SUCCESS);
    }
    let resume = |_: Option<&str>| {
        "this command again (it resumes the repair from its journal under .hoodie/.hudi-keeper/repairs/, then audits the table again and goes on with what is left)".to_string()
    };
    let options = &options;
    // The metadata table goes first: a file it lists is removed only once no reader can take the
    // metadata table's word for it (the repair audits again after the deletion).
    let mdt_done = match mdt_preview {
        None => None,
        Some(_) => {
            let audited = &preview.audit;
            match super::change_table(table, resume, |t| async move {
                repair_metadata_table(&t, audited, options, audit_options).await
            })
            .await?
            {
                Ok(done) => Some(done),
                Err(code) => return Ok(code),
            }
        }
    };
    // Read `hoodie.properties` again after the metadata table's deletion (its partitions cleared):
    // the repair's audit then finds no metadata table in use.
    let reopened;
    let table = if mdt_done.is_some() {
        reopened = Table::open_storage(table.storage().clone())
            .await
            .with_context(|| format!("cannot open table `{}` again", table.uri()))?;
        &reopened
    } else {
        table
    };
    let done = if preview.removed.is_empty() {
        // Nothing to remove: the preview is what a run does.
        RepairReport {
            dry_run: false,
            ..preview
        }
    } else {
        match super::change_table(table, resume, |t| async move {
            repair(&t, options, audit_options).await
        })
        .await?
        {
            Ok(done) => done,
            Err(code) => return Ok(code),
        }
    };
    print_repair(args, &done, mdt_done.as_ref(), requests)?;
    Ok(ExitCode::SUCCESS)
}

fn print_repair(
    args: &AuditArgs,
    r: &RepairReport,
    mdt: Option<&MetadataTableRepair>,
    requests: &Counted,
) -> anyhow::Result<()> {
    if args.json {
        let mut doc = serde_json::json!({"repair": r, "requests": requests.by_kind()});
        if let Some(m) = mdt {
            doc["metadata_table_repair"] = serde_json::to_value(m)?;
        }
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print!("{}", render(&r.audit));
        print!("{}", render_repair(r));
        print!("{}", render_mdt_repair(mdt));
    }
    Ok(())
}

fn render_mdt_repair(m: Option<&MetadataTableRepair>) -> String {
    match m {
        None => String::new(),
        Some(m) if m.dry_run => format!(
            "Would delete the metadata table ({}); the next writer rebuilds it.\nDry run: nothing was changed.\n",
            m.reason
        ),
        Some(m) => format!(
            "Deleted the metadata table ({}); the next writer with the metadata table enabled rebuilds it.\n",
            m.reason
        ),
    }
}

fn render_repair(r: &RepairReport) -> String {
    let mut out = String::new();
    let verb = if r.dry_run { "Would remove" } else { "Removed" };
    let _ = writeln!(
        out,
        "\n{verb} {} ({}), older than {} s:",
        count(r.removed.len() as u64, "file", "files"),
        count(
            r.removed.iter().map(|x| x.size).sum::<u64>(),
            "byte",
            "bytes"
        ),
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
            "{verb} the cut-off {} {} from {}.",
            if r.resumed_journals.len() == 1 {
                "repair"
            } else {
                "repairs"
            },
            r.resumed_journals.join(", "),
            if r.resumed_journals.len() == 1 {
                "its journal"
            } else {
                "their journals"
            }
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
        let _ = writeln!(out, "Kept {}:", count(r.kept.len() as u64, "file", "files"));
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
