//! `GET /api/v1/cannelloni`: what every cannelloni endpoint counted, per
//! peer (sequence gaps, malformed packets, frames the bus dropped for it;
//! `transport::cannelloni::stats`). Read from the endpoints' counters, never
//! from the bus.

use std::sync::Arc;

use axum::extract::State;
use axum::Json;

use crate::control::state::ApiState;
use crate::transport::cannelloni::stats::EndpointReport;

/// Every endpoint in configuration order, its peers in the order they came.
pub async fn report(State(state): State<Arc<ApiState>>) -> Json<Vec<EndpointReport>> {
    Json(state.cannelloni.report())
}
