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

use std::sync::Arc;
use std::time::Duration;

use axum::{Extension, Router};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, oneshot, Semaphore};
use tracing::warn;

use crate::peer_user::PeerOrigin;

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
pub async fn serve(
    app: Router,
    mut incoming: mpsc::UnboundedReceiver<std::net::TcpStream>,
    stop: oneshot::Receiver<()>,
) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut stop = std::pin::pin!(stop);
    loop {
        let stream = tokio::select! {
            stream = incoming.recv() => match stream {
                Some(stream) => stream,
                None => return,
            },
            _ = &mut stop => return,
        };
        if stream.set_nonblocking(true).is_err() {
            continue;
        }
        let Ok(mut stream) = tokio::net::TcpStream::from_std(stream) else { continue };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_default();
            warn!(peer, "refusing an HTTP connection: {MAX_CONNECTIONS} are open");
            tokio::spawn(async move {
                let _ = tokio::time::timeout(HEADER_TIMEOUT, stream.write_all(&busy())).await;
            });
            continue;
        };
        // Who is at the other end decides a request without a token
        // (`credentials.rs`); the authorize layer finds it here.
        let origin = PeerOrigin::tcp(stream.local_addr(), stream.peer_addr());
        let service = TowerToHyperService::new(app.clone().layer(Extension(origin)));
        tokio::spawn(async move {
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades();
            // A failed connection (a reset, a timeout) is that client's
            // business; the server goes on.
            let _ = connection.await;
            drop(slot);
        });
    }
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
