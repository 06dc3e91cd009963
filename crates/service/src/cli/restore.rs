//! `hudi-keeper restore`: take a table back to a savepoint (or, with `--to-instant`, to any
//! completed commit on the active timeline) through a series of rollbacks, as Hudi does.

use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::bail;
use clap::Args;
use hudi_keeper_core::exec::restore::{
    preview_restore, restore, MetadataTableAction, RestoreDone, RestoreOptions, RestorePreview,
};
use hudi_keeper_core::exec::rollback::RollbackOptions;
use hudi_keeper_core::human::Ms;
use hudi_keeper_core::protocol::lock::LockOptions;

use super::progress::Bars;
use super::{count, DetectionArgs, LockArgs, TableArgs};

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("point").required(true).args(["savepoint", "to_instant"])))]
pub struct RestoreArgs {
    #[command(flatten)]
    pub table: TableArgs,
    #[command(flatten)]
    pub detection: DetectionArgs,
    #[command(flatten)]
    pub lock: LockArgs,
    /// Restore to this savepointed commit (Hudi's restoreToSavepoint).
    #[arg(long, value_name = "INSTANT_TIME")]
    pub savepoint: Option<String>,
    /// Restore to this completed commit without requiring a savepoint (Hudi's
    /// restoreToInstant). A clean may already have removed files it needs.
    #[arg(long, value_name = "INSTANT_TIME")]
    pub to_instant: Option<String>,
    /// Print the plan (instants in order, files and bytes) and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask for confirmation (required when stdin is not a terminal).
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Deletes in flight at once.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub delete_concurrency: u16,
}

pub async fn run(args: RestoreArgs) -> anyhow::Result<ExitCode> {
    // Object-store requests by kind, which --json reports.
    let (table, requests) = args.table.open_counted().await?;
    let (target, require_savepoint) = match (&args.savepoint, &args.to_instant) {
        (Some(t), _) => (t.clone(), true),
        (None, Some(t)) => (t.clone(), false),
        (None, None) => bail!("pass --savepoint <INSTANT_TIME> or --to-instant <INSTANT_TIME>"),
    };
    let mut options = RestoreOptions {
        rollback: RollbackOptions {
            policy: args.detection.policy.into(),
            heartbeat: args.detection.heartbeat_policy(),
            lazy_writers: args.detection.lazy_writers(),
            max_write_duration: args.detection.max_write_duration,
            clustering_expiration: args.detection.clustering_expiration(),
            force: false,
            delete_concurrency: usize::from(args.delete_concurrency),
            listing_cross_check: true,
            lock: LockOptions::none(),
            // The CLI keeps no journal: a rerun resumes its own pending rollbacks with --force.
            ..RollbackOptions::default()
        },
        require_savepoint,
    };
    let plan = preview_restore(&table, &target, &options).await?;
    if args.dry_run {
        if args.json {
            let doc = serde_json::json!({"table": table.uri(), "dry_run": true, "restore": plan, "requests": requests.by_kind()});
            println!("{}", serde_json::to_string_pretty(&doc)?);
        } else {
            print!("{}", render_preview(&plan));
            println!("Dry run: nothing was changed.");
        }
        return Ok(ExitCode::SUCCESS);
    }
    options.rollback.lock = args.lock.lock_options(&table)?;
    if !args.yes
        && !super::confirm(
            "restore",
            &render_preview(&plan),
            &format!(
                "Undo {} of {} and restore it to {target}?",
                count(plan.instants.len() as u64, "instant", "instants"),
                table.uri()
            ),
        )?
    {
        return Ok(ExitCode::SUCCESS);
    }
    let bars = Bars::for_stderr(args.json);
    let progress = Bars::sink(&bars);
    let resume = |_: Option<&str>| {
        "this restore command again: it continues the pending restore".to_string()
    };
    let done = match super::change_table(&table, resume, |t| {
        let (target, options) = (&target, &options);
        async move { restore(&t, target, options, progress).await }
    })
    .await?
    {
        Ok(done) => done,
        Err(code) => return Ok(code),
    };
    // The last bar stays on screen, above the summary.
    drop(bars);
    if args.json {
        let doc = serde_json::json!({"table": table.uri(), "dry_run": false, "restore": done, "requests": requests.by_kind()});
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print!("{}", render_done(&done));
    }
    Ok(ExitCode::SUCCESS)
}

