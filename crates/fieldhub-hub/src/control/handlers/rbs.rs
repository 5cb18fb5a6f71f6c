//! `GET /api/v1/rbs` and `POST /api/v1/rbs`: the hub's rest-bus simulations
//! (`transport::rbs`, `docs/rest-bus.md`) — every simulated message with its
//! signals' values, and changes by name: a signal's value, a message
//! stopped or sent again, a counter stuck, a checksum wrong. Read from and
//! written to the messages' shared state, never through the bus; a value
//! reaches the bus with the message's next cycle.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::control::api::error;
use crate::control::state::ApiState;
use crate::transport::rbs::{RestBus, SimMessage};

/// A change to one simulated message.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Change {
    /// Which simulation (`[[rbs]]` table, from 0).
    #[serde(default)]
    sim: usize,
    message: String,
    /// Signal values by name, physical (factor and offset applied).
    #[serde(default)]
    set: BTreeMap<String, f64>,
    enabled: Option<bool>,
    counter_stuck: Option<bool>,
    checksum_wrong: Option<bool>,
}

fn message_json(message: &SimMessage) -> Value {
    let s = &message.state;
    let signals: serde_json::Map<String, Value> =
        s.signals.iter().map(|signal| (signal.name.clone(), json!(signal.value()))).collect();
    json!({
        "name": s.name,
        "node": s.node,
        "id": s.id,
        "extended": s.extended,
        "cycle_ms": s.cycle_ms,
        "start_delay_ms": s.start_delay_ms,
        "enabled": s.enabled(),
        "counter_stuck": s.counter_stuck(),
        "checksum_wrong": s.checksum_wrong(),
        "sent": s.sent(),
        "signals": signals,
    })
}

/// Every simulation, its messages in the DBC's order.
pub async fn list(State(state): State<Arc<ApiState>>) -> Json<Value> {
    Json(sims_json(&state.rbs))
}

fn sims_json(rest_bus: &RestBus) -> Value {
    Value::Array(
        rest_bus
            .sims
            .iter()
            .enumerate()
            .map(|(index, sim)| {
                json!({
                    "sim": index,
                    "channel": sim.channel,
                    "dbc": sim.dbc.display().to_string(),
                    "messages": sim.messages.iter().map(message_json).collect::<Vec<_>>(),
                })
            })
            .collect(),
    )
}

/// Apply a change; the message as it is now, or why nothing changed.
pub async fn change(State(state): State<Arc<ApiState>>, Json(change): Json<Change>) -> Response {
    let rest_bus = &state.rbs;
    let Some(message) = rest_bus.message(change.sim, &change.message) else {
        let text = match rest_bus.sims.get(change.sim) {
            None => format!("no rest-bus simulation {} (this hub runs {})", change.sim, rest_bus.sims.len()),
            Some(sim) => format!(
                "simulation {} sends no message '{}'; it sends: {}",
                change.sim,
                change.message,
                sim.messages.iter().map(|m| m.state.name.as_str()).collect::<Vec<_>>().join(", ")
            ),
        };
        return error(StatusCode::NOT_FOUND, text);
    };
    // Every value is checked before any is stored: a refused change changes nothing.
    let s = &message.state;
    if let Err(e) = change.set.iter().try_for_each(|(name, &value)| s.check(name, value)) {
        return error(StatusCode::BAD_REQUEST, e.to_string());
    }
    for (name, &value) in &change.set {
        // Checked above.
        let _ = s.set(name, value);
    }
    if let Some(on) = change.enabled {
        s.enable(on);
    }
    if let Some(stuck) = change.counter_stuck {
        s.stick_counter(stuck);
    }
    if let Some(wrong) = change.checksum_wrong {
        s.corrupt_checksum(wrong);
    }
    if !change.set.is_empty() {
        rest_bus.trigger(message);
    }
    Json(message_json(message)).into_response()
}
