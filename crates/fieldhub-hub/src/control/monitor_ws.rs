//! `GET /api/v1/monitor`: the web monitor's live trace over a WebSocket.
//!
//! The handler opens a monitor on the requested channels (a tap the bus
//! offers every frame, [`crate::monitor`]) and then, on the control
//! server's thread, drains its feed every [`TICK`] into a
//! [`TraceBatcher`] and sends the batch: at most 25 messages a second
//! however busy the bus is, its frames decoded with the channels' DBC files
//! ([`super::dbc`]). The first message names the channels.
//!
//! Invariants: only this hub's own pages (or non-browser clients) may open
//! it ([`same_origin`]), and a hub without a token only under an IP address
//! or `localhost` ([`addressed_by_ip`], against DNS rebinding); the bus never waits for the page (the feed is a bounded,
//! lossy queue; a tick takes at most [`MONITOR_QUEUE`] frames); the
//! WebSocket's end (closed by the page, or a failed send) drops the feed,
//! which closes the tap.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::Response;
use fieldhub_dbc::Database;
use serde::Deserialize;
use serde_json::{json, Value};

use super::http::{ask_value, error, ApiState};
use super::trace::TraceBatcher;
use super::ControlRequest;
use crate::monitor::{monitor, MonitorFeed, MONITOR_QUEUE};

/// How often a batch goes to the page.
pub const TICK: Duration = Duration::from_millis(40);
/// Every how many ticks a batch carries the overwrite rows (4 a second).
const ROW_TICKS: u32 = 6;

/// The query of `GET /api/v1/monitor`.
#[derive(Deserialize)]
pub struct MonitorQuery {
    /// Comma-separated channel names; all channels when absent or empty.
    /// (`?token=`, for browsers, which cannot set a WebSocket's headers, is
    /// checked by the API's authorization layer.)
    #[serde(default)]
    channels: String,
}

pub async fn open(
    State(state): State<Arc<ApiState>>,
    Query(query): Query<MonitorQuery>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    if !same_origin(&headers) {
        let text = "the monitor's WebSocket is open only to pages the hub serves (the Origin is another site)";
        return error(StatusCode::FORBIDDEN, text.into());
    }
    if state.token.is_none() && !addressed_by_ip(&headers) {
        let text = "a hub without a token serves its monitor only to pages opened by IP address \
                    (http://127.0.0.1:PORT/ui) or as localhost; start the hub with --token to use a host name";
        return error(StatusCode::FORBIDDEN, text.into());
    }
    let channels: Vec<String> =
        query.channels.split(',').map(str::trim).filter(|c| !c.is_empty()).map(str::to_owned).collect();
    let (tap, feed) = monitor();
    let opened = match ask_value(&state, ControlRequest::Monitor { channels, tap }).await {
        Ok(opened) => opened,
        Err(response) => return response,
    };
    ws.on_upgrade(move |socket| stream(socket, state, feed, opened))
}

/// Whether a browser opened the WebSocket from a page of this hub: no
/// `Origin` (not a browser), or one naming the host the request went to.
/// WebSockets are not held to the same-origin policy, so without this any
/// web site the user visits could read the bus through a loopback hub.
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else { return true };
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let origin = origin.to_str().ok().and_then(|o| o.strip_prefix("http://").or_else(|| o.strip_prefix("https://")));
    matches!((origin, host), (Some(origin), Some(host)) if origin == host)
}

/// Whether the request names the hub by IP address or as `localhost`. A
/// hub without a token listens on loopback only; a page that reaches it
/// under another host name came through DNS rebinding (a site whose name
/// now resolves to 127.0.0.1), which the Origin check cannot tell apart.
fn addressed_by_ip(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else { return false };
    let name = match host.strip_prefix('[') {
        Some(bracketed) => bracketed.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name == "localhost" || name.parse::<std::net::IpAddr>().is_ok()
}

/// The DBC of each monitored channel that has one, by channel id.
fn decoders(state: &ApiState, opened: &Value) -> HashMap<u16, Arc<Database>> {
    let channels = opened["channels"].as_array().map(Vec::as_slice).unwrap_or_default();
    channels.iter().filter_map(|c| Some((c["id"].as_u64()? as u16, state.dbc.get(c["name"].as_str()?)?))).collect()
}

/// Send batches until the page goes away.
async fn stream(mut socket: WebSocket, state: Arc<ApiState>, feed: MonitorFeed, opened: Value) {
    let hello = json!({ "channels": opened["channels"], "tick_ms": TICK.as_millis() as u64 });
    if socket.send(Message::text(hello.to_string())).await.is_err() {
        return;
    }
    let mut batcher = TraceBatcher::default();
    let mut ticker = tokio::time::interval(TICK);
    let mut ticks: u32 = 0;
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => {
                for _ in 0..MONITOR_QUEUE {
                    let Some(tapped) = feed.try_take() else { break };
                    batcher.take(tapped);
                }
                ticks = ticks.wrapping_add(1);
                let rows = ticks % ROW_TICKS == 1;
                if let Some(batch) = batcher.batch(feed.dropped(), rows, &decoders(&state, &opened)) {
                    if socket.send(Message::text(batch.to_string())).await.is_err() {
                        return;
                    }
                }
            }
            incoming = socket.recv() => match incoming {
                // The page sends nothing but pings and its close.
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
                Some(Ok(_)) => {}
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(origin: Option<&str>, host: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, host.parse().unwrap());
        if let Some(origin) = origin {
            headers.insert(header::ORIGIN, origin.parse().unwrap());
        }
        headers
    }

    #[test]
    fn only_the_hubs_own_pages_may_open_the_monitor() {
        assert!(same_origin(&headers(Some("http://127.0.0.1:29536"), "127.0.0.1:29536")));
        assert!(same_origin(&headers(None, "127.0.0.1:29536")), "a tool, not a browser");
        assert!(!same_origin(&headers(Some("https://evil.example"), "127.0.0.1:29536")));
        assert!(!same_origin(&headers(Some("http://127.0.0.1:8080"), "127.0.0.1:29536")));
        assert!(!same_origin(&headers(Some("null"), "127.0.0.1:29536")));
    }

    #[test]
    fn without_a_token_only_addresses_and_localhost_reach_the_monitor() {
        for host in ["127.0.0.1:29536", "[::1]:29536", "localhost:29536", "127.0.1.1:80", "10.0.0.5:29536"] {
            assert!(addressed_by_ip(&headers(None, host)), "{host}");
        }
        for host in ["evil.example:29536", "rebind.attacker.test", "localhost.evil.example:1"] {
            assert!(!addressed_by_ip(&headers(None, host)), "{host}");
        }
    }
}
