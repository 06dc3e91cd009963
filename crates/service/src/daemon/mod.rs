//! `hudi-keeper serve`: polls every registered table on its interval, rolls back the writes its
//! policy calls failed (and finishes its own cut-short rollbacks and restores), and serves health,
//! metrics and an API.
//!
//! One scheduler keeps every table on a single timer heap; a table that comes due is polled on
//! a task of its own (with jitter, exponential backoff on errors, and a halted state after
//! repeated failures), and a global semaphore bounds polls running at once, so a slow table
//! never holds up another's schedule beyond that bound. A table's opened handle (its
//! `hoodie.properties`) is cached, so an idle table costs one listing of its timeline per poll.
//!
//! The parts: [`serve()`] runs the daemon on its listeners until shutdown; [`Daemon`]
//! (`instance`) holds the registered tables ([`TableState`], `table_state`), which `tables`
//! registers and keeps in the registry, `scheduler` makes due, `poll` reads, records and acts
//! on, and `changes` changes through the API; `leftovers` runs the leftover guard after
//! rollbacks and periodically; [`http`] serves them; errors are [`TableError`].

mod activity;
mod api_register;
mod audit_view;
mod audits;
mod changes;
pub mod cluster;
pub mod config;
mod deadline;
pub mod discovery;
mod enclosing;
mod error;
pub mod evidence;
pub mod http;
mod instance;
mod leftovers;
pub mod membership;
pub mod metrics;
pub mod own_changes;
mod places;
mod poll;
mod readiness;
mod registry;
mod scheduler;
mod serve;
mod state_files;
mod table_state;
mod tables;

pub use audit_view::AuditBrief;
pub use audits::FIRST_AUDIT_WITHIN;
pub use changes::ManualRollback;
pub use error::TableError;
pub use instance::Daemon;
pub use serve::{limit_allocator_arenas, serve, shutdown_signal, Listeners};
pub use table_state::{RollbackView, Source, TableState, TableStatus, WritersStatus};
