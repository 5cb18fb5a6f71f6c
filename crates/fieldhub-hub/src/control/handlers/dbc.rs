//! `PUT`, `DELETE` and `GET` of the DBC files the web monitor decodes
//! each channel with (the store: `control/dbc_store.rs`).

use std::sync::Arc;

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;

use crate::control::api::error;
use crate::control::state::{ask_value, ApiState};
use fieldhub_bus::request::ControlRequest;

/// Largest DBC file the API takes.
pub const MAX_DBC_BYTES: usize = 16 * 1024 * 1024;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DbcBody {
    /// The DBC file's text.
    text: String,
}

/// `PUT /api/v1/channels/{channel}/dbc`: decode the channel with this file.
pub(crate) async fn put(
    State(s): State<Arc<ApiState>>,
    Path(channel): Path<String>,
    body: Result<Json<DbcBody>, JsonRejection>,
) -> Response {
    let text = match body {
        Ok(Json(DbcBody { text })) => text,
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("invalid request body: {}", e.body_text())),
    };
    if let Err(response) = known_channel(&s, &channel).await {
        return response;
    }
    match crate::control::dbc_store::read(text.as_bytes()) {
        Ok(db) => {
            let messages = db.0.len();
            s.dbc.set(channel.clone(), Some(db));
            Json(json!({ "channel": channel, "messages": messages })).into_response()
        }
        Err(e) => error(StatusCode::UNPROCESSABLE_ENTITY, e.to_string()),
    }
}

/// `DELETE /api/v1/channels/{channel}/dbc`: stop decoding the channel.
pub(crate) async fn delete(State(s): State<Arc<ApiState>>, Path(channel): Path<String>) -> Response {
    if s.dbc.get(&channel).is_none() {
        return error(StatusCode::NOT_FOUND, format!("channel '{channel}' has no DBC file"));
    }
    s.dbc.set(channel.clone(), None);
    Json(json!({ "channel": channel })).into_response()
}

/// `GET /api/v1/dbc`: the channels that have a DBC file.
pub(crate) async fn list(State(s): State<Arc<ApiState>>) -> Response {
    Json(s.dbc.list()).into_response()
}

/// The bus's 404 for a channel it does not have.
pub(crate) async fn known_channel(s: &ApiState, channel: &str) -> Result<(), Response> {
    let channels = ask_value(s, ControlRequest::Channels).await?;
    let known = channels.as_array().is_some_and(|list| list.iter().any(|c| c["name"] == channel));
    if known {
        Ok(())
    } else {
        Err(error(StatusCode::NOT_FOUND, format!("no channel named '{channel}'")))
    }
}
