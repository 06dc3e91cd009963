//! `hudi-keeper discover <PREFIX>`: the tables a `[[discover]]` source would register, with the
//! names the daemon would give them.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Args;
use hudi_keeper_core::discover::{FilterSettings, ScanLimits, ScanOptions, ScanReport};
use hudi_keeper_core::storage::StorageOptions;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;

use super::parse_key_value;
use crate::daemon::discovery::{glue, hms, naming, scan};

/// Exit code of a scan that was cut short by its budget or met errors: what it found is
/// printed, but tables may be missing from it.
pub const INCOMPLETE: u8 = 3;

#[derive(Debug, Args)]
pub struct DiscoverArgs {
    /// Where to look: a local path, file://, s3://, gs://, az:// or abfss:// prefix;
    /// glue://REGION, the AWS Glue Data Catalog; or thrift://HOST:PORT, a Hive Metastore.
    #[arg(value_name = "PREFIX | glue://REGION | thrift://HOST:PORT")]
    pub source: String,
    /// glue://: another endpoint than https://glue.REGION.amazonaws.com/ (a test server).
    #[arg(long, value_name = "URL")]
    pub glue_endpoint: Option<String>,
    /// glue:// and thrift://: only this database (repeatable; default: every one).
    #[arg(long = "database", alias = "glue-database", value_name = "NAME")]
    pub glue_databases: Vec<String>,
    /// glue://: the catalog's account id (default: the credentials').
    #[arg(long, value_name = "ID")]
    pub glue_catalog_id: Option<String>,
    /// The deepest folder listed (the prefix is depth 0; `prefix/db/table` is at 2).
    #[arg(long, default_value_t = ScanLimits::default().max_depth)]
    pub max_depth: u32,
    /// The most object-store requests the scan makes; then it stops, incomplete.
    #[arg(long, default_value_t = ScanLimits::default().max_requests)]
    pub max_requests: u64,
    /// Requests in flight at once.
    #[arg(long, default_value_t = hudi_keeper_core::discover::DEFAULT_CONCURRENCY)]
    pub concurrency: usize,
    /// Keep only tables whose `hoodie.table.name` matches (a glob; repeatable).
    #[arg(long = "include-name", value_name = "GLOB")]
    pub include_names: Vec<String>,
    /// Leave out tables whose name matches (repeatable).
    #[arg(long = "exclude-name", value_name = "GLOB")]
    pub exclude_names: Vec<String>,
    /// Keep only tables whose location matches (`*` within a folder name, `**` across folders).
    #[arg(long = "include-location", value_name = "GLOB")]
    pub include_locations: Vec<String>,
    /// Leave out tables whose location matches, and do not look into folders that match.
    #[arg(long = "exclude-location", value_name = "GLOB")]
    pub exclude_locations: Vec<String>,
    /// An object-store option, in object_store's key names (repeatable); for glue:// the
    /// credentials (aws_access_key_id, aws_secret_access_key, aws_session_token), else AWS_*.
    #[arg(long = "storage-option", value_name = "KEY=VALUE", value_parser = parse_key_value)]
    pub storage_options: Vec<(String, String)>,
    /// Print one JSON document instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// One table as printed.
#[derive(Debug, Serialize)]
struct Row<'a> {
    /// The name the daemon would register it under.
    name: String,
    /// `hoodie.table.name`.
    hudi_name: &'a str,
    uri: &'a str,
    table_type: Option<&'a str>,
}

#[derive(Debug, Serialize)]
struct Output<'a> {
    source: &'a str,
    kind: &'static str,
    complete: bool,
    cut_short: bool,
    requests: u64,
    folders_listed: u64,
    filtered_out: u64,
    folders_excluded: u64,
    beyond_depth: u64,
    without_properties: u64,
    links_skipped: u64,
    problem_count: u64,
    problems: &'a [hudi_keeper_core::discover::ScanProblem],
    tables: Vec<Row<'a>>,
}

fn output<'a>(source: &'a str, kind: &'static str, r: &'a ScanReport) -> Output<'a> {
    let names = naming::assign(
        r.tables
            .iter()
            .map(|t| (t.name.as_str(), t.location.as_str())),
        |_| false,
    );
    Output {
        source,
        kind,
        complete: r.complete,
        cut_short: r.cut_short,
        requests: r.requests,
        folders_listed: r.folders_listed,
        filtered_out: r.filtered_out,
        folders_excluded: r.folders_excluded,
        beyond_depth: r.beyond_depth,
        without_properties: r.without_properties,
        links_skipped: r.links_skipped,
        problem_count: r.problem_count,
        problems: &r.problems,
        tables: r
            .tables
            .iter()
            .zip(names)
            .map(|(t, name)| Row {
                name,
                hudi_name: &t.name,
                uri: &t.location,
                table_type: t.table_type.as_deref(),
            })
            .collect(),
    }
}

