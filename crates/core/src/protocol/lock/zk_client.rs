//! A minimal ZooKeeper client: one session over one TCP connection, speaking the parts of the
//! ZooKeeper wire protocol (jute encoding) that a lock recipe needs: create (optionally
//! ephemeral and sequential), delete, exists, get-children, pings to keep the session alive,
//! and close.
//!
//! Why not a crate: the well-kept Rust clients bring a second async runtime stack with them,
//! and a lock needs seven request kinds. The client does not reconnect: a lock holder that
//! loses its connection cannot know whether its ephemeral node survived, so the session is
//! treated as lost and the lock with it ([`ZkClient::is_alive`]).
//!
//! Encoding (big-endian throughout): every packet is a 4-byte length then the payload; a
//! request payload is `xid: i32, type: i32` then the request record; a reply payload is
//! `xid: i32, zxid: i64, err: i32` then the reply record. Strings and buffers are an `i32`
//! length (-1 for null) then bytes; vectors are an `i32` count then the elements.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tracing::{debug, warn};

/// Request types (ZooDefs.OpCode).
mod op {
    pub const CREATE: i32 = 1;
    pub const DELETE: i32 = 2;
    pub const EXISTS: i32 = 3;
    pub const GET_CHILDREN: i32 = 8;
    pub const PING: i32 = 11;
    pub const CLOSE: i32 = -11;
}

/// Reply xids the server uses for things that are not replies to our requests.
const XID_WATCH_EVENT: i32 = -1;
const XID_PING: i32 = -2;

/// Largest packet accepted from the server (ZooKeeper's own `jute.maxbuffer` default).
const MAX_PACKET: usize = 0xfffff + 1024;

/// How a node is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateMode {
    /// A persistent node.
    Persistent,
    /// A node that goes away with the session, with a sequence number appended to its name.
    EphemeralSequential,
}

impl CreateMode {
    fn flags(self) -> i32 {
        match self {
            CreateMode::Persistent => 0,
            CreateMode::EphemeralSequential => 3,
        }
    }
}

/// A ZooKeeper error, by the server's code or the connection's state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ZkError {
    /// The node does not exist (`NONODE`, -101).
    #[error("no node `{0}`")]
    NoNode(String),
    /// The node exists already (`NODEEXISTS`, -110).
    #[error("node `{0}` exists")]
    NodeExists(String),
    /// Any other error code the server returned.
    #[error("the server answered error code {code} for `{path}`")]
    Server {
        /// The path of the request.
        path: String,
        /// ZooKeeper's `KeeperException.Code`.
        code: i32,
    },
    /// No server of the connect string could be reached, or the session was refused.
    #[error("cannot connect to ZooKeeper `{connect}`: {reason}")]
    Connect {
        /// The connect string.
        connect: String,
        /// Why.
        reason: String,
    },
    /// The connection broke; the session (and any ephemeral node of it) is to be considered gone.
    #[error("the ZooKeeper session was lost: {0}")]
    SessionLost(String),
    /// The server sent something this client does not understand.
    #[error("malformed reply from ZooKeeper: {0}")]
    Protocol(String),
}

/// A jute record writer.
#[derive(Default)]
struct Out(Vec<u8>);

impl Out {
    fn i32(&mut self, v: i32) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn i64(&mut self, v: i64) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn bool(&mut self, v: bool) -> &mut Self {
        self.0.push(u8::from(v));
        self
    }
    fn buffer(&mut self, v: &[u8]) -> &mut Self {
        self.i32(v.len() as i32);
        self.0.extend_from_slice(v);
        self
    }
    fn string(&mut self, v: &str) -> &mut Self {
        self.buffer(v.as_bytes())
    }
}

/// A jute record reader.
struct In<'a>(&'a [u8]);

