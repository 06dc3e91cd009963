//! `hudi-keeper savepoint list|delete`: the savepoints of a table. (Creating savepoints and
//! restoring to them are issue #8.)

use std::process::ExitCode;

use anyhow::bail;
use clap::{Args, Subcommand};
use hudi_keeper_core::exec::savepoint::{delete_savepoint, list_savepoints};

use super::{LockArgs, TableArgs};

#[derive(Debug, Args)]
pub struct SavepointArgs {
    #[command(subcommand)]
    pub command: SavepointCommand,
}

#[derive(Debug, Subcommand)]
pub enum SavepointCommand {
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

pub async fn run(args: SavepointArgs) -> anyhow::Result<ExitCode> {
    match args.command {
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
                            "{}  {:?}  {} files in {} partitions, by {} ({})",
                            s.instant,
                            s.state,
                            m.file_count(),
                            m.partition_metadata.len(),
                            m.savepointed_by,
                            m.comments
                        ),
                        None => println!("{}  {:?}", s.instant, s.state),
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
            delete_savepoint(&t, &instant, &options).await?;
            println!("Deleted the savepoint {instant} of {}.", t.uri());
            Ok(ExitCode::SUCCESS)
        }
    }
}
