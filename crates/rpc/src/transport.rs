//! The client's transport: for plaintext, hyper's HTTP/2 client straight on a TCP connection (no
//! tower buffer task between the caller and the connection, so a call is one hop from the
//! caller's `block_on` to the connection task and back), its writes coalesced into one system call
//! per round of the runtime; for TLS, tonic's `Channel`.
//!
//! hyper's HTTP/2 client writes a unary call as two flushes: the HEADERS frame first, then (once
//! the stream is open and has send capacity, one task wake later) the DATA frame. On loopback
//! each flush is a system call that also runs the receiver's network stack, and the server wakes
//! for the HEADERS only to wait again for the DATA. [`CoalescingStream`] keeps written bytes and
//! defers the first flush of a batch by one poll of the connection task (it wakes the task, so the
//! bytes go out on its next poll, after the request body's task added its frame): both frames
//! leave in one `send`. This relies on h2's connection flushing at the end of every poll (and
//! draining on shutdown), which it does; a TLS handshake does not, so TLS connections do not use
//! it.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tonic::codegen::Service;
use tonic::transport::{Channel, Uri};

/// Above this many buffered bytes, writes go out at once rather than waiting for a flush.
const HIGH_WATER: usize = 64 << 10;

/// A TCP stream whose writes are buffered and flushed as one system call (see the module docs).
/// Only for an HTTP/2 connection's own task.
pub struct CoalescingStream {
    inner: TcpStream,
    buf: Vec<u8>,
    /// Bytes of `buf` already written.
    sent: usize,
    /// The current batch's flush was deferred once already.
    deferred: bool,
}

impl CoalescingStream {
    pub fn new(inner: TcpStream) -> Self {
        Self { inner, buf: Vec::with_capacity(8 << 10), sent: 0, deferred: false }
    }

    /// Writes what is buffered; `Ready(Ok)` once all of it is out.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.buf.len() {
            match Pin::new(&mut self.inner).poll_write(cx, &self.buf[self.sent..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => self.sent += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        self.buf.clear();
        self.sent = 0;
        Poll::Ready(Ok(()))
    }

    fn buffer(&mut self, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        if self.buf.len() >= HIGH_WATER {
            match self.poll_drain(cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                // Nothing taken: the caller retries when the socket can take more.
                Poll::Pending => return Poll::Pending,
            }
        }
        let mut n = 0;
        for b in bufs {
            self.buf.extend_from_slice(b);
            n += b.len();
        }
        Poll::Ready(Ok(n))
    }
}

impl AsyncRead for CoalescingStream {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for CoalescingStream {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.buffer(cx, &[io::IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.buffer(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.sent == this.buf.len() {
            this.deferred = false;
            return Pin::new(&mut this.inner).poll_flush(cx);
        }
        if !this.deferred {
            // Let the tasks already woken (the request body's) add their frames first.
            this.deferred = true;
            cx.waker().wake_by_ref();
            return Poll::Ready(Ok(()));
        }
        match this.poll_drain(cx) {
            Poll::Ready(Ok(())) => {
                this.deferred = false;
                Pin::new(&mut this.inner).poll_flush(cx)
            }
            other => other,
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.poll_drain(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut self.inner).poll_shutdown(cx),
            other => other,
        }
    }
}

/// Connects to an `http://host:port` URI over TCP (no-delay).
async fn connect(uri: &Uri) -> io::Result<TokioIo<CoalescingStream>> {
    let host = uri.host().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no host"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = uri.port_u16().unwrap_or(80);
    let stream = TcpStream::connect((host, port)).await?;
    stream.set_nodelay(true)?;
    Ok(TokioIo::new(CoalescingStream::new(stream)))
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What the generated client sends its calls through.
#[derive(Clone)]
pub enum Transport {
    /// Plaintext: hyper's HTTP/2 client on one connection, with the per-call deadline.
    Direct { send: SendRequest<tonic::body::Body>, origin: Uri, timeout: std::time::Duration },
    /// TLS: tonic's `Channel`.
    Channel(Channel),
}

impl Transport {
    /// Connects to `origin` (`http://host:port`) over plaintext HTTP/2 and spawns the connection's
    /// task on the current runtime.
    pub async fn direct(origin: Uri, timeout: std::time::Duration) -> Result<Self, BoxError> {
        let io = connect(&origin).await?;
        let (send, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .handshake(io)
            .await?;
        tokio::spawn(async move {
            // Ends when the connection closes; calls on it then fail with the reason.
            let _ = conn.await;
        });
        Ok(Transport::Direct { send, origin, timeout })
    }
}

type ResponseFuture = Pin<Box<dyn Future<Output = Result<http::Response<tonic::body::Body>, BoxError>> + Send>>;

impl Service<http::Request<tonic::body::Body>> for Transport {
    type Response = http::Response<tonic::body::Body>;
    type Error = BoxError;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        match self {
            Transport::Direct { send, .. } => send.poll_ready(cx).map_err(Into::into),
            Transport::Channel(c) => Service::poll_ready(c, cx).map_err(Into::into),
        }
    }

    fn call(&mut self, mut request: http::Request<tonic::body::Body>) -> Self::Future {
        match self {
            Transport::Direct { send, origin, timeout } => {
                // The generated client sends the path only; HTTP/2 wants scheme and authority.
                let mut parts = request.uri().clone().into_parts();
                parts.scheme = origin.scheme().cloned();
                parts.authority = origin.authority().cloned();
                match Uri::from_parts(parts) {
                    Ok(uri) => *request.uri_mut() = uri,
                    Err(e) => return Box::pin(std::future::ready(Err(e.into()))),
                }
                let response = send.send_request(request);
                let timeout = *timeout;
                Box::pin(async move {
                    match tokio::time::timeout(timeout, response).await {
                        Ok(Ok(r)) => Ok(r.map(tonic::body::Body::new)),
                        Ok(Err(e)) => Err(e.into()),
                        Err(_) => Err(tonic::TimeoutExpired(()).into()),
                    }
                })
            }
            Transport::Channel(c) => {
                let f = Service::call(c, request);
                Box::pin(async move { f.await.map_err(Into::into) })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::poll_fn;
    use tokio::io::AsyncWriteExt;

    #[test]
    fn a_flush_is_deferred_once_then_everything_goes_out_together() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let (client, server) = tokio::join!(TcpStream::connect(listener.local_addr().unwrap()), listener.accept());
            let (mut s, (peer, _)) = (CoalescingStream::new(client.unwrap()), server.unwrap());
            s.write_all(b"HEADERS").await.unwrap();
            // First flush: held back one poll, nothing on the wire yet.
            poll_fn(|cx| Pin::new(&mut s).poll_flush(cx)).await.unwrap();
            let mut buf = [0u8; 32];
            assert_eq!(peer.try_read(&mut buf).unwrap_err().kind(), io::ErrorKind::WouldBlock);
            s.write_all(b"DATA").await.unwrap();
            // Second flush: both writes leave together.
            poll_fn(|cx| Pin::new(&mut s).poll_flush(cx)).await.unwrap();
            peer.readable().await.unwrap();
            let mut got = Vec::new();
            while got.len() < 11 {
                peer.readable().await.unwrap();
                match peer.try_read(&mut buf) {
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    Err(e) => panic!("{e}"),
                }
            }
            assert_eq!(got, b"HEADERSDATA");
            // Shutdown drains anything still held.
            s.write_all(b"!").await.unwrap();
            s.shutdown().await.unwrap();
        });
    }
}
