//! `hudi-keeper rollback`.

use std::fmt::Write as _;
use std::process::ExitCode;

use clap::Args;
use hudi_keeper_core::audit::guard::{guard, GuardOptions, GuardReport, GuardScope};
use hudi_keeper_core::audit::AuditOptions;
use hudi_keeper_core::exec::rollback::{
    count_selected, preview, rollback, RollbackDone, RollbackOptions, RollbackPreview, Selection,
};
use hudi_keeper_core::human::Ms;
use hudi_keeper_core::plan::rollback::ListingScope;
use hudi_keeper_core::protocol::lock::LockOptions;

use super::progress::Bars;
use super::{count, DetectionArgs, LockArgs, TableArgs};

#[derive(Debug, Args)]
pub struct RollbackArgs {
    #[command(flatten)]
    pub table: TableArgs,
    #[command(flatten)]
    pub detection: DetectionArgs,
    #[command(flatten)]
    pub lock: LockArgs,
    /// Roll back this pending instant only (default: every failed write the policy finds, and
    /// every pending rollback).
    #[arg(long, value_name = "INSTANT_TIME")]
    pub instant: Option<String>,
    /// With --instant: roll it back even if its writer may be alive (a live heartbeat, younger
    /// than --min-instant-age, a suspected EAGER writer's, or of unknown age). A write that is
    /// only left alone for want of proof (`no_heartbeat_unconfirmed`, `awaiting_newer_write`)
    /// is rolled back by naming it, without --force.
    #[arg(long, requires = "instant")]
    pub force: bool,
    /// Print the plan (instants, files per partition, bytes) and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask for confirmation (required when stdin is not a terminal).
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Trust the markers alone: do not list the partitions the instant names (or, when it names
    /// none, the table) for files of the instant that its markers missed. An instant without
    /// markers is then refused.
    #[arg(long)]
    pub no_listing_cross_check: bool,
    /// Deletes in flight at once.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub delete_concurrency: u16,
    /// Do not check, after the rollbacks, the partitions they touched for files of the instants
    /// they undid (written by a zombie writer meanwhile, or missed) and remove them under the lock.
    #[arg(long)]
    pub no_leftover_guard: bool,
}

pub async fn run(args: RollbackArgs) -> anyhow::Result<ExitCode> {
    // Object-store requests by kind, which --json reports.
    let (table, requests) = args.table.open_counted().await?;
    let options = RollbackOptions {
        policy: args.detection.policy.into(),
        heartbeat: args.detection.heartbeat_policy(),
        lazy_writers: args.detection.lazy_writers(),
        max_write_duration: args.detection.max_write_duration,
        clustering_expiration: args.detection.clustering_expiration(),
        force: args.force,
        delete_concurrency: usize::from(args.delete_concurrency),
        listing_cross_check: !args.no_listing_cross_check,
        lock: LockOptions::none(),
        // The CLI keeps no journal: a rerun resumes its own pending rollbacks with --force.
        ..RollbackOptions::default()
    };
    let selection = match &args.instant {
        Some(t) => Selection::Instant(t.clone()),
        None => Selection::AllFailed,
    };
    // Unattended (--yes), the plan is made once, by the rollback itself: a preview would list
    // every partition the failed writes touched a second time, to show nothing. Only whether
    // there is anything to do is asked first (no listing).
    let unattended = args.yes && !args.dry_run;
    let plans = if unattended {
        Vec::new()
    } else {
        preview(&table, &selection, &options).await?
    };
    let nothing = if unattended {
        count_selected(&table, &selection, &options).await? == 0
    } else {
        plans.is_empty()
    };
    if args.dry_run || nothing {
        if args.json {
            let doc = serde_json::json!({"table": table.uri(), "dry_run": args.dry_run, "rollbacks": plans});
            println!("{}", serde_json::to_string_pretty(&doc)?);
        } else if plans.is_empty() {
            println!("Nothing to roll back in {}.", table.uri());
        } else {
            print!("{}", render_previews(&plans));
            println!("Dry run: nothing was changed.");
        }
        return Ok(ExitCode::SUCCESS);
    }
    // Changing the table needs a lock decision.
    let options = RollbackOptions {
        lock: args.lock.lock_options(&table)?,
        ..options
    };
    let options_lock = options.lock.clone();
    if !args.yes
        && !super::confirm(
            "roll back",
            &render_previews(&plans),
            &format!(
                "Roll back {} of {}?",
                count(plans.len() as u64, "instant", "instants"),
                table.uri()
            ),
        )?
    {
        return Ok(ExitCode::SUCCESS);
    }
    let bars = Bars::for_stderr(args.json);
    let progress = Bars::sink(&bars);
    let uri = table.uri().to_string();
    let resume = |pending: Option<&str>| {
        match pending {
        Some(t) => format!("`hudi-keeper rollback {uri} --instant {t} --force` with the same --lock and --storage-option flags (then this command again for any other failed write)"),
        None => "this command again (a rollback it left pending is resumed at once with `--instant <instant> --force`, otherwise once it is older than --min-instant-age)".into(),
    }
    };
    let done = match super::change_table(&table, resume, |t| async move {
        rollback(&t, &selection, &options, progress).await
    })
    .await?
    {
        Ok(done) => done,
        Err(code) => return Ok(code),
    };
    // The last bar stays on screen, above the summary.
    drop(bars);
    let guarded = if args.no_leftover_guard || done.is_empty() {
        None
    } else {
        let scope =
            GuardScope::Rollbacks(done.iter().map(|d| d.rollback_instant.clone()).collect());
        let guard_options = GuardOptions {
            lock: options_lock,
            dry_run: false,
            max_log_read: AuditOptions::default().max_log_read,
        };
        let again = |_: Option<&str>| {
            "`hudi-keeper audit <uri> --repair` to find and remove the files the rollbacks left (the rollbacks themselves are complete)".to_string()
        };
        match super::change_table(&table, again, |t| async move {
            guard(&t, &scope, &guard_options).await
        })
        .await?
        {
            Ok(report) => Some(report),
            Err(code) => return Ok(code),
        }
    };
    if args.json {
        let doc = serde_json::json!({"table": table.uri(), "dry_run": false, "rollbacks": done, "leftover_guard": guarded, "requests": requests.by_kind()});
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print!("{}", render_done(&done));
        // Only when it found something: a clean rollback prints its summary alone.
        if let Some(g) = guarded.as_ref().filter(|g| g.leftovers_found > 0) {
            print!("{}", render_guard(g));
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn render_guard(g: &GuardReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "leftover guard: {} of {} listed, {} of the rolled-back instants found, {} removed",
        count(g.partitions_listed as u64, "partition", "partitions"),
        count(g.rollbacks_checked as u64, "rollback", "rollbacks"),
        count(g.leftovers_found as u64, "file", "files"),
        g.removed.len()
    );
    for x in &g.removed {
        let _ = writeln!(out, "  removed {} ({} bytes)", x.path, x.size);
    }
    for k in &g.kept {
        let _ = writeln!(out, "  kept {}: {}", k.path, k.reason);
    }
    out
}

fn render_previews(plans: &[RollbackPreview]) -> String {
    let mut out = String::new();
    for p in plans {
        let _ = writeln!(
            out,
            "{} {} ({}){}: {}, {}{}",
            p.instant,
            p.action.as_str(),
            p.state.as_str(),
            p.resumes
                .as_ref()
                .map(|r| format!(", resuming rollback {r}"))
                .unwrap_or_default(),
            count(p.files as u64, "file", "files"),
            count(p.bytes, "byte", "bytes"),
            if p.log_blocks > 0 {
                format!(
                    ", {}",
                    count(
                        p.log_blocks as u64,
                        "rollback command block",
                        "rollback command blocks"
                    )
                )
            } else {
                String::new()
            }
        );
        let _ = writeln!(out, "    why: {}", p.reason);
        for (part, pp) in &p.partitions {
            let name = if part.is_empty() {
                "<table root>"
            } else {
                part
            };
            let _ = writeln!(
                out,
                "    {name}: {}, {}",
                count(pp.files as u64, "file", "files"),
                count(pp.bytes, "byte", "bytes")
            );
        }
        if !matches!(p.listing, ListingScope::None) {
            let _ = writeln!(out, "    cross-check listed {}", p.listing);
        }
        if p.files_not_in_markers > 0 {
            let _ = writeln!(
                out,
                "    {} the instant but missing from its markers; deleted too",
                count(p.files_not_in_markers as u64, "file carries", "files carry")
            );
        }
    }
    out
}

fn render_done(done: &[RollbackDone]) -> String {
    let mut out = String::new();
    if done.is_empty() {
        out.push_str("Nothing to roll back.\n");
    }
    for d in done {
        let _ = writeln!(
            out,
            "rolled back {} {} with rollback {}{}: {}, {}, metadata table: {}, {}",
            d.instant,
            d.action,
            d.rollback_instant,
            if d.resumed { " (resumed)" } else { "" },
            count(d.files_deleted as u64, "file deleted", "files deleted"),
            count(
                d.log_blocks_written as u64,
                "command block",
                "command blocks"
            ),
            d.metadata_table,
            Ms(d.duration_ms)
        );
    }
    out
}
