//! `hudi-keeper inspect`.

use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use hudi_keeper_core::audit::{audit, AuditOptions, AuditReport};
use hudi_keeper_core::inspect::{inspect, InspectOptions, InspectReport, InstantRow, PendingRow};
use serde::Serialize;

use super::{DetectionArgs, TableArgs};

#[derive(Debug, Args)]
pub struct InspectArgs {
    #[command(flatten)]
    pub table: TableArgs,
    #[command(flatten)]
    pub detection: DetectionArgs,
    /// Print one JSON document instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Also audit the table (as `hudi-keeper audit`, read-only: one listing of every data file)
    /// and show its summary: files, bytes and the oldest file per class, the partitions with
    /// files that are not committed, examples.
    #[arg(long)]
    pub audit: bool,
}

/// The JSON document: the report, and with `--audit` the audit's (under `audit`).
#[derive(Serialize)]
struct Output<'a> {
    #[serde(flatten)]
    report: &'a InspectReport,
    #[serde(skip_serializing_if = "Option::is_none")]
    audit: Option<&'a AuditReport>,
}

pub async fn run(args: InspectArgs) -> anyhow::Result<ExitCode> {
    let table = args.table.open().await?;
    let options = InspectOptions {
        policy: args.detection.policy.into(),
        heartbeat: args.detection.heartbeat_policy(),
        now_ms: chrono::Utc::now().timestamp_millis(),
        lazy_writers: args.detection.lazy_writers(),
        max_write_duration: args.detection.max_write_duration,
        clustering_expiration: args.detection.clustering_expiration(),
    };
    let report = inspect(&table, &options)
        .await
        .with_context(|| format!("cannot inspect table `{}`", table.uri()))?;
    let audited = match args.audit {
        true => Some(
            audit(&table, &AuditOptions::default())
                .await
                .with_context(|| format!("cannot audit table `{}`", table.uri()))?,
        ),
        false => None,
    };
    if args.json {
        let out = Output {
            report: &report,
            audit: audited.as_ref(),
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print!("{}", render(&report));
        if let Some(a) = &audited {
            print!("\nAudit\n{}", super::audit::render(a));
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn instants_table(out: &mut String, rows: &[InstantRow]) {
    let _ = writeln!(
        out,
        "  {:<22} {:<14} {:<10} COMPLETION TIME",
        "REQUESTED TIME", "ACTION", "STATE"
    );
    for i in rows {
        let _ = writeln!(
            out,
            "  {:<22} {:<14} {:<10} {}",
            i.requested_time,
            i.action.as_str(),
            i.state.as_str(),
            i.completion_time.as_deref().unwrap_or("-")
        );
    }
}

pub fn render(r: &InspectReport) -> String {
    let mut out = String::new();
    table_header(&mut out, r);
    let _ = writeln!(out, "Lock      {}", r.lock.hint);
    let _ = writeln!(out, "Writers   {}", r.writers.hint);
    let _ = writeln!(out, "\nInstants ({})", r.instants.len());
    if r.instants.is_empty() {
        let _ = writeln!(out, "  (the timeline is empty)");
    } else {
        instants_table(&mut out, &r.instants);
    }

    pending_instants(&mut out, r);
    malformed_files(&mut out, r);
    metadata_table(&mut out, r);
    out
}

/// The table's name, type, versions, URI, timeline and metadata-table partitions.
fn table_header(out: &mut String, r: &InspectReport) {
    let t = &r.table;
    let _ = writeln!(
        out,
        "Table     {} ({}, table version {}, timeline layout {})",
        if t.name.is_empty() {
            "<unnamed>"
        } else {
            &t.name
        },
        t.table_type,
        t.version,
        t.timeline_layout
    );
    let _ = writeln!(out, "URI       {}", t.uri);
    let _ = writeln!(
        out,
        "Timeline  {} (instant times in {})",
        t.timeline_path, t.timeline_timezone
    );
    let _ = writeln!(
        out,
        "Metadata  {}",
        if t.metadata_partitions.is_empty() {
            "not in use".to_string()
        } else {
            format!("partitions {}", t.metadata_partitions.join(", "))
        }
    );
}

/// The pending instants, each with its verdict, its reason and its markers.
fn pending_instants(out: &mut String, r: &InspectReport) {
    let _ = writeln!(
        out,
        "\nPending instants ({}), judged under the {} policy",
        r.pending.len(),
        r.policy.to_string().to_uppercase()
    );
    if r.pending.is_empty() {
        let _ = writeln!(out, "  (none)");
    } else {
        let _ = writeln!(
            out,
            "  {:<22} {:<14} {:<10} {:<14} {:<24} MARKERS",
            "REQUESTED TIME", "ACTION", "STATE", "HEARTBEAT AGE", "VERDICT"
        );
        for p in &r.pending {
            let markers = markers_cell(p);
            let _ = writeln!(
                out,
                "  {:<22} {:<14} {:<10} {:<14} {:<24} {}",
                p.requested_time,
                p.action.as_str(),
                p.state.as_str(),
                p.heartbeat_age_ms
                    .map(hudi_keeper_core::human::duration_ms)
                    .unwrap_or_else(|| "none".into()),
                p.verdict.as_str(),
                markers
            );
            let _ = writeln!(out, "      {}", p.reason);
            if let Some(err) = p.markers.as_ref().and_then(|m| m.error.as_ref()) {
                let _ = writeln!(out, "      markers: {err}");
            }
        }
    }
}

/// The pending instants' markers in one cell: kind, total and count by I/O type.
fn markers_cell(p: &PendingRow) -> String {
    match &p.markers {
        None => "-".to_string(),
        Some(m) if m.error.is_some() => "unreadable".to_string(),
        Some(m) => match m.kind {
            None => "none".to_string(),
            Some(kind) => {
                let kinds: Vec<String> = m.counts.iter().map(|(k, v)| format!("{k} {v}")).collect();
                format!("{} {} ({})", kind.as_str(), m.total, kinds.join(", "))
            }
        },
    }
}

/// Timeline files that do not parse, each with why.
fn malformed_files(out: &mut String, r: &InspectReport) {
    if !r.malformed.is_empty() {
        let _ = writeln!(
            out,
            "\nMalformed timeline files ({}), ignored",
            r.malformed.len()
        );
        for m in &r.malformed {
            let _ = writeln!(out, "  {}: {}", m.name, m.reason);
        }
    }
}

/// The metadata table's pending instants.
fn metadata_table(out: &mut String, r: &InspectReport) {
    if let Some(mdt) = &r.metadata_table {
        let _ = writeln!(
            out,
            "\nMetadata table (.hoodie/metadata, table version {}): {} instants, {} pending",
            mdt.version,
            mdt.instants.len(),
            mdt.instants.iter().filter(|i| i.state.is_pending()).count()
        );
        let pending: Vec<InstantRow> = mdt
            .instants
            .iter()
            .filter(|i| i.state.is_pending())
            .cloned()
            .collect();
        if !pending.is_empty() {
            instants_table(out, &pending);
        }
    }
}
