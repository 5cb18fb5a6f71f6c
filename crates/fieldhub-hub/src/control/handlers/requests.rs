//! The control API's requests that are one request to the bus each:
//! wiring (plug, unplug, cut, repair), channels, shorts, error states,
//! fault rules, virtual time, recordings, gateway routes and CAN↔LIN
//! gateways. Each reads its path and body, asks the bus, and answers what the
//! bus said.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::JsonRejection;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use fieldhub_bus::access::PortRight;
use fieldhub_bus::fault::{FaultSpec, FaultSpecError};
use fieldhub_bus::lin_gateway::GatewayConfig;
use fieldhub_bus::request::{ChannelUpdate, ControlRequest, ForcedState, RecordingSpec, TimeCommand};
use serde::Deserialize;

use crate::config::{ChannelConfig, RouteConfig};
use crate::control::api::{body, error};
use crate::control::state::{ask, ask_value, ApiState};
use crate::session::credentials::Access;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PlugBody {
    channel: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CutBody {
    ports: Vec<String>,
}

pub(crate) async fn plug(
    State(s): State<Arc<ApiState>>,
    Path(port): Path<String>,
    b: Result<Json<PlugBody>, JsonRejection>,
) -> Response {
    match body(b) {
        Ok(PlugBody { channel }) => ask(s, ControlRequest::Plug { port, channel }).await,
        Err(response) => *response,
    }
}

pub(crate) async fn unplug(State(s): State<Arc<ApiState>>, Path(port): Path<String>) -> Response {
    ask(s, ControlRequest::Unplug { port }).await
}

pub(crate) async fn cut(
    State(s): State<Arc<ApiState>>,
    Path(channel): Path<String>,
    b: Result<Json<CutBody>, JsonRejection>,
) -> Response {
    match body(b) {
        Ok(CutBody { ports }) => ask(s, ControlRequest::Cut { channel, ports }).await,
        Err(response) => *response,
    }
}

pub(crate) async fn repair(State(s): State<Arc<ApiState>>, Path(channel): Path<String>) -> Response {
    ask(s, ControlRequest::Repair { channel }).await
}

pub(crate) async fn create_channel(
    State(s): State<Arc<ApiState>>,
    b: Result<Json<ChannelConfig>, JsonRejection>,
) -> Response {
    match body(b) {
        Ok(config) => ask(s, ControlRequest::CreateChannel(Box::new(config))).await,
        Err(response) => *response,
    }
}

pub(crate) async fn update_channel(
    State(s): State<Arc<ApiState>>,
    Path(channel): Path<String>,
    b: Result<Json<ChannelUpdate>, JsonRejection>,
) -> Response {
    match body(b) {
        Ok(update) => ask(s, ControlRequest::UpdateChannel { channel, update }).await,
        Err(response) => *response,
    }
}

pub(crate) async fn remove_channel(State(s): State<Arc<ApiState>>, Path(channel): Path<String>) -> Response {
    ask(s, ControlRequest::RemoveChannel { channel }).await
}

pub(crate) async fn short(State(s): State<Arc<ApiState>>, Path(channel): Path<String>) -> Response {
    ask(s, ControlRequest::Short { channel }).await
}

/// `POST /api/v1/channels/{channel}/lin/sleep`: the LIN master's go-to-sleep command.
pub(crate) async fn lin_sleep(State(s): State<Arc<ApiState>>, Path(channel): Path<String>) -> Response {
    ask(s, ControlRequest::LinPower { channel, sleep: true }).await
}

/// `POST /api/v1/channels/{channel}/lin/wake`: the LIN master's wake-up pulse.
pub(crate) async fn lin_wake(State(s): State<Arc<ApiState>>, Path(channel): Path<String>) -> Response {
    ask(s, ControlRequest::LinPower { channel, sleep: false }).await
}

pub(crate) async fn unshort(State(s): State<Arc<ApiState>>, Path(channel): Path<String>) -> Response {
    ask(s, ControlRequest::Unshort { channel }).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StateBody {
    state: ForcedState,
}

pub(crate) async fn force_state(
    State(s): State<Arc<ApiState>>,
    Path(port): Path<String>,
    b: Result<Json<StateBody>, JsonRejection>,
) -> Response {
    match body(b) {
        Ok(StateBody { state }) => ask(s, ControlRequest::ForceState { port, state }).await,
        Err(response) => *response,
    }
}

pub(crate) async fn add_fault(State(s): State<Arc<ApiState>>, b: Result<Json<FaultSpec>, JsonRejection>) -> Response {
    match body(b) {
        // Checked here so a malformed rule never reaches the bus thread.
        Ok(spec) => match spec.check() {
            Ok(()) => ask(s, ControlRequest::AddFault(spec)).await,
            Err(e @ FaultSpecError::Malformed { .. }) => error(StatusCode::BAD_REQUEST, e.to_string()),
            Err(e @ FaultSpecError::OutOfRange { .. }) => error(StatusCode::UNPROCESSABLE_ENTITY, e.to_string()),
        },
        Err(response) => *response,
    }
}

pub(crate) async fn set_time(State(s): State<Arc<ApiState>>, b: Result<Json<TimeCommand>, JsonRejection>) -> Response {
    match body(b) {
        Ok(command) => ask(s, ControlRequest::SetTime(command)).await,
        Err(response) => *response,
    }
}

pub(crate) async fn remove_fault(State(s): State<Arc<ApiState>>, Path(id): Path<String>) -> Response {
    match id.parse::<u32>() {
        Ok(id) => ask(s, ControlRequest::RemoveFault { id }).await,
        Err(_) => error(StatusCode::BAD_REQUEST, format!("fault id '{id}' is not a number")),
    }
}

pub(crate) async fn start_recording(
    State(s): State<Arc<ApiState>>,
    b: Result<Json<RecordingSpec>, JsonRejection>,
) -> Response {
    match body(b) {
        Ok(spec) => match crate::recording::path::resolve(&s.recordings_dir, &spec.path) {
            Ok(file) => ask(s, ControlRequest::StartRecording { spec, file }).await,
            Err(e) => error(StatusCode::BAD_REQUEST, e.to_string()),
        },
        Err(response) => *response,
    }
}

/// Stopping tells the recording's writer and never holds the bus; the
/// answer waits (here, not on the bus) up to [`STOP_PATIENCE`] for the file
/// to be finished. Still `stopping` then (a slow disk): 202, and the
/// recording's `state` in `GET /api/v1/recordings` tells how it ends.
pub(crate) async fn stop_recording(State(s): State<Arc<ApiState>>, Path(id): Path<String>) -> Response {
    let Ok(id) = id.parse::<u32>() else {
        return error(StatusCode::BAD_REQUEST, format!("recording id '{id}' is not a number"));
    };
    let mut answer = match ask_value(&s, ControlRequest::StopRecording { id }).await {
        Ok(answer) => answer,
        Err(response) => return response,
    };
    let deadline = tokio::time::Instant::now() + STOP_PATIENCE;
    let mut pause = Duration::from_millis(1);
    while answer["state"] == "stopping" && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(50));
        let listed = match ask_value(&s, ControlRequest::Recordings).await {
            Ok(listed) => listed,
            Err(response) => return response,
        };
        match listed.as_array().and_then(|all| all.iter().find(|r| r["id"] == id)) {
            Some(now) => answer = now.clone(),
            None => break,
        }
    }
    let status = if answer["state"] == "stopping" { StatusCode::ACCEPTED } else { StatusCode::OK };
    (status, Json(answer)).into_response()
}

