//! `hudi-keeper`: keeps Apache Hudi tables free of partially failed writes.

mod cli;
mod daemon;
mod duration;
#[cfg(test)]
mod fuzz_tests;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    // Before the runtime starts its threads (the daemon's memory, BENCHMARKS.md).
    daemon::limit_allocator_arenas();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(cli::run(args)) {
        Ok(code) => code,
        Err(e) => {
            for line in error_lines(&e) {
                eprintln!("{line}");
            }
            if e.downcast_ref::<cli::UsageError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// The lines that report `e`: the error, then each cause that says something new. Errors often
/// repeat their source in their own message (an object-store error names its HTTP error, which
/// names its I/O error), so a cause whose text was printed already is left out.
fn error_lines(e: &anyhow::Error) -> Vec<String> {
    let mut said = e.to_string();
    let mut lines = vec![format!("error: {said}")];
    for cause in e.chain().skip(1) {
        let text = cause.to_string();
        if text.is_empty() || said.contains(&text) {
            continue;
        }
        lines.push(format!("  caused by: {text}"));
        said.push('\n');
        said.push_str(&text);
    }
    // A request that timed out or gave up retrying (object_store's text names the endpoint).
    if said.contains("timed out") || said.contains("retry_timeout:") {
        lines.push(format!(
            "  hint: each object-store request is retried for at most {} (default {}s); for a slow store raise it: --storage-option {}=2m (the daemon: storage_options.{})",
            hudi_keeper_core::storage::RETRY_TIMEOUT,
            hudi_keeper_core::storage::DEFAULT_RETRY_TIMEOUT.as_secs(),
            hudi_keeper_core::storage::RETRY_TIMEOUT,
            hudi_keeper_core::storage::RETRY_TIMEOUT,
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::error_lines;

    #[derive(Debug)]
    struct E(String, Option<Box<E>>);

    impl std::fmt::Display for E {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(&self.0)
        }
    }

    impl std::error::Error for E {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|e| e as _)
        }
    }

    fn chain(texts: &[&str]) -> anyhow::Error {
        let mut e: Option<Box<E>> = None;
        for t in texts.iter().rev() {
            e = Some(Box::new(E(t.to_string(), e)));
        }
        anyhow::Error::new(*e.expect("one error at least"))
    }

    #[test]
    fn causes_already_said_are_left_out() {
        // The chain an unreachable S3 endpoint made (shortened).
        let e = chain(&[
            "cannot open table `s3://b/t`",
            "get of `x` failed: Generic S3 error: Error performing GET http://h/x - HTTP error: error sending request",
            "Generic S3 error: Error performing GET http://h/x - HTTP error: error sending request",
            "Error performing GET http://h/x - HTTP error: error sending request",
            "HTTP error: error sending request",
            "HTTP error: error sending request",
            "error sending request",
            "client error (Connect)",
            "tcp connect error",
            "Connection refused (os error 111)",
        ]);
        assert_eq!(
            error_lines(&e),
            [
                "error: cannot open table `s3://b/t`",
                "  caused by: get of `x` failed: Generic S3 error: Error performing GET http://h/x - HTTP error: error sending request",
                "  caused by: client error (Connect)",
                "  caused by: tcp connect error",
                "  caused by: Connection refused (os error 111)",
            ]
        );
    }
}