impl In<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], ZkError> {
        if self.0.len() < n {
            return Err(ZkError::Protocol(format!(
                "wanted {n} more bytes, {} left",
                self.0.len()
            )));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn i32(&mut self) -> Result<i32, ZkError> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn i64(&mut self) -> Result<i64, ZkError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }
    fn buffer(&mut self) -> Result<Vec<u8>, ZkError> {
        let n = self.i32()?;
        if n < 0 {
            return Ok(Vec::new());
        }
        Ok(self.take(n as usize)?.to_vec())
    }
    fn string(&mut self) -> Result<String, ZkError> {
        String::from_utf8(self.buffer()?)
            .map_err(|e| ZkError::Protocol(format!("a string is not UTF-8: {e}")))
    }
}

/// Where a reply (its record bytes, or the server's error code) goes.
type ReplyTx = oneshot::Sender<Result<Vec<u8>, i32>>;

/// One request on its way to the connection task.
struct Call {
    op: i32,
    body: Vec<u8>,
    reply: ReplyTx,
}

/// Shared session state.
#[derive(Debug)]
struct Session {
    alive: AtomicBool,
    /// Milliseconds since `epoch` when the server was last heard from.
    last_heard_ms: AtomicU64,
    epoch: Instant,
    timeout: Duration,
    id: i64,
}

/// A ZooKeeper session.
#[derive(Debug, Clone)]
pub struct ZkClient {
    calls: mpsc::Sender<CallBox>,
    session: Arc<Session>,
    connect: Arc<str>,
}

/// `Call` behind a box, so `ZkClient` is `Debug` without exposing the channel payload.
struct CallBox(Call);

impl std::fmt::Debug for CallBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Call(op {})", self.0.op)
    }
}

impl ZkClient {
    /// Connect to the first reachable server of `connect` (`host:port[,host:port…]`) and open a
    /// session with the given timeout (the server may lower or raise it within its bounds).
    pub async fn connect(
        connect: &str,
        session_timeout: Duration,
        connection_timeout: Duration,
    ) -> Result<Self, ZkError> {
        let err = |reason: String| ZkError::Connect {
            connect: connect.to_string(),
            reason,
        };
        if connect.contains('/') {
            return Err(err(
                "a chroot suffix in the connect string is not supported; put it in the lock's base path".into(),
            ));
        }
        let mut last = String::from("the connect string names no server");
        for host in connect.split(',').map(str::trim).filter(|h| !h.is_empty()) {
            match tokio::time::timeout(connection_timeout, open_session(host, session_timeout))
                .await
            {
                Ok(Ok((stream, negotiated, id))) => {
                    let session = Arc::new(Session {
                        alive: AtomicBool::new(true),
                        last_heard_ms: AtomicU64::new(0),
                        epoch: Instant::now(),
                        timeout: negotiated,
                        id,
                    });
                    let (tx, rx) = mpsc::channel(16);
                    tokio::spawn(run(stream, rx, session.clone()));
                    debug!(
                        server = host,
                        session = format!("{id:#x}"),
                        timeout_ms = negotiated.as_millis() as u64,
                        "ZooKeeper session opened"
                    );
                    return Ok(Self {
                        calls: tx,
                        session,
                        connect: connect.into(),
                    });
                }
                Ok(Err(e)) => last = format!("{host}: {e}"),
                Err(_) => last = format!("{host}: no session within {connection_timeout:?}"),
            }
        }
        Err(err(last))
    }

    /// The session id the server gave.
    pub fn session_id(&self) -> i64 {
        self.session.id
    }

    /// The connect string.
    pub fn connect_string(&self) -> &str {
        &self.connect
    }

    /// Whether the session can still be trusted: the connection is up and the server answered
    /// within two thirds of the session timeout (after that, the server may expire the session
    /// and delete its ephemeral nodes at any moment).
    pub fn is_alive(&self) -> bool {
        if !self.session.alive.load(Ordering::Acquire) {
            return false;
        }
        let heard = Duration::from_millis(self.session.last_heard_ms.load(Ordering::Acquire));
        let silent = self.session.epoch.elapsed().saturating_sub(heard);
        silent < self.session.timeout * 2 / 3
    }

