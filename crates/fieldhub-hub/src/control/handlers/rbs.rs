//! `GET /api/v1/rbs` and `POST /api/v1/rbs`: the hub's rest-bus simulations
//! (`transport::rbs`, `docs/rest-bus.md`) — every simulated message with its
//! signals' values (counters, checksums and ramped signals as last sent),
//! and changes by name: a signal's value or a ramp to one, a message
//! stopped or sent again, a counter stuck, a checksum wrong. Read from and
//! written to the messages' shared state, never through the bus; a value
//! reaches the bus with the message's next cycle. `POST /api/v1/rbs/sims`
//! starts a simulation from a DBC's text while the hub runs (`fieldhub
//! rbs`), `DELETE /api/v1/rbs/sims/{sim}` stops one.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use fieldhub_bus::access::PortRight;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::config::{RbsChecksum, RbsConfig, RbsCounter};
use crate::control::api::error;
use crate::control::state::ApiState;
use crate::session::credentials::Access;
use crate::transport::rbs::{Prepared, Protection, RunningSim, SimMessage};
use fieldhub_rbs::protect::Algorithm;

/// A change to one simulated message, or (`node`, `enabled` only) to every
/// message of one simulated node.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Change {
    /// Which simulation (`[[rbs]]` table, from 0).
    #[serde(default)]
    sim: usize,
    message: Option<String>,
    node: Option<String>,
    /// Signal values by name, physical (factor and offset applied).
    #[serde(default)]
    set: BTreeMap<String, f64>,
    /// Ramps by signal name: to a physical value over a bus time.
    #[serde(default)]
    ramp: BTreeMap<String, RampTo>,
    enabled: Option<bool>,
    counter_stuck: Option<bool>,
    checksum_wrong: Option<bool>,
}

/// A ramp of one signal.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RampTo {
    /// The physical value it ends at.
    to: f64,
    /// How long it takes, in milliseconds of bus time.
    ms: f64,
}

/// A checksum's algorithm as `[[rbs.checksum]]` and `fieldhub rbs --checksum` name it.
fn algorithm_json(algorithm: Algorithm) -> Value {
    match algorithm {
        Algorithm::Xor => json!({ "algorithm": "xor" }),
        Algorithm::SaeJ1850 => json!({ "algorithm": "crc8-sae-j1850" }),
        Algorithm::Crc8H2F => json!({ "algorithm": "crc8h2f" }),
        Algorithm::Polynomial { poly, init, xorout, reflect } => {
            json!({ "algorithm": "crc8", "poly": poly, "init": init, "xorout": xorout, "reflect": reflect })
        }
    }
}

/// The message's alive counter and checksum rules: (counter, checksum), null where it has none.
fn protections_json(sim: &RunningSim, message: &str) -> (Value, Value) {
    let (mut counter, mut checksum) = (Value::Null, Value::Null);
    for protection in sim.protections.iter().filter(|p| p.message() == message) {
        match protection {
            Protection::Counter { signal, min, max, .. } => {
                counter = json!({ "signal": signal, "min": min, "max": max });
            }
            Protection::Checksum { signal, algorithm, data_id, .. } => {
                checksum = algorithm_json(*algorithm);
                checksum["signal"] = json!(signal);
                checksum["data_id"] = json!(data_id);
            }
        }
    }
    (counter, checksum)
}

fn message_json(sim: &RunningSim, message: &SimMessage) -> Value {
    let s = &message.state;
    let signals: serde_json::Map<String, Value> =
        s.signals.iter().map(|signal| (signal.name.clone(), json!(signal.value()))).collect();
    let ramps: serde_json::Map<String, Value> = s
        .signals
        .iter()
        .filter_map(|signal| {
            let (to, ramp_ns) = signal.ramp()?;
            Some((signal.name.clone(), json!({ "to": to, "ms": ramp_ns as f64 / 1e6 })))
        })
        .collect();
    let (counter, checksum) = protections_json(sim, &s.name);
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
        "counter": counter,
        "checksum": checksum,
        "sent": s.sent(),
        "signals": signals,
        "ramps": ramps,
    })
}

/// Every simulation, its messages in the DBC's order.
pub async fn list(State(state): State<Arc<ApiState>>) -> Json<Value> {
    Json(Value::Array(state.rbs.sims().iter().map(|(number, sim)| sim_json(*number, sim)).collect()))
}

fn sim_json(number: usize, sim: &RunningSim) -> Value {
    json!({
        "sim": number,
        "channel": sim.channel,
        "dbc": sim.dbc.display().to_string(),
        "origin_ns": sim.origin_ns(),
        "messages": sim.messages.iter().map(|m| message_json(sim, m)).collect::<Vec<_>>(),
    })
}

