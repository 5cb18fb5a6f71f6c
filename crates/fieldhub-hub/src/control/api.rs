//! The control API's vocabulary, shared by the router and every handler:
//! how an error is answered (`{"error": "..."}` with its status), how a
//! refused bus request maps to a status, how a request body is read. It
//! imports nothing else from the crate, so any handler may use it.

use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use fieldhub_bus::request::ControlError;
use serde_json::json;

/// The response `{"error": message}` with `status`.
pub fn error(status: StatusCode, message: String) -> Response {
    (status, Json(json!({ "error": message }))).into_response()
}

/// The response to a refused request.
pub fn error_response(refused: ControlError) -> Response {
    match refused {
        ControlError::NotFound(m) => error(StatusCode::NOT_FOUND, m),
        ControlError::Conflict(m) => error(StatusCode::CONFLICT, m),
        ControlError::Invalid(m) => error(StatusCode::UNPROCESSABLE_ENTITY, m),
    }
}

/// The request body, or the response explaining why it is unusable.
pub fn body<T>(parsed: Result<Json<T>, JsonRejection>) -> Result<T, Box<Response>> {
    parsed
        .map(|Json(v)| v)
        .map_err(|e| Box::new(error(StatusCode::BAD_REQUEST, format!("invalid request body: {}", e.body_text()))))
}
