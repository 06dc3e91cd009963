//! What the API suites share (issue #15, #30): the token, registrations, the tables listed,
//! raw connections to the HTTP server, a daemon whose API registers tables under a folder, and
//! the registry files it keeps.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use super::daemon::Daemon;
use super::http::{request, Response};

/// The API token of the suites' daemons.
pub const TOKEN: &str = "test-token-0123456789abcdef";

/// The body of a registration: `name`, `uri` and the fields of `extra`.
pub fn entry(name: &str, uri: &str, extra: Value) -> String {
    let mut v = json!({"name": name, "uri": uri});
    if let Value::Object(m) = extra {
        for (k, x) in m {
            v[k] = x;
        }
    }
    v.to_string()
}

/// Register a table through the API with `body`.
pub fn register(d: &Daemon, body: &str) -> Response {
    request(&d.addr, "POST", "/api/v1/tables", Some(TOKEN), Some(body))
}

/// The names of the tables the API lists.
pub fn names(d: &Daemon) -> Vec<String> {
    d.get("/api/v1/tables").json()["tables"]
        .as_array()
        .expect("tables")
        .iter()
        .map(|t| t["name"].as_str().expect("name").to_string())
        .collect()
}

/// A `[server]` section with the token and the state folder, plus `extra` lines.
pub fn server(extra: &str) -> String {
    format!("[server]\nstate_dir = \"state\"\nauth_token = \"{TOKEN}\"\n{extra}")
}

/// Open a connection and send `bytes` (a request, or the start of one).
pub fn send_raw(addr: &str, bytes: &[u8]) -> TcpStream {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.write_all(bytes).expect("send");
    s
}

/// The status of the response on `s`, if one arrives within `wait`.
pub fn status_within(s: &mut TcpStream, wait: Duration) -> Option<u16> {
    s.set_read_timeout(Some(wait)).expect("read timeout");
    let mut buf = [0u8; 4096];
    let mut got = Vec::new();
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                got.extend_from_slice(&buf[..n]);
                if got.windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return None
            }
            Err(_) => break,
        }
    }
    String::from_utf8_lossy(&got)
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
}

/// Whether the server closes `s` (end of stream or reset, after any response) within `wait`.
pub fn closed_within(s: &mut TcpStream, wait: Duration) -> bool {
    s.set_read_timeout(Some(wait)).expect("read timeout");
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return false
            }
            Err(_) => return true,
        }
    }
}

/// The permission bits of a file.
pub fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

/// A daemon whose API may register observed tables under `allowed`, with `extra` lines in
/// `[server]`.
pub fn api_daemon(dir: &Path, allowed: &Path, extra: &str) -> Daemon {
    Daemon::start(
        dir,
        &format!(
            "{}[defaults]\npoll_interval = \"1h\"\nfailed_writes_policy = \"observe\"\n",
            server(&format!(
                "allowed_table_uris = [\"{}\"]\n{extra}",
                allowed.display()
            ))
        ),
    )
}

/// The names of the tables kept in `state/api-tables/`, sorted.
pub fn api_table_files(state: &Path) -> Vec<String> {
    let mut n: Vec<String> = match std::fs::read_dir(state.join("api-tables")) {
        Ok(entries) => entries
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect(),
        Err(e) if e.kind() == ErrorKind::NotFound => Vec::new(),
        Err(e) => panic!("{e}"),
    };
    n.sort();
    n
}

/// A work folder for an API daemon: `w` (the temporary folder, canonical), `allowed` (made: the
/// folder registrations may name), `dir` (the daemon's folder, `w/d`) and `state` (its state
/// folder, made).
pub struct ApiWork {
    pub work: tempfile::TempDir,
    pub w: PathBuf,
    pub allowed: PathBuf,
    pub dir: PathBuf,
    pub state: PathBuf,
}

/// A fresh [`ApiWork`].
pub fn api_work() -> ApiWork {
    let work = tempfile::tempdir().unwrap();
    let w = work.path().canonicalize().unwrap();
    let allowed = w.join("allowed");
    std::fs::create_dir_all(&allowed).unwrap();
    let dir = w.join("d");
    let state = dir.join("state");
    std::fs::create_dir_all(&state).unwrap();
    ApiWork {
        work,
        w,
        allowed,
        dir,
        state,
    }
}
