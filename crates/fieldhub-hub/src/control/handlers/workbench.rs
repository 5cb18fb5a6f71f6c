//! Endpoints the web monitor's workbench needs beyond the wiring and fault
//! operations: putting a frame on a channel (`POST
//! /api/v1/channels/{channel}/send`, from the channel's send port, see
//! `bus::monitor`) and downloading a recording's file (`GET
//! /api/v1/recording-file?path=NAME`, read only inside the recordings
//! directory, under the same rules as writing one; only for an access
//! that reads every channel), and what the asking client may do (`GET
//! /api/v1/access`), so the page disables the controls it may not use
//! and says why instead of offering buttons the API would refuse.

use std::sync::Arc;

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;

use crate::control::api::{body, error};
use crate::control::state::{ask, ApiState};
use crate::session::credentials::Access;
use fieldhub_bus::request::ControlRequest;

/// The requesting client's access: how refusals name it and whether it
/// may change the hub.
pub(crate) async fn access(Extension(access): Extension<Access>) -> Response {
    Json(serde_json::json!({"access": access.describe(), "control": access.may_control()})).into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SendBody {
    /// The frame in cansend syntax (`123#DEADBEEF`, `1ABCDEF0#`, `123##1AA`, `123#R`).
    frame: String,
}

pub(crate) async fn send_frame(
    State(s): State<Arc<ApiState>>,
    Path(channel): Path<String>,
    b: Result<Json<SendBody>, JsonRejection>,
) -> Response {
    match body(b) {
        Ok(SendBody { frame }) => match fieldhub_proto::text::parse_cansend(frame.trim()) {
            Ok(frame) => ask(s, ControlRequest::Send { channel, frame }).await,
            Err(e) => error(StatusCode::BAD_REQUEST, format!("'{frame}' is not a frame in cansend syntax: {e}")),
        },
        Err(response) => *response,
    }
}

#[derive(Deserialize)]
pub(crate) struct FileQuery {
    path: String,
}

/// Largest recording file the API hands out; bigger ones are read on the
/// hub's machine.
const MAX_DOWNLOAD: u64 = 256 * 1024 * 1024;

/// A recording's file, from the recordings directory only.
pub(crate) async fn recording_file(
    State(s): State<Arc<ApiState>>,
    Extension(access): Extension<Access>,
    query: Result<Query<FileQuery>, QueryRejection>,
) -> Response {
    if !access.may_read(None) {
        let text = format!(
            "{} may not download recordings: a recording may hold any channel's frames, and it may read only some \
             (read = [\"*\"] allows it)",
            access.describe()
        );
        return error(StatusCode::FORBIDDEN, text);
    }
    let Ok(Query(FileQuery { path })) = query else {
        return error(StatusCode::BAD_REQUEST, "give the recording's path as ?path=NAME".into());
    };
    let file = match crate::recording::path::resolve(&s.recordings_dir, &path) {
        Ok(file) => file,
        Err(e) => return error(StatusCode::BAD_REQUEST, e.to_string()),
    };
    let read = tokio::task::spawn_blocking(move || crate::recording::path::read(&file, MAX_DOWNLOAD)).await;
    match read {
        Ok(Ok(bytes)) => ([("content-type", "text/plain; charset=utf-8")], bytes).into_response(),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            error(StatusCode::NOT_FOUND, format!("no recording file '{path}'"))
        }
        Ok(Err(e)) => error(StatusCode::CONFLICT, format!("cannot read '{path}': {e}")),
        Err(_) => error(StatusCode::SERVICE_UNAVAILABLE, "the read did not finish".into()),
    }
}
