//! `hudi-keeper audit`: every data file of a table classified by the instant that wrote it.

use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use hudi_keeper_core::audit::{audit, AuditOptions, AuditReport, Class, Counts};
use serde::Serialize;

use super::TableArgs;

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