    async fn call(&self, op: i32, path: &str, body: Vec<u8>) -> Result<Vec<u8>, ZkError> {
        let (tx, rx) = oneshot::channel();
        self.calls
            .send(CallBox(Call {
                op,
                body,
                reply: tx,
            }))
            .await
            .map_err(|_| ZkError::SessionLost("the connection is closed".into()))?;
        match rx.await {
            Ok(Ok(body)) => Ok(body),
            Ok(Err(code)) => Err(match code {
                -101 => ZkError::NoNode(path.to_string()),
                -110 => ZkError::NodeExists(path.to_string()),
                -112 => ZkError::SessionLost("the session expired".into()),
                code => ZkError::Server {
                    path: path.to_string(),
                    code,
                },
            }),
            Err(_) => Err(ZkError::SessionLost(
                "the connection closed before the reply".into(),
            )),
        }
    }

    /// Create `path` with `data`, open to everyone (`world:anyone`, all permissions, as
    /// Curator's default ACL provider does). Returns the created path (with the sequence
    /// number for sequential nodes).
    pub async fn create(
        &self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
    ) -> Result<String, ZkError> {
        let mut out = Out::default();
        out.string(path).buffer(data);
        // One ACL: perms ALL (31), id world:anyone.
        out.i32(1).i32(31).string("world").string("anyone");
        out.i32(mode.flags());
        let reply = self.call(op::CREATE, path, out.0).await?;
        decode_created(&reply)
    }

