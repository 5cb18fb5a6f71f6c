//! Serving HTTP connections the reactor hands over, with bounds a client
//! cannot stretch: no one can hold the control API (or the hub's memory
//! and descriptors) by opening connections and sending slowly.
//!
//! - At most [`MAX_CONNECTIONS`] connections are served at once; one more
//!   gets `503` with a JSON error and is closed at once.
//! - A request's head must arrive within [`HEADER_TIMEOUT`] of the
//!   connection's start or of the previous response (hyper's header read
//!   timeout): a slowloris or an idle keep-alive connection is closed.
//! - Reading the body and answering must take less than
//!   [`REQUEST_TIMEOUT`] (`408` otherwise), so a slow body holds nothing
//!   for long. Streams that outlive their request — a recording file's
//!   download, the monitor's WebSocket — are not cut: the timeout ends when
//!   the response starts.
//! - TLS connections (`[hub] tls_cert`) arrive with their handshake done
//!   by the reactor and are served through [`TlsIo`] under the same bounds.

use std::sync::Arc;
use std::time::Duration;

use axum::{Extension, Router};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};
use tracing::warn;

use super::tls_io::TlsIo;
use crate::session::peer_user::PeerOrigin;
use crate::transport::http::HttpConnection;

/// A request's extension when it came over TLS.
#[derive(Clone, Copy, Debug)]
pub struct OverTls;

/// HTTP connections served at once.
pub const MAX_CONNECTIONS: usize = 64;
/// Time for a request's head (request line and headers) to arrive.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Time to read a request's body and produce its response.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The answer to a connection over [`MAX_CONNECTIONS`].
fn busy() -> Vec<u8> {
    let body = format!(
        "{{\"error\":\"the hub serves {MAX_CONNECTIONS} HTTP connections at once; close one or try again later\"}}\n"
    );
    let head = "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close";
    format!("{head}\r\ncontent-length: {}\r\n\r\n{body}", body.len()).into_bytes()
}

/// Serve the connections arriving on `incoming` with `app` until `stop`.
pub async fn serve(app: Router, mut incoming: mpsc::UnboundedReceiver<HttpConnection>, stop: oneshot::Receiver<()>) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut stop = std::pin::pin!(stop);
    loop {
        let connection = tokio::select! {
            connection = incoming.recv() => match connection {
                Some(connection) => connection,
                None => return,
            },
            _ = &mut stop => return,
        };
        let (stream, tls) = match connection {
            HttpConnection::Plain(stream) => (stream, None),
            HttpConnection::Tls { tcp, session, read_ahead, certified } => {
                (tcp, Some((session, read_ahead, certified)))
            }
        };
        if stream.set_nonblocking(true).is_err() {
            continue;
        }
        let Ok(mut stream) = tokio::net::TcpStream::from_std(stream) else { continue };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_default();
            warn!(peer, "refusing an HTTP connection: {MAX_CONNECTIONS} are open");
            match tls {
                // Its own protocol: the answer goes out through TLS.
                Some((session, read_ahead, _)) => {
                    let mut io = TlsIo::new(stream, session, read_ahead);
                    tokio::spawn(async move {
                        let _ = tokio::time::timeout(HEADER_TIMEOUT, io.write_all(&busy())).await;
                        let _ = tokio::time::timeout(HEADER_TIMEOUT, io.shutdown()).await;
                    });
                }
                None => {
                    tokio::spawn(async move {
                        let _ = tokio::time::timeout(HEADER_TIMEOUT, stream.write_all(&busy())).await;
                    });
                }
            }
            continue;
        };
        // Who is at the other end decides a request without a token
        // (`credentials.rs`); the authorize layer finds it here.
        let origin = match &tls {
            Some((_, _, true)) => PeerOrigin::Certified,
            _ => PeerOrigin::tcp(stream.local_addr(), stream.peer_addr()),
        };
        match tls {
            None => spawn_connection(&app, origin, None, TokioIo::new(stream), slot),
            Some((session, read_ahead, _)) => {
                let io = TokioIo::new(TlsIo::new(stream, session, read_ahead));
                spawn_connection(&app, origin, Some(OverTls), io, slot);
            }
        }
    }
}

/// Serve one connection with `app` on its own task; `slot` is its place
/// among the [`MAX_CONNECTIONS`].
fn spawn_connection<I>(
    app: &Router,
    origin: PeerOrigin,
    tls: Option<OverTls>,
    io: TokioIo<I>,
    slot: OwnedSemaphorePermit,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let app = app.clone().layer(Extension(origin));
    let app = match tls {
        Some(tls) => app.layer(Extension(tls)),
        None => app,
    };
    let service = TowerToHyperService::new(app);
    tokio::spawn(async move {
        let connection = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_TIMEOUT)
            .serve_connection(io, service)
            .with_upgrades();
        // A failed connection (a reset, a timeout) is that client's
        // business; the server goes on.
        let _ = connection.await;
        drop(slot);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_busy_answer_is_a_complete_response() {
        let text = String::from_utf8(busy()).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        let length: usize = head.lines().find_map(|l| l.strip_prefix("content-length: ")).unwrap().parse().unwrap();
        assert_eq!(body.len(), length);
        assert!(body.contains(&MAX_CONNECTIONS.to_string()));
        serde_json::from_str::<serde_json::Value>(body).unwrap();
    }
}
