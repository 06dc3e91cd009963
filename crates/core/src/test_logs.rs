//! What the crate's tests read of its logs: a tracing subscriber writing into memory, and the
//! first line logged at error level.

use std::sync::{Arc, Mutex};

/// Collects what a tracing subscriber writes.
#[derive(Clone, Default)]
pub(crate) struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    /// A subscriber (plain text, no colours) writing into a new buffer, and the buffer.
    pub(crate) fn subscriber() -> (Self, impl tracing::Subscriber + Send + Sync) {
        let captured = Self::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        (captured, subscriber)
    }

    /// The first line logged at error level; panics, showing the log, when there is none.
    pub(crate) fn error_line(&self) -> String {
        let log = String::from_utf8(self.0.lock().unwrap().clone()).unwrap();
        log.lines()
            .find(|l| l.contains("ERROR"))
            .map(str::to_string)
            .unwrap_or_else(|| panic!("no error logged: {log}"))
    }
}