/// How long `DELETE /api/v1/recordings/{id}` waits for the file to be
/// finished before it answers `stopping`.
const STOP_PATIENCE: Duration = Duration::from_secs(2);

/// Add a route (`fieldhub ctl bridge`). Besides control, the caller's
/// access must read what the route reads and send what it sends, as for a
/// gateway: a route is a way to read a channel on another one.
pub(crate) async fn add_route(
    State(s): State<Arc<ApiState>>,
    Extension(access): Extension<Access>,
    b: Result<Json<RouteConfig>, JsonRejection>,
) -> Response {
    let spec = match body(b) {
        Ok(spec) => spec,
        Err(response) => return *response,
    };
    if let Some(refused) = carrying_refused(&access, &spec.from, &spec.to, "a route") {
        return refused;
    }
    ask(s, ControlRequest::AddRoute(spec)).await
}

/// Unless `access` may add `what`, which reads channel `from` and sends on
/// channel `to`: the `403` naming the right it lacks.
fn carrying_refused(access: &Access, from: &str, to: &str, what: &str) -> Option<Response> {
    let reads = matches!(access.port_right(from), PortRight::Both | PortRight::Read);
    let sends = matches!(access.port_right(to), PortRight::Both | PortRight::Write);
    if reads && sends {
        return None;
    }
    let (may_not, channel) = if reads { ("send on", to) } else { ("read", from) };
    let text = format!("{} may not {may_not} channel '{channel}', so it may not add {what} there", access.describe());
    Some(error(StatusCode::FORBIDDEN, text))
}

pub(crate) async fn remove_route(State(s): State<Arc<ApiState>>, Path(route): Path<String>) -> Response {
    match route.parse::<u32>() {
        Ok(id) => ask(s, ControlRequest::RemoveRoute { id }).await,
        Err(_) => error(StatusCode::BAD_REQUEST, format!("route '{route}' is not a number (a route's `route` field)")),
    }
}

/// Add a CAN↔LIN gateway. Besides control (every change needs it), the
/// caller's access must let it read what the gateway reads and send what it
/// sends, as starting simulated nodes needs sending on their channel.
pub(crate) async fn add_gateway(
    State(s): State<Arc<ApiState>>,
    Extension(access): Extension<Access>,
    b: Result<Json<GatewayConfig>, JsonRejection>,
) -> Response {
    let config = match body(b) {
        Ok(config) => config,
        Err(response) => return *response,
    };
    if let Some(refused) = carrying_refused(&access, &config.from, &config.to, "a gateway") {
        return refused;
    }
    ask(s, ControlRequest::AddGateway(config)).await
}

pub(crate) async fn remove_gateway(State(s): State<Arc<ApiState>>, Path(gateway): Path<String>) -> Response {
    match gateway.parse::<u32>() {
        Ok(id) => ask(s, ControlRequest::RemoveGateway { id }).await,
        Err(_) => error(
            StatusCode::BAD_REQUEST,
            format!("gateway '{gateway}' is not a number (a gateway's `gateway` field in `fieldhub ctl gateways`)"),
        ),
    }
}