/// Apply a change; the message as it is now, or why nothing changed.
pub async fn change(State(state): State<Arc<ApiState>>, Json(change): Json<Change>) -> Response {
    let rest_bus = &state.rbs;
    let Some(sim) = rest_bus.sim(change.sim) else {
        let running: Vec<String> = rest_bus.sims().iter().map(|(n, _)| n.to_string()).collect();
        let running = if running.is_empty() { "none".to_owned() } else { running.join(", ") };
        let text = format!("no rest-bus simulation {} runs; running: {running}", change.sim);
        return error(StatusCode::NOT_FOUND, text);
    };
    let name = match (&change.message, &change.node) {
        (Some(name), None) => name,
        (None, Some(node)) => return node_change(&sim, &change, node),
        _ => {
            let text = "give message (a change to one message) or node (enabled for every message of a node)";
            return error(StatusCode::BAD_REQUEST, text.into());
        }
    };
    let Some(message) = sim.message(name) else {
        let text = format!(
            "simulation {} sends no message '{name}'; it sends: {}",
            change.sim,
            sim.messages.iter().map(|m| m.state.name.as_str()).collect::<Vec<_>>().join(", ")
        );
        return error(StatusCode::NOT_FOUND, text);
    };
    // Every value is checked before any is stored: a refused change changes nothing.
    let s = &message.state;
    let checked = change
        .set
        .iter()
        .try_for_each(|(name, &value)| s.check(name, value))
        .and_then(|()| change.ramp.iter().try_for_each(|(name, ramp)| s.check_ramp(name, ramp.to, ramp.ms)));
    if let Err(e) = checked {
        return error(StatusCode::BAD_REQUEST, e.to_string());
    }
    if let Some(name) = change.set.keys().find(|name| change.ramp.contains_key(*name)) {
        return error(StatusCode::BAD_REQUEST, format!("signal {name} is both set and ramped; give it one of the two"));
    }
    // Checked above.
    for (name, &value) in &change.set {
        let _ = s.set(name, value);
    }
    for (name, ramp) in &change.ramp {
        let _ = s.ramp(name, ramp.to, ramp.ms);
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
    Json(message_json(&sim, message)).into_response()
}

/// Stop or start every message of a simulated node.
fn node_change(sim: &RunningSim, change: &Change, node: &str) -> Response {
    let faults = change.counter_stuck.is_some() || change.checksum_wrong.is_some();
    let Some(on) = change.enabled.filter(|_| change.set.is_empty() && change.ramp.is_empty() && !faults) else {
        let text =
            "a change to a node takes enabled (true or false) and nothing else; signals and faults are a message's";
        return error(StatusCode::BAD_REQUEST, text.into());
    };
    let messages: Vec<&SimMessage> = sim.messages.iter().filter(|m| m.state.node == node).collect();
    if messages.is_empty() {
        let mut nodes: Vec<&str> = Vec::new();
        for message in &sim.messages {
            if !nodes.contains(&message.state.node.as_str()) {
                nodes.push(&message.state.node);
            }
        }
        let text = format!("simulation {} simulates no node '{node}'; it simulates: {}", change.sim, nodes.join(", "));
        return error(StatusCode::NOT_FOUND, text);
    }
    for message in &messages {
        message.state.enable(on);
    }
    let listed: Vec<Value> = messages.into_iter().map(|m| message_json(sim, m)).collect();
    Json(json!({ "node": node, "enabled": on, "messages": listed })).into_response()
}

/// A simulation to start while the hub runs (`fieldhub rbs`): an `[[rbs]]`
/// table with the DBC file's text in place of its path.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewSim {
    /// What to call the DBC in listings (its file name).
    name: String,
    /// The DBC file's text.
    dbc: String,
    channel: String,
    #[serde(default)]
    nodes: Vec<String>,
    #[serde(default)]
    except: Vec<String>,
    default_cycle_ms: Option<u64>,
    #[serde(default)]
    counter: Vec<RbsCounter>,
    #[serde(default)]
    checksum: Vec<RbsChecksum>,
}

/// Start a simulation: 201 with it as GET lists it once its nodes are
/// attached, or why not (a DBC that does not parse names its line).
pub async fn add(
    State(state): State<Arc<ApiState>>,
    Extension(access): Extension<Access>,
    Json(new): Json<NewSim>,
) -> Response {
    // The simulated nodes send on the channel: whoever starts them must be allowed to.
    if !matches!(access.port_right(&new.channel), PortRight::Both | PortRight::Write) {
        let text = format!(
            "{} may not send on channel '{}', so it may not simulate nodes there",
            access.describe(),
            new.channel
        );
        return error(StatusCode::FORBIDDEN, text);
    }
    let config = RbsConfig {
        dbc: new.name.into(),
        channel: new.channel,
        nodes: new.nodes,
        except: new.except,
        default_cycle_ms: new.default_cycle_ms,
        counter: new.counter,
        checksum: new.checksum,
    };
    let prepared = match Prepared::from_bytes(&config, new.dbc.as_bytes()) {
        Ok(prepared) => prepared,
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("{}: {e}", config.dbc.display())),
    };
    let rest_bus = Arc::clone(&state.rbs);
    // Attaching waits for the bus's answers: off the server's thread.
    let added = tokio::task::spawn_blocking(move || {
        let number = rest_bus.add(prepared)?;
        rest_bus.sim(number).map(|sim| sim_json(number, &sim)).ok_or_else(|| "removed as it started".to_owned())
    })
    .await;
    match added {
        Ok(Ok(sim)) => (StatusCode::CREATED, Json(sim)).into_response(),
        Ok(Err(why)) => error(StatusCode::UNPROCESSABLE_ENTITY, why),
        Err(_) => error(StatusCode::SERVICE_UNAVAILABLE, "the hub is stopping".into()),
    }
}

/// Stop a simulation: its nodes' ports close.
pub async fn remove(State(state): State<Arc<ApiState>>, Path(number): Path<usize>) -> Response {
    match state.rbs.remove(number) {
        true => Json(json!({ "removed": number })).into_response(),
        false => error(StatusCode::NOT_FOUND, format!("no rest-bus simulation {number} runs")),
    }
}