fn metadata_line(m: MetadataTableAction) -> &'static str {
    match m {
        MetadataTableAction::NotInUse => "not in use",
        MetadataTableAction::Restored => {
            "restored to the same point, as Hudi restores it (the partitions Hudi drops on restore are dropped and rebuilt by the next writer)"
        }
        MetadataTableAction::Deleted => {
            "deleted (as Hudi does when it cannot restore it); the next writer with the metadata table enabled rebuilds it"
        }
        MetadataTableAction::Recorded => {
            "the restore recorded in it, as Hudi 0.13 records one (a deltacommit at the restore instant)"
        }
    }
}

pub(crate) fn render_preview(p: &RestorePreview) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Restore to {}{}{}: undo {}, {}, {}",
        p.target,
        if p.savepointed {
            " (savepointed)"
        } else {
            " (no savepoint)"
        },
        p.resumes
            .as_ref()
            .map(|r| format!(", continuing restore {r}"))
            .unwrap_or_default(),
        count(p.instants.len() as u64, "instant", "instants"),
        count(p.files as u64, "file", "files"),
        count(p.bytes, "byte", "bytes")
    );
    for i in &p.instants {
        let _ = writeln!(
            out,
            "  {} {} ({}){}: {}, {}{}",
            i.instant,
            i.action.as_str(),
            i.state.as_str(),
            i.resumes_rollback
                .as_ref()
                .map(|r| format!(", resuming rollback {r}"))
                .unwrap_or_default(),
            count(i.files as u64, "file", "files"),
            count(i.bytes, "byte", "bytes"),
            if i.log_blocks > 0 {
                format!(
                    ", {}",
                    count(
                        i.log_blocks as u64,
                        "rollback command block",
                        "rollback command blocks"
                    )
                )
            } else {
                String::new()
            }
        );
    }
    // The rollbacks the restore makes go at the end too, with those already after the target.
    let removed = (p.rollbacks_removed.len() + p.rollbacks_made) as u64;
    if removed > 0 {
        let mut parts = Vec::new();
        if p.rollbacks_made > 0 {
            parts.push(format!("{} it makes as it undoes", p.rollbacks_made));
        }
        if !p.rollbacks_removed.is_empty() {
            parts.push(format!(
                "{} already after {}: {}",
                p.rollbacks_removed.len(),
                p.target,
                p.rollbacks_removed.join(", ")
            ));
        }
        let _ = writeln!(
            out,
            "  then remove {} ({})",
            count(removed, "rollback instant", "rollback instants"),
            parts.join("; ")
        );
    }
    let _ = writeln!(out, "  metadata table: {}", metadata_line(p.metadata_table));
    out
}

fn render_done(d: &RestoreDone) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Restored to {} with restore {}{}: {} undone, {}, {} removed, metadata table: {}, {}",
        d.target,
        d.restore_instant,
        if d.resumed { " (continued)" } else { "" },
        count(d.undone.len() as u64, "instant", "instants"),
        count(d.files_deleted as u64, "file deleted", "files deleted"),
        count(
            d.rollbacks_removed as u64,
            "rollback instant",
            "rollback instants"
        ),
        metadata_line(d.metadata_table),
        Ms(d.duration_ms)
    );
    for u in &d.undone {
        let _ = writeln!(
            out,
            "  undid {} {} with rollback {}: {}, {}",
            u.instant,
            u.action,
            u.rollback_instant,
            count(u.files_deleted as u64, "file deleted", "files deleted"),
            count(
                u.log_blocks_written as u64,
                "command block",
                "command blocks"
            )
        );
    }
    out
}
