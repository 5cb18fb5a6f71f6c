//! What every control API handler works with ([`ApiState`]: the bus's
//! inbox, the hub's credentials, the DBC files, the recordings directory)
//! and the one way a request reaches the bus ([`ask`], [`ask_value`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use fieldhub_bus::inbox::{Inbound, InboxSender};
use fieldhub_bus::request::{ControlRequest, ControlResult};
use tokio::sync::oneshot;

use super::api::{error, error_response};
use super::dbc_store::DbcStore;
use crate::session::credentials::Credentials;
use crate::transport::cannelloni::stats::CannelloniStats;
use crate::transport::rbs::RestBus;

/// How long an HTTP request waits for the bus thread.
pub const BUS_TIMEOUT: Duration = Duration::from_secs(5);

pub struct ApiState {
    pub inbox: InboxSender,
    pub credentials: Credentials,
    /// The DBC files the monitor decodes with.
    pub dbc: DbcStore,
    /// `[hub] recordings_dir`: recording paths are resolved in it here,
    /// before a request reaches the bus.
    pub recordings_dir: PathBuf,
    /// The cannelloni endpoints' counters.
    pub cannelloni: Arc<CannelloniStats>,
    /// The rest-bus simulations (`[[rbs]]`).
    pub rbs: Arc<RestBus>,
}

/// Hand a request to the bus thread and turn its answer into a response.
pub async fn ask(state: Arc<ApiState>, request: ControlRequest) -> Response {
    match ask_value(&state, request).await {
        Ok(body) => Json(body).into_response(),
        Err(response) => response,
    }
}

/// Hand a request to the bus thread: its answer, or the error response.
pub async fn ask_value(state: &ApiState, request: ControlRequest) -> Result<serde_json::Value, Response> {
    // What needs no bus state is refused here, before the bus thread sees it.
    request.check().map_err(error_response)?;
    let (reply, answer) = oneshot::channel::<ControlResult>();
    let inbox = state.inbox.clone();
    let queued = tokio::task::spawn_blocking(move || {
        // The bus calls it once on its own thread; a oneshot send never waits.
        let reply = Box::new(move |result| {
            let _ = reply.send(result);
        });
        inbox.send_timeout(Inbound::Control { request: Box::new(request), reply }, BUS_TIMEOUT).is_ok()
    })
    .await
    .unwrap_or(false);
    if !queued {
        return Err(error(StatusCode::SERVICE_UNAVAILABLE, "the bus is not taking requests (shutting down?)".into()));
    }
    match tokio::time::timeout(BUS_TIMEOUT, answer).await {
        Ok(Ok(Ok(body))) => Ok(body),
        Ok(Ok(Err(refused))) => Err(error_response(refused)),
        _ => Err(error(StatusCode::SERVICE_UNAVAILABLE, "the bus did not answer in time".into())),
    }
}
