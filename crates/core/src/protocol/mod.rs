//! Hudi's protocols: heartbeats, markers and failed-write detection.

pub mod detect;
pub mod heartbeat;
pub mod markers;
