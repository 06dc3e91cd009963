//! Run the real `hudi-keeper serve` binary for a test.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::bin;
use super::http::{get, Response};

/// A running daemon; killed when dropped.
pub struct Daemon {
    pub child: Child,
    pub addr: String,
    pub log: Arc<Mutex<Vec<String>>>,
    pub dir: PathBuf,
}

impl Daemon {
    /// Start `serve` with `config` (TOML) written into `dir`, listening on a free port.
    pub fn start(dir: &Path, config: &str) -> Daemon {
        Self::start_with(dir, config, |_| {})
    }

    /// As [`Daemon::start`], with `setup` adjusting the command (its environment) first.
    pub fn start_with(
        dir: &Path,
        config: &str,
        setup: impl FnOnce(&mut std::process::Command),
    ) -> Daemon {
        std::fs::create_dir_all(dir).expect("daemon dir");
        let path = dir.join("hudi-keeper.toml");
        std::fs::write(&path, config).expect("write config");
        let mut cmd = bin();
        cmd.args(["serve", "--config"])
            .arg(&path)
            .args(["--listen", "127.0.0.1:0"])
            .current_dir(dir)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        setup(&mut cmd);
        let mut child = cmd.spawn().expect("spawn hudi-keeper serve");
        let stderr = child.stderr.take().expect("stderr");
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        {
            let log = log.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    if let Some(a) = line.strip_prefix("hudi-keeper serving on http://") {
                        let _ = tx.send(a.trim().to_string());
                    }
                    log.lock().unwrap().push(line);
                }
            });
        }
        let addr = match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(a) => a,
            Err(_) => {
                let _ = child.kill();
                panic!(
                    "the daemon did not start:\n{}",
                    log.lock().unwrap().join("\n")
                );
            }
        };
        Daemon {
            child,
            addr,
            log,
            dir: dir.to_path_buf(),
        }
    }

    pub fn get(&self, path: &str) -> Response {
        get(&self.addr, path)
    }

    pub fn logs(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// Poll `f` until it returns `Some`, or panic after `timeout` with the daemon's log.
    pub fn wait_for<T>(
        &self,
        what: &str,
        timeout: Duration,
        mut f: impl FnMut() -> Option<T>,
    ) -> T {
        let start = Instant::now();
        loop {
            if let Some(v) = f() {
                return v;
            }
            if start.elapsed() > timeout {
                panic!("timed out waiting for {what}; daemon log:\n{}", self.logs());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The table's status document.
    pub fn table(&self, name: &str) -> serde_json::Value {
        let r = self.get(&format!("/api/v1/tables/{name}"));
        assert_eq!(r.status, 200, "{}", r.body);
        r.json()
    }

    /// The value of one metric series, by its exact text before the value.
    pub fn metric(&self, series: &str) -> Option<f64> {
        let text = self.get("/metrics").body;
        text.lines()
            .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
    }

    /// SIGTERM, and the exit status within `within`.
    pub fn terminate(mut self, within: Duration) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status();
        let start = Instant::now();
        loop {
            if let Ok(Some(s)) = self.child.try_wait() {
                return s;
            }
            if start.elapsed() > within {
                let _ = self.child.kill();
                panic!(
                    "the daemon did not exit within {within:?} of SIGTERM:\n{}",
                    self.logs()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Daemon {
    /// [`Daemon::terminate`], which must end in exit status 0; otherwise the panic shows the
    /// status and the daemon's log.
    pub fn terminate_cleanly(self, within: Duration) {
        let logs = self.log.clone();
        let status = self.terminate(within);
        assert!(
            status.success(),
            "the daemon exited with {status} after SIGTERM:\n{}",
            logs.lock().map(|l| l.join("\n")).unwrap_or_default()
        );
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
