//! `hudi-keeper savepoint create|list|delete`: the savepoints of a table, as Hudi writes them.

use std::process::ExitCode;

use anyhow::bail;
use clap::{Args, Subcommand};
use hudi_keeper_core::exec::savepoint::{
    create_savepoint, delete_savepoint, list_savepoints, preview_savepoint, SavepointCreated,
    SavepointRequest,
};

use super::{LockArgs, TableArgs};

#[derive(Debug, Args)]
pub struct SavepointArgs {
    #[command(subcommand)]
    pub command: SavepointCommand,
}

#[derive(Debug, Subcommand)]
pub enum SavepointCommand {
    /// Savepoint a completed commit (the latest one by default): the cleaner then keeps the
    /// files of its view, and the table can be restored to it.
    Create {
        #[command(flatten)]
        table: TableArgs,
        #[command(flatten)]
        lock: Box<LockArgs>,
        /// The commit to savepoint (default: the latest completed commit).
        #[arg(long, value_name = "INSTANT_TIME")]
        instant: Option<String>,
        /// Who takes it (`savepointedBy`).
        #[arg(long, default_value = "hudi-keeper")]
        user: String,
        /// Why (`comments`).
        #[arg(long, default_value = "")]
        comment: String,
        /// Print what would be written and change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// List the savepoints of the active timeline, with the files each one keeps.
    List {
        #[command(flatten)]
        table: TableArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Delete a savepoint (its completed file, then its inflight file), under the table lock.
    Delete {
        #[command(flatten)]
        table: TableArgs,
        #[command(flatten)]
        lock: Box<LockArgs>,
        /// The savepointed instant.
        #[arg(long, value_name = "INSTANT_TIME")]
        instant: String,
        /// Do it without asking.
        #[arg(long, short = 'y')]
        yes: bool,
    },
}

fn print_created(t: &str, c: &SavepointCreated, json: bool) -> anyhow::Result<()> {
    if json {
        let doc = serde_json::json!({"table": t, "savepoint": c});
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        println!(
            "{} savepoint of {} in {}: {} in {}",
            if c.written {
                "Created the"
            } else {
                "Dry run: would create the"
            },
            c.instant,
            t,
            super::count(c.metadata.file_count() as u64, "file", "files"),
            super::count(
                c.metadata.partition_metadata.len() as u64,
                "partition",
                "partitions"
            )
        );
    }
    Ok(())
}

pub async fn run(args: SavepointArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        SavepointCommand::Create {
            table,
            lock,
            instant,
            user,
            comment,
            dry_run,
            json,
        } => {
            let t = table.open().await?;
            let request = SavepointRequest {
                instant,
                user,
                comment,
            };
            let created = if dry_run {
                preview_savepoint(&t, &request).await?
            } else {
                let options = lock.lock_options(&t)?;
                let again = |_: Option<&str>| "this command again".to_string();
                match super::change_table(&t, again, |table| {
                    let (request, options) = (&request, &options);
                    async move { create_savepoint(&table, request, options).await }
                })
                .await?
                {
                    Ok(created) => created,
                    Err(code) => return Ok(code),
                }
            };
            print_created(t.uri(), &created, json)?;
            Ok(ExitCode::SUCCESS)
        }
        SavepointCommand::List { table, json } => {
            let t = table.open().await?;
            let sps = list_savepoints(&t).await?;
            if json {
                let doc = serde_json::json!({"table": t.uri(), "savepoints": sps});
                println!("{}", serde_json::to_string_pretty(&doc)?);
            } else if sps.is_empty() {
                println!("No savepoint in {}.", t.uri());
            } else {
                for s in &sps {
                    match &s.metadata {
                        Some(m) => println!(
                            "{}  {}  {} in {}, by {} ({})",
                            s.instant,
                            s.state.as_str(),
                            super::count(m.file_count() as u64, "file", "files"),
                            super::count(
                                m.partition_metadata.len() as u64,
                                "partition",
                                "partitions"
                            ),
                            m.savepointed_by,
                            m.comments
                        ),
                        None => println!("{}  {}", s.instant, s.state.as_str()),
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        SavepointCommand::Delete {
            table,
            lock,
            instant,
            yes,
        } => {
            let t = table.open().await?;
            let options = lock.lock_options(&t)?;
            if !yes {
                bail!("deleting a savepoint lets the cleaner remove the files it kept; pass --yes to do it");
            }
            let again = |_: Option<&str>| "this command again".to_string();
            if let Err(code) = super::change_table(&t, again, |table| {
                let (instant, options) = (&instant, &options);
                async move { delete_savepoint(&table, instant, options).await }
            })
            .await?
            {
                return Ok(code);
            }
            println!("Deleted the savepoint {instant} of {}.", t.uri());
            Ok(ExitCode::SUCCESS)
        }
    }
}