fn text(o: &Output<'_>) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let w = o
        .tables
        .iter()
        .map(|t| t.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let tw = 14;
    let _ = writeln!(s, "{:<w$}  {:<tw$}  URI", "NAME", "TYPE");
    for t in &o.tables {
        let _ = writeln!(
            s,
            "{:<w$}  {:<tw$}  {}",
            t.name,
            t.table_type.unwrap_or("-"),
            t.uri
        );
    }
    let _ = writeln!(
        s,
        "{} tables under {} ({} folders listed, {} requests{}{}{}{})",
        o.tables.len(),
        o.source,
        o.folders_listed,
        o.requests,
        match o.filtered_out {
            0 => String::new(),
            n => format!(", {n} left out by filters"),
        },
        match o.beyond_depth {
            0 => String::new(),
            n => format!(", {n} folders below --max-depth not looked at"),
        },
        match o.without_properties {
            0 => String::new(),
            n => format!(", {n} folders with .hoodie but no hoodie.properties"),
        },
        match o.links_skipped {
            0 => String::new(),
            n => format!(", {n} symbolic links not followed"),
        },
    );
    s
}

/// A spinner with the requests made and tables found, on a terminal without `--json`.
fn bar(json: bool) -> Option<ProgressBar> {
    if !super::progress::shown(json, std::io::stderr().is_terminal()) {
        return None;
    }
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    if let Ok(style) =
        ProgressStyle::with_template("{spinner} scanning {prefix}: {msg} ({elapsed})")
    {
        bar.set_style(style);
    }
    Some(bar)
}

fn options_limits(args: &DiscoverArgs) -> ScanLimits {
    ScanLimits {
        max_depth: args.max_depth,
        max_requests: args.max_requests,
    }
}

fn options_filters(args: &DiscoverArgs) -> FilterSettings {
    FilterSettings {
        include_names: args.include_names.clone(),
        exclude_names: args.exclude_names.clone(),
        include_locations: args.include_locations.clone(),
        exclude_locations: args.exclude_locations.clone(),
    }
}

pub async fn run(args: DiscoverArgs) -> anyhow::Result<ExitCode> {
    let options = ScanOptions {
        limits: options_limits(&args),
        filters: options_filters(&args),
        concurrency: args.concurrency,
    };
    let storage = StorageOptions::from_pairs(args.storage_options.iter().cloned());
    let bar = bar(args.json);
    if let Some(b) = &bar {
        b.set_prefix(args.source.clone());
    }
    let show = |requests: u64, detail: String| {
        if let Some(b) = &bar {
            b.set_message(format!("{requests} requests, {detail}"));
            b.tick();
        }
    };
    let (kind, report) = match args.source.strip_prefix("glue://") {
        None if args.source.starts_with("thrift://") => {
            let scan = hms::scan(
                &args.source,
                &args.glue_databases,
                options_limits(&args),
                &options_filters(&args),
                {
                    let bar = bar.clone();
                    move |requests, _| {
                        if let Some(b) = &bar {
                            b.set_message(format!("{requests} calls"));
                            b.tick();
                        }
                    }
                },
            )
            .await;
            let scan = scan.map_err(anyhow::Error::from);
            ("hive_metastore", scan)
        }
        Some(region) => {
            let options = args.storage_options.iter().cloned().collect();
            let client = glue::GlueClient::new(
                region.trim_end_matches('/'),
                args.glue_endpoint.as_deref(),
                args.glue_catalog_id.clone(),
                &options,
            )?;
            let scan = glue::scan(
                &client,
                &args.glue_databases,
                options_limits(&args),
                &options_filters(&args),
                |requests, tables| show(requests, format!("{tables} tables found")),
            )
            .await
            .map_err(anyhow::Error::from);
            ("glue", scan)
        }
        None => {
            let scan = scan::prefix(&args.source, &options, &storage, None, |p| {
                show(
                    p.requests,
                    format!(
                        "{} folders listed, {} tables found, {} queued",
                        p.folders_listed, p.tables, p.queued
                    ),
                )
            })
            .await
            .map_err(anyhow::Error::from);
            ("prefix", scan)
        }
    };
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let report = report?;
    let out = output(&args.source, kind, &report);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print!("{}", text(&out));
    }
    if report.complete {
        return Ok(ExitCode::SUCCESS);
    }
    if !args.json {
        let why = if report.cut_short {
            format!("it reached --max-requests {}", args.max_requests)
        } else {
            super::count(report.problem_count, "problem", "problems")
        };
        eprintln!("The scan is incomplete ({why}): tables may be missing from this list.");
        for p in &report.problems {
            eprintln!(
                "  {}: {}",
                p.location.escape_debug(),
                p.error.escape_debug()
            );
        }
    }
    Ok(ExitCode::from(INCOMPLETE))
}
