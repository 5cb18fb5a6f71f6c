//! Serving HTTP connections the reactor hands over, with bounds a client
//! cannot stretch: no one can hold the control API (or the hub's memory
//! and descriptors) by opening connections and sending slowly.
//!
//! - At most [`MAX_CONNECTIONS`](super::http_slots::MAX_CONNECTIONS) connections are served at once, at most
//!   [`MAX_PER_PEER`](super::http_slots::MAX_PER_PEER) of one peer once half
//!   are open (`http_slots.rs`): a new connection closes one that never presented
//!   credentials, or an idle one, to get its slot; only when every other
//!   connection is in an authorised request does it get `503` with a JSON
//!   error, and is closed at once. Refusals are logged once per peer per
//!   interval, with a count.
//! - A request refused for its credentials (`401`) closes its connection
//!   (`Connection: close`, `http.rs`): a client that has none cannot keep a
//!   slot by asking again and again.
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
use tokio::sync::{mpsc, oneshot};
use tracing::warn;

use super::http_slots::{HttpSlots, Refused, Slot};
use super::tls_io::TlsIo;
use crate::session::peer_key::{held_back, PeerKey, RefusalLog};
use crate::session::peer_user::PeerOrigin;
use crate::transport::http::HttpConnection;

/// A request's extension when it came over TLS.
#[derive(Clone, Copy, Debug)]
pub struct OverTls;

/// Time for a request's head (request line and headers) to arrive.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Time to read a request's body and produce its response.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The answer to a connection that gets no slot.
fn busy(refused: Refused) -> Vec<u8> {
    let body = format!("{}\n", serde_json::json!({ "error": refused.text() }));
    let head = "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close";
    format!("{head}\r\ncontent-length: {}\r\n\r\n{body}", body.len()).into_bytes()
}

/// Serve the connections arriving on `incoming` with `app` until `stop`.
pub async fn serve(app: Router, mut incoming: mpsc::UnboundedReceiver<HttpConnection>, stop: oneshot::Receiver<()>) {
    let slots = Arc::new(HttpSlots::default());
    let mut refusals = RefusalLog::default();
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
        let Ok(stream) = tokio::net::TcpStream::from_std(stream) else { continue };
        let tcp = PeerOrigin::tcp(stream.local_addr(), stream.peer_addr());
        let key = PeerKey::of(&tcp);
        let slot = match slots.admit(key) {
            Ok(slot) => slot,
            Err(refused) => {
                if let Some(held) = refusals.refused(key, std::time::Instant::now()) {
                    let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_default();
                    warn!(peer, from = %key, "refusing an HTTP connection: {}{}", refused.text(), held_back(held));
                }
                answer_busy(stream, tls.map(|(session, read_ahead, _)| (session, read_ahead)), refused);
                continue;
            }
        };
        // Who is at the other end decides a request without a token
        // (`credentials.rs`); the authorize layer finds it here.
        let origin = match &tls {
            Some((_, _, true)) => PeerOrigin::Certified,
            _ => tcp,
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

/// Answer `503` on a connection that got no slot, and close it.
fn answer_busy(
    mut stream: tokio::net::TcpStream,
    tls: Option<(Box<rustls::ServerConnection>, Vec<u8>)>,
    refused: Refused,
) {
    match tls {
        // Its own protocol: the answer goes out through TLS.
        Some((session, read_ahead)) => {
            let mut io = TlsIo::new(stream, session, read_ahead);
            tokio::spawn(async move {
                let _ = tokio::time::timeout(HEADER_TIMEOUT, io.write_all(&busy(refused))).await;
                let _ = tokio::time::timeout(HEADER_TIMEOUT, io.shutdown()).await;
            });
        }
        None => {
            tokio::spawn(async move {
                let _ = tokio::time::timeout(HEADER_TIMEOUT, stream.write_all(&busy(refused))).await;
            });
        }
    }
}

/// Serve one connection with `app` on its own task; `slot` is its place
/// among the [`MAX_CONNECTIONS`](super::http_slots::MAX_CONNECTIONS), and its end when another connection
/// needs it.
fn spawn_connection<I>(app: &Router, origin: PeerOrigin, tls: Option<OverTls>, io: TokioIo<I>, slot: Slot)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let app = app.clone().layer(Extension(origin)).layer(Extension(slot.handle()));
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
        // business; the server goes on. One closed to make room is dropped
        // here, which closes its socket.
        tokio::select! {
            _ = connection => {}
            () = slot.closed.notified() => {}
        }
        drop(slot);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_busy_answer_is_a_complete_response() {
        let text = String::from_utf8(busy(Refused::Full)).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        let length: usize = head.lines().find_map(|l| l.strip_prefix("content-length: ")).unwrap().parse().unwrap();
        assert_eq!(body.len(), length);
        assert!(body.contains(&super::super::http_slots::MAX_CONNECTIONS.to_string()));
        serde_json::from_str::<serde_json::Value>(body).unwrap();
    }
}