    /// Create every missing ancestor of `path` (not `path` itself) as a persistent node.
    pub async fn create_parents(&self, path: &str) -> Result<(), ZkError> {
        let mut at = String::new();
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        for seg in segments.iter().take(segments.len().saturating_sub(1)) {
            at.push('/');
            at.push_str(seg);
            match self.create(&at, &[], CreateMode::Persistent).await {
                Ok(_) | Err(ZkError::NodeExists(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Delete `path` whatever its version.
    pub async fn delete(&self, path: &str) -> Result<(), ZkError> {
        let mut out = Out::default();
        out.string(path).i32(-1);
        self.call(op::DELETE, path, out.0).await.map(|_| ())
    }

    /// Whether `path` exists.
    pub async fn exists(&self, path: &str) -> Result<bool, ZkError> {
        let mut out = Out::default();
        out.string(path).bool(false);
        match self.call(op::EXISTS, path, out.0).await {
            Ok(_) => Ok(true),
            Err(ZkError::NoNode(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The names of the children of `path`.
    pub async fn children(&self, path: &str) -> Result<Vec<String>, ZkError> {
        let mut out = Out::default();
        out.string(path).bool(false);
        let reply = self.call(op::GET_CHILDREN, path, out.0).await?;
        decode_children(&reply)
    }

    /// Close the session; the server deletes its ephemeral nodes at once.
    pub async fn close(&self) -> Result<(), ZkError> {
        let r = self.call(op::CLOSE, "", Vec::new()).await.map(|_| ());
        self.session.alive.store(false, Ordering::Release);
        r
    }
}

/// The created path of a create reply.
fn decode_created(reply: &[u8]) -> Result<String, ZkError> {
    In(reply).string()
}

/// The child names of a get-children reply: a count, then that many strings. The count is the
/// server's word: room is made for no more names than the reply can hold (4 bytes each at
/// least), so a bad count is an error when the bytes run out, not an allocation.
fn decode_children(reply: &[u8]) -> Result<Vec<String>, ZkError> {
    let mut r = In(reply);
    let n = r.i32()?;
    let mut names = Vec::with_capacity((n.max(0) as usize).min(r.0.len() / 4));
    for _ in 0..n.max(0) {
        names.push(r.string()?);
    }
    Ok(names)
}

/// A reply packet: its header and the reply record.
#[derive(Debug, PartialEq, Eq)]
struct Reply<'a> {
    xid: i32,
    zxid: i64,
    err: i32,
    body: &'a [u8],
}

/// Split a reply packet into its header (`xid`, `zxid`, `err`) and record.
fn decode_reply(packet: &[u8]) -> Result<Reply<'_>, ZkError> {
    let mut r = In(packet);
    let (xid, zxid, err) = (r.i32()?, r.i64()?, r.i32()?);
    Ok(Reply {
        xid,
        zxid,
        err,
        body: r.0,
    })
}

/// The session handshake's reply: the negotiated timeout and the session id. A timeout of 0 or
/// less means the server refused the session.
fn decode_session(reply: &[u8]) -> Result<(Duration, i64), String> {
    let mut r = In(reply);
    let _version = r.i32().map_err(|e| e.to_string())?;
    let timeout = r.i32().map_err(|e| e.to_string())?;
    let id = r.i64().map_err(|e| e.to_string())?;
    if timeout <= 0 {
        return Err("the server refused the session".into());
    }
    Ok((Duration::from_millis(timeout as u64), id))
}

async fn read_packet(stream: &mut (impl AsyncReadExt + Unpin)) -> std::io::Result<Vec<u8>> {
    let len = stream.read_i32().await?;
    if len < 0 || len as usize > MAX_PACKET {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("packet length {len}"),
        ));
    }
    let mut buf = vec![0u8; len as usize];
    stream.read_exact(&mut buf).await?;
    Ok(buf)
}

async fn write_packet(
    stream: &mut (impl AsyncWriteExt + Unpin),
    payload: &[u8],
) -> std::io::Result<()> {
    let mut frame = Vec::with_capacity(payload.len() + 4);
    frame.extend_from_slice(&(payload.len() as i32).to_be_bytes());
    frame.extend_from_slice(payload);
    stream.write_all(&frame).await
}

/// TCP connect and the session handshake.
async fn open_session(
    host: &str,
    session_timeout: Duration,
) -> Result<(TcpStream, Duration, i64), String> {
    let mut stream = TcpStream::connect(host).await.map_err(|e| e.to_string())?;
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    let mut req = Out::default();
    req.i32(0) // protocol version
        .i64(0) // last zxid seen
        .i32(session_timeout.as_millis().min(i32::MAX as u128) as i32)
        .i64(0) // session id: a new session
        .buffer(&[0u8; 16])
        .bool(false); // read-only not allowed
    write_packet(&mut stream, &req.0)
        .await
        .map_err(|e| e.to_string())?;
    let reply = read_packet(&mut stream).await.map_err(|e| e.to_string())?;
    let (timeout, id) = decode_session(&reply)?;
    Ok((stream, timeout, id))
}

/// The connection task: sends requests in order, pings when idle, hands replies back in order
/// (ZooKeeper answers a session's requests in the order it received them).
async fn run(stream: TcpStream, mut calls: mpsc::Receiver<CallBox>, session: Arc<Session>) {
    let (mut rd, mut wr) = stream.into_split();
    let mut pending: VecDeque<(i32, ReplyTx)> = VecDeque::new();
    let mut xid: i32 = 0;
    let mut closing = false;
    let ping_every = (session.timeout / 3).max(Duration::from_millis(100));
    let mut ping = tokio::time::interval(ping_every);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let heard = |s: &Session| {
        s.last_heard_ms
            .store(s.epoch.elapsed().as_millis() as u64, Ordering::Release)
    };
    heard(&session);
    let (packets_tx, mut packets) = mpsc::channel::<std::io::Result<Vec<u8>>>(16);
    let reader = tokio::spawn(async move {
        loop {
            let p = read_packet(&mut rd).await;
            let stop = p.is_err();
            if packets_tx.send(p).await.is_err() || stop {
                break;
            }
        }
    });
    let reason: String = loop {
        tokio::select! {
            call = calls.recv() => {
                let Some(CallBox(call)) = call else {
                    break "the client was dropped".into();
                };
                xid = xid.wrapping_add(1).max(1);
                let mut out = Out::default();
                out.i32(xid).i32(call.op);
                out.0.extend_from_slice(&call.body);
                if let Err(e) = write_packet(&mut wr, &out.0).await {
                    let _ = call.reply.send(Err(-4));
                    break format!("write failed: {e}");
                }
                closing |= call.op == op::CLOSE;
                pending.push_back((xid, call.reply));
            }
            _ = ping.tick() => {
                let mut out = Out::default();
                out.i32(XID_PING).i32(op::PING);
                if let Err(e) = write_packet(&mut wr, &out.0).await {
                    break format!("ping failed: {e}");
                }
            }
            packet = packets.recv() => {
                let packet = match packet {
                    Some(Ok(p)) => p,
                    // The server hangs up after answering our close.
                    _ if closing && pending.is_empty() => break "closed".into(),
                    Some(Err(e)) => break format!("read failed: {e}"),
                    None => break "the connection closed".into(),
                };
                heard(&session);
                let Ok(Reply { xid: rx, err, body, .. }) = decode_reply(&packet) else {
                    break "a reply header was cut short".into();
                };
                match rx {
                    XID_PING | XID_WATCH_EVENT => continue,
                    _ => {}
                }
                match pending.pop_front() {
                    Some((want, reply)) if want == rx => {
                        let body = body.to_vec();
                        let _ = reply.send(if err == 0 { Ok(body) } else { Err(err) });
                    }
                    other => {
                        break format!("reply xid {rx} does not match the request sent ({:?})", other.map(|o| o.0));
                    }
                }
            }
        }
    };
    session.alive.store(false, Ordering::Release);
    reader.abort();
    for (_, reply) in pending.drain(..) {
        let _ = reply.send(Err(-4));
    }
    if reason != "the client was dropped" && reason != "closed" {
        warn!(session = format!("{:#x}", session.id), %reason, "ZooKeeper connection ended");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jute_strings_and_buffers_round_trip() {
        let mut out = Out::default();
        out.i32(-7)
            .i64(1 << 40)
            .string("/hudi/t")
            .buffer(&[])
            .bool(true);
        let mut r = In(&out.0);
        assert_eq!(r.i32().unwrap(), -7);
        assert_eq!(r.i64().unwrap(), 1 << 40);
        assert_eq!(r.string().unwrap(), "/hudi/t");
        assert_eq!(r.buffer().unwrap(), Vec::<u8>::new());
        assert_eq!(r.take(1).unwrap(), &[1]);
        assert!(r.i32().is_err(), "reading past the end is an error");
    }

    #[test]
    fn a_null_buffer_reads_as_empty() {
        let mut out = Out::default();
        out.i32(-1);
        assert_eq!(In(&out.0).buffer().unwrap(), Vec::<u8>::new());
    }

    #[tokio::test]
    async fn connecting_to_a_closed_port_is_a_connect_error() {
        // Bind then drop a listener to find a port nobody listens on.
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let err = ZkClient::connect(
            &format!("127.0.0.1:{port}"),
            Duration::from_secs(10),
            Duration::from_secs(2),
        )
        .await
        .unwrap_err();
        assert!(matches!(err, ZkError::Connect { .. }), "{err}");
        assert!(err.to_string().contains(&port.to_string()), "{err}");
    }

    #[tokio::test]
    async fn a_chroot_in_the_connect_string_is_refused() {
        let err = ZkClient::connect(
            "127.0.0.1:2181/hudi",
            Duration::from_secs(10),
            Duration::from_secs(1),
        )
        .await
        .unwrap_err();
        assert!(err.to_string().contains("chroot"), "{err}");
    }
}

#[cfg(test)]
mod fuzz_tests {
    //! Replies from a ZooKeeper server (or anything listening on its port) decoded without
    //! panicking, and with nothing allocated beyond the packet's size.

    use proptest::prelude::*;

    use super::*;
    use crate::fuzz::{self, largest_allocation};

    fn children_reply(names: &[&str]) -> Vec<u8> {
        let mut out = Out::default();
        out.i32(names.len() as i32);
        for n in names {
            out.string(n);
        }
        out.0
    }

    fn reply_packet(xid: i32, err: i32, body: &[u8]) -> Vec<u8> {
        let mut out = Out::default();
        out.i32(xid).i64(0x1234).i32(err);
        out.0.extend_from_slice(body);
        out.0
    }

    fn session_reply() -> Vec<u8> {
        let mut out = Out::default();
        out.i32(0)
            .i32(20_000)
            .i64(0x0100_0000_0000_0042)
            .buffer(&[9; 16]);
        out.0
    }

    /// Every decoder on `bytes`, with the allocation check.
    fn decode_all(bytes: &[u8]) {
        let ((), largest) = largest_allocation(|| {
            if let Ok(names) = decode_children(bytes) {
                let mut names = names;
                names.sort_by(|a, b| {
                    super::super::zookeeper::sort_key(a).cmp(super::super::zookeeper::sort_key(b))
                });
            }
            let _ = decode_created(bytes);
            let _ = decode_reply(bytes);
            let _ = decode_session(bytes);
        });
        assert!(
            largest <= 8 * bytes.len() + 4096,
            "{} bytes of reply allocated {largest} bytes at once",
            bytes.len()
        );
    }

    #[test]
    fn fuzz_a_children_reply_declaring_two_billion_names_is_an_error_not_an_allocation() {
        let mut reply = Out::default();
        reply.i32(i32::MAX).string("_c_1-lock-0000000001");
        let (result, largest) = largest_allocation(|| decode_children(&reply.0));
        assert!(matches!(result, Err(ZkError::Protocol(_))), "{result:?}");
        assert!(largest < 4096, "allocated {largest} bytes at once");
    }

    #[test]
    fn fuzz_valid_replies_decode() {
        assert_eq!(
            decode_children(&children_reply(&["a-lock-1", "b"])).unwrap(),
            ["a-lock-1", "b"]
        );
        assert_eq!(
            decode_children(&children_reply(&[])).unwrap(),
            Vec::<String>::new()
        );
        let packet = reply_packet(7, -101, b"rest");
        assert_eq!(
            decode_reply(&packet).unwrap(),
            Reply {
                xid: 7,
                zxid: 0x1234,
                err: -101,
                body: b"rest"
            }
        );
        assert_eq!(
            decode_session(&session_reply()).unwrap(),
            (Duration::from_secs(20), 0x0100_0000_0000_0042)
        );
        let mut refused = session_reply();
        refused[4..8].copy_from_slice(&0i32.to_be_bytes());
        assert!(decode_session(&refused).is_err());
    }

    #[tokio::test]
    async fn fuzz_a_packet_declaring_more_than_the_limit_is_refused_before_reading() {
        let mut stream: &[u8] = &[0x7f, 0xff, 0xff, 0xff, 1, 2, 3];
        let err = read_packet(&mut stream).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
        let mut negative: &[u8] = &[0xff, 0xff, 0xff, 0xfe];
        assert!(read_packet(&mut negative).await.is_err());
    }

    proptest! {
        #![proptest_config(fuzz::config(1024))]

        #[test]
        fn fuzz_zookeeper_replies_of_arbitrary_bytes(bytes in fuzz::bytes(128)) {
            decode_all(&bytes);
        }

        #[test]
        fn fuzz_damaged_zookeeper_replies(
            bytes in fuzz::mutated_one_of(vec![
                children_reply(&["_c_0c6f-lock-0000000001", "_c_1d2e-lock-0000000000"]),
                reply_packet(3, 0, &children_reply(&["x"])),
                reply_packet(-2, 0, &[]),
                session_reply(),
                {
                    let mut out = Out::default();
                    out.string("/hudi/t/_c_0c6f-lock-0000000001");
                    out.0
                },
            ])
        ) {
            decode_all(&bytes);
        }

        #[test]
        fn fuzz_packets_read_from_a_stream_are_bounded(bytes in fuzz::mutated(reply_packet(1, 0, &children_reply(&["a"])))) {
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let (packets, largest) = largest_allocation(|| {
                rt.block_on(async {
                    let mut framed = Vec::new();
                    framed.extend_from_slice(&(bytes.len() as i32).to_be_bytes());
                    framed.extend_from_slice(&bytes);
                    let mut stream: &[u8] = &bytes;
                    let mut packets = Vec::new();
                    // The mutated bytes as a stream of frames, and the same bytes framed.
                    while let Ok(p) = read_packet(&mut stream).await {
                        packets.push(p);
                    }
                    let mut stream: &[u8] = &framed;
                    if let Ok(p) = read_packet(&mut stream).await {
                        packets.push(p);
                    }
                    packets
                })
            });
            prop_assert!(largest <= MAX_PACKET + 4096, "allocated {largest}");
            for p in &packets {
                decode_all(p);
            }
        }
    }
}
