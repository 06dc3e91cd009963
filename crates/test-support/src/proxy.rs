//! A slow store: a loopback TCP proxy in front of the S3-compatible server that delays every
//! request, can hold requests whose request line matches a pattern (a hung store), and can inject
//! faults at random ([`Faults`]: throttling answers, dropped connections, lost answers). Each
//! connection carries one request (the proxy asks for `Connection: close`), so every request is
//! seen. Bounded: it stops when dropped, and by itself after [`MAX_LIFETIME`].

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The longest a proxy runs.
pub const MAX_LIFETIME: Duration = Duration::from_secs(600);

/// Faults injected at random, each request drawing one (or none): the chance of each in 1,000.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Faults {
    /// Answered `503 SlowDown` without reaching the server (S3 throttling).
    pub throttle_per_mille: u32,
    /// The connection is closed before the request reaches the server.
    pub drop_per_mille: u32,
    /// The request reaches the server, which acts on it, but its answer is lost (the connection
    /// closes): the client cannot tell whether a write or delete happened.
    pub lose_answer_per_mille: u32,
    /// A delay of up to this many ms on top of the fixed one.
    pub max_jitter_ms: u64,
}

/// The faults a proxy injected so far, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Injected {
    pub throttled: usize,
    pub dropped: usize,
    pub answers_lost: usize,
}

impl Injected {
    pub fn total(&self) -> usize {
        self.throttled + self.dropped + self.answers_lost
    }
}

#[derive(Debug, Default)]
struct Shared {
    faults: Mutex<Option<Faults>>,
    rng: AtomicU64,
    throttled: AtomicUsize,
    dropped: AtomicUsize,
    answers_lost: AtomicUsize,
    delay_ms: AtomicU64,
    hang: Mutex<Vec<String>>,
    hung: AtomicUsize,
    /// Requests whose answer is lost on purpose: the parts of their request line, how many
    /// matching requests pass first, and how many more are lost.
    lose: Mutex<(Vec<String>, usize, usize)>,
    requests: AtomicUsize,
    stop: AtomicBool,
}

/// A running proxy; stopped when dropped.
pub struct SlowProxy {
    port: u16,
    shared: Arc<Shared>,
}

impl SlowProxy {
    /// Proxy to `upstream` (`http://host:port`), delaying each request by `delay`.
    pub fn start(upstream: &str, delay: Duration) -> SlowProxy {
        Self::start_for(upstream, delay, MAX_LIFETIME)
    }

    /// As [`SlowProxy::start`], stopping by itself after `lifetime` instead of [`MAX_LIFETIME`]
    /// (a soak longer than that).
    pub fn start_for(upstream: &str, delay: Duration, lifetime: Duration) -> SlowProxy {
        let upstream = upstream
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string();
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("proxy address").port();
        let shared = Arc::new(Shared::default());
        shared
            .delay_ms
            .store(delay.as_millis() as u64, Ordering::SeqCst);
        let s = shared.clone();
        std::thread::spawn(move || {
            let started = Instant::now();
            while !s.stop.load(Ordering::SeqCst) && started.elapsed() < lifetime {
                match listener.accept() {
                    Ok((client, _)) => {
                        let (s, upstream) = (s.clone(), upstream.clone());
                        std::thread::spawn(move || serve(client, &upstream, &s));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
            s.stop.store(true, Ordering::SeqCst);
        });
        SlowProxy { port, shared }
    }

    /// The endpoint to give clients instead of the server's.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Delay each request from now on by `delay`.
    pub fn set_delay(&self, delay: Duration) {
        self.shared
            .delay_ms
            .store(delay.as_millis() as u64, Ordering::SeqCst);
    }

    /// Hold every request whose request line (`METHOD /bucket/key?query HTTP/1.1`) contains
    /// all of `parts`: it never reaches the server, and its connection stays open until the
    /// hang is lifted or the proxy stops (then it is closed unanswered). No parts lift it.
    pub fn hang(&self, parts: &[&str]) {
        *self.shared.hang.lock().unwrap() = parts.iter().map(|p| p.to_string()).collect();
    }

    /// Lose the answers of the next `count` requests whose request line contains all of `parts`:
    /// each reaches the server, which acts on it, and the client's connection is closed
    /// unanswered (counted in [`Injected::answers_lost`]).
    pub fn lose_answers(&self, parts: &[&str], count: usize) {
        self.lose_answers_after(parts, 0, count);
    }

    /// As [`SlowProxy::lose_answers`], letting the first `skip` matching requests pass.
    pub fn lose_answers_after(&self, parts: &[&str], skip: usize, count: usize) {
        *self.shared.lose.lock().unwrap() =
            (parts.iter().map(|p| p.to_string()).collect(), skip, count);
    }

    /// Requests held right now.
    pub fn hung(&self) -> usize {
        self.shared.hung.load(Ordering::SeqCst)
    }

    /// Requests seen so far.
    pub fn requests(&self) -> usize {
        self.shared.requests.load(Ordering::SeqCst)
    }

    /// Inject `faults` from now on (`None`: none), drawn from a generator seeded with `seed`.
    pub fn set_faults(&self, faults: Option<Faults>, seed: u64) {
        self.shared.rng.store(seed | 1, Ordering::SeqCst);
        *self.shared.faults.lock().unwrap() = faults;
    }

    /// The faults injected so far.
    pub fn injected(&self) -> Injected {
        Injected {
            throttled: self.shared.throttled.load(Ordering::SeqCst),
            dropped: self.shared.dropped.load(Ordering::SeqCst),
            answers_lost: self.shared.answers_lost.load(Ordering::SeqCst),
        }
    }
}

/// What to do with one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Pass,
    Throttle,
    Drop,
    LoseAnswer,
}

/// The next number of the shared xorshift generator.
fn next_random(s: &Shared) -> u64 {
    let mut x = s.rng.load(Ordering::SeqCst);
    loop {
        let mut n = x;
        n ^= n << 13;
        n ^= n >> 7;
        n ^= n << 17;
        match s
            .rng
            .compare_exchange(x, n, Ordering::SeqCst, Ordering::SeqCst)
        {
            Ok(_) => return n,
            Err(now) => x = now,
        }
    }
}

/// Draw the fate of one request, and its extra delay.
fn draw(s: &Shared) -> (Fate, u64) {
    let Some(f) = *s.faults.lock().unwrap() else {
        return (Fate::Pass, 0);
    };
    let roll = (next_random(s) % 1000) as u32;
    let jitter = match f.max_jitter_ms {
        0 => 0,
        m => next_random(s) % (m + 1),
    };
    let fate = if roll < f.throttle_per_mille {
        Fate::Throttle
    } else if roll < f.throttle_per_mille + f.drop_per_mille {
        Fate::Drop
    } else if roll < f.throttle_per_mille + f.drop_per_mille + f.lose_answer_per_mille {
        Fate::LoseAnswer
    } else {
        Fate::Pass
    };
    (fate, jitter)
}

impl Drop for SlowProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
    }
}

