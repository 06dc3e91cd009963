//! The HTTP server's own accept loop (hyper): the connection limit, the header timeout, and the
//! deadline of a response the client does not take.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::daemon::config::{self, ServerConfig};

/// Serve `app` on `listener` until `shutdown` within the server's limits: at most
/// `server.max_connections` connections at once (more wait in the listen backlog until one
/// closes); request headers within `server.client_timeout`, which is also how long a kept-alive
/// connection waits for its next request; a response the client takes nothing of for
/// `server.client_timeout` ends its connection. At shutdown, open connections finish the
/// request they serve, then close.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    limits: ConnectionLimits,
    shutdown: CancellationToken,
) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let connections = Arc::new(Semaphore::new(limits.max_connections));
    let client_timeout = limits.client_timeout;
    let open = tokio_util::task::TaskTracker::new();
    loop {
        let slot = tokio::select! {
            s = connections.clone().acquire_owned() => match s {
                Ok(s) => s,
                Err(_) => break,
            },
            _ = shutdown.cancelled() => break,
        };
        let (stream, peer) = tokio::select! {
            a = listener.accept() => match a {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors, or a connection reset before it was accepted.
                    warn!(error = %e, "could not accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = shutdown.cancelled() => break,
        };
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let io = TokioIo::new(WriteDeadline::new(stream, client_timeout));
        let shutdown = shutdown.clone();
        open.spawn(async move {
            let _slot = slot;
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(client_timeout);
            let conn = builder.serve_connection(io, service);
            tokio::pin!(conn);
            let ended = tokio::select! {
                r = conn.as_mut() => Some(r),
                _ = shutdown.cancelled() => None,
            };
            let ended = match ended {
                Some(r) => r,
                None => {
                    conn.as_mut().graceful_shutdown();
                    conn.await
                }
            };
            if let Err(e) = ended {
                debug!(peer = %peer, error = %e, "connection ended");
            }
        });
    }
    open.close();
    open.wait().await;
}

/// A listener's connection limits.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Connections open at once.
    pub max_connections: usize,
    /// How long a client may take to send its request headers, or to take part of a response.
    pub client_timeout: Duration,
}

impl ConnectionLimits {
    /// The API listener's (`server.max_connections`, `server.client_timeout`).
    pub fn api(server: &ServerConfig) -> Self {
        Self {
            max_connections: server.max_connections,
            client_timeout: server.client_timeout,
        }
    }

    /// The probe listener's.
    pub fn probes() -> Self {
        Self {
            max_connections: config::PROBE_MAX_CONNECTIONS,
            client_timeout: config::PROBE_CLIENT_TIMEOUT,
        }
    }
}

/// A connection whose write fails once it has made no progress for `limit`: a client that does
/// not read its response does not keep its connection (and its slot of
/// `server.max_connections`).
struct WriteDeadline<S> {
    inner: S,
    limit: Duration,
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S> WriteDeadline<S> {
    fn new(inner: S, limit: Duration) -> Self {
        Self {
            inner,
            limit,
            stalled: None,
        }
    }

    /// The inner write gave `r`: progress resets the deadline; no progress past it is an error.
    fn judge<T>(
        &mut self,
        cx: &mut Context<'_>,
        r: Poll<std::io::Result<T>>,
    ) -> Poll<std::io::Result<T>> {
        if r.is_ready() {
            self.stalled = None;
            return r;
        }
        let limit = self.limit;
        let sleep = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match std::future::Future::poll(sleep.as_mut(), cx) {
            Poll::Ready(()) => Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the client took no response data for server.client_timeout",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteDeadline<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.judge(cx, r)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.judge(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_flush(cx);
        this.judge(cx, r)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_response_the_client_does_not_take_ends_its_connection() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let limit = Duration::from_secs(5);
        // A client that takes 16 bytes every 4 s keeps its connection.
        let (server, mut client) = tokio::io::duplex(16);
        let mut w = WriteDeadline::new(server, limit);
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            let mut buf = [0u8; 16];
            loop {
                tokio::time::sleep(Duration::from_secs(4)).await;
                match client.read(&mut buf).await {
                    Ok(0) | Err(_) => return got.len(),
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
        });
        w.write_all(&[1u8; 64]).await.unwrap();
        drop(w);
        assert_eq!(reader.await.unwrap(), 64);
        // One that takes nothing loses it.
        let (server, _client) = tokio::io::duplex(16);
        let mut w = WriteDeadline::new(server, limit);
        let err = w.write_all(&[1u8; 64]).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
    }
}
