//! `GET /api/v1/monitor`: the web monitor's live trace over a WebSocket.
//!
//! The handler opens a monitor on the requested channels (a tap the bus
//! offers every frame, [`fieldhub_bus::monitor`]) and then, on the control
//! server's thread, drains its feed every [`TICK`] into a
//! [`TraceBatcher`] and sends the batch: at most 25 messages a second
//! however busy the bus is, its frames decoded with the channels' DBC files
//! ([`super::dbc`]), with the names of the ports that sent them (asked of
//! the bus once per port, which remembers ports that left). The first
//! message names the channels.
//!
//! Invariants: only this hub's own pages (or non-browser clients) may open
//! it, and a hub without a token only under an IP address or `localhost`
//! (checked for every request of the API, `origin.rs`); an `[[access]]`
//! sees only the channels in its `read` list; the bus never waits
//! for the page (the feed is a bounded, lossy queue; a tick takes at most
//! [`MONITOR_QUEUE`] frames); the
//! WebSocket's end (closed by the page, or a failed send) drops the feed,
//! which closes the tap.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Extension;
use fieldhub_dbc::Database;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::control::api::error;
use crate::control::state::{ask_value, ApiState};
use crate::control::trace::TraceBatcher;
use crate::session::credentials::Access;
use fieldhub_bus::monitor::{monitor, MonitorFeed, MONITOR_QUEUE};
use fieldhub_bus::request::ControlRequest;

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
    Extension(access): Extension<Access>,
    Query(query): Query<MonitorQuery>,
    ws: WebSocketUpgrade,
) -> Response {
    let mut channels: Vec<String> =
        query.channels.split(',').map(str::trim).filter(|c| !c.is_empty()).map(str::to_owned).collect();
    // "Every channel" for an access that reads only some is those.
    if channels.is_empty() && !access.may_read(None) {
        channels = access.listed_reads();
        if channels.is_empty() {
            let text =
                format!("{} may read no channel (its read = []), so there is nothing to monitor", access.describe());
            return error(StatusCode::FORBIDDEN, text);
        }
    }
    if let Some(channel) = channels.iter().find(|c| !access.may_read(Some(c))) {
        let text = format!("{} may not read channel '{channel}' (not in its read list)", access.describe());
        return error(StatusCode::FORBIDDEN, text);
    }
    let (tap, feed) = monitor();
    let opened = match ask_value(&state, ControlRequest::Monitor { channels, tap }).await {
        Ok(opened) => opened,
        Err(response) => return response,
    };
    ws.on_upgrade(move |socket| stream(socket, state, feed, opened))
}

/// The DBC of each monitored channel that has one, by channel id.
fn decoders(state: &ApiState, opened: &Value) -> HashMap<u16, Arc<Database>> {
    let channels = opened["channels"].as_array().map(Vec::as_slice).unwrap_or_default();
    channels.iter().filter_map(|c| Some((c["id"].as_u64()? as u16, state.dbc.get(c["name"].as_str()?)?))).collect()
}

/// Send batches until the page goes away.
pub(crate) async fn stream(mut socket: WebSocket, state: Arc<ApiState>, feed: MonitorFeed, opened: Value) {
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
                let unnamed = batcher.unnamed();
                if !unnamed.is_empty() {
                    // Without an answer the page names the port as its polls do.
                    if let Ok(names) = ask_value(&state, ControlRequest::PortNames { ids: unnamed }).await {
                        batcher.name(names);
                    }
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
