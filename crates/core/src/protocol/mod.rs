//! Hudi's protocols: heartbeats, markers, failed-write detection and table locks.

pub mod detect;
pub mod heartbeat;
pub mod lock;
pub mod markers;
pub mod observe;