/// Read the request head (through the blank line): the head and what followed it.
fn read_head(client: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            return Some((head, buf[end + 4..].to_vec()));
        }
        match client.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
        if buf.len() > 1 << 20 {
            return None;
        }
    }
}

fn serve(mut client: TcpStream, upstream: &str, s: &Shared) {
    client.set_nonblocking(false).ok();
    client.set_read_timeout(Some(Duration::from_secs(120))).ok();
    let Some((head, rest)) = read_head(&mut client) else {
        return;
    };
    s.requests.fetch_add(1, Ordering::SeqCst);
    let line = head.lines().next().unwrap_or_default().to_string();
    let held = |s: &Shared| {
        let parts = s.hang.lock().unwrap();
        !parts.is_empty() && parts.iter().all(|p| line.contains(p.as_str()))
    };
    if held(s) {
        s.hung.fetch_add(1, Ordering::SeqCst);
        while held(s) && !s.stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(20));
        }
        s.hung.fetch_sub(1, Ordering::SeqCst);
        let _ = client.shutdown(Shutdown::Both);
        return;
    }
    let (mut fate, jitter) = draw(s);
    {
        let mut lose = s.lose.lock().unwrap();
        let (parts, skip, left) = &mut *lose;
        if *left > 0 && !parts.is_empty() && parts.iter().all(|p| line.contains(p.as_str())) {
            if *skip > 0 {
                *skip -= 1;
            } else {
                *left -= 1;
                fate = Fate::LoseAnswer;
            }
        }
    }
    std::thread::sleep(Duration::from_millis(
        s.delay_ms.load(Ordering::SeqCst) + jitter,
    ));
    match fate {
        Fate::Throttle => {
            s.throttled.fetch_add(1, Ordering::SeqCst);
            let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>";
            let _ = write!(
                client,
                "HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = client.shutdown(Shutdown::Both);
            return;
        }
        Fate::Drop => {
            s.dropped.fetch_add(1, Ordering::SeqCst);
            let _ = client.shutdown(Shutdown::Both);
            return;
        }
        Fate::Pass | Fate::LoseAnswer => {}
    }
    let Ok(mut server) = TcpStream::connect(upstream) else {
        return;
    };
    // One request per connection, so that the next one comes through `accept` again.
    let mut out = String::new();
    for (i, l) in head.lines().enumerate() {
        if i > 0 && l.to_ascii_lowercase().starts_with("connection:") {
            continue;
        }
        out.push_str(l);
        out.push_str("\r\n");
    }
    out.push_str("Connection: close\r\n\r\n");
    if server.write_all(out.as_bytes()).is_err() || server.write_all(&rest).is_err() {
        return;
    }
    // The rest of the body, client to server, while the response goes back.
    let (Ok(mut from_client), Ok(mut to_server)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let upload = std::thread::spawn(move || {
        let _ = std::io::copy(&mut from_client, &mut to_server);
    });
    if fate == Fate::LoseAnswer {
        // The server gets the whole request and acts on it; its answer goes nowhere.
        s.answers_lost.fetch_add(1, Ordering::SeqCst);
        let _ = std::io::copy(&mut server, &mut std::io::sink());
        let _ = client.shutdown(Shutdown::Both);
        let _ = upload.join();
        return;
    }
    let _ = std::io::copy(&mut server, &mut client);
    let _ = client.shutdown(Shutdown::Both);
    let _ = server.shutdown(Shutdown::Both);
    let _ = upload.join();
}
