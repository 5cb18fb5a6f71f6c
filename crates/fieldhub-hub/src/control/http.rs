//! The HTTP/JSON control API (axum), served on the hub's TCP listen
//! addresses: a connection whose first bytes are an HTTP method is handed
//! here instead of to the binary protocol. The OpenAPI document
//! (`spec/control-api.yaml`) is served at `/openapi.yaml`.
//!
//! Runs on its own thread with a single-threaded tokio runtime; every request
//! becomes one [`Inbound::Control`] for the bus thread and waits for its
//! answer. Only clients whose access may control (`credentials.rs`: the
//! hub's token, an `[[access]]` with `control = true`) change anything:
//! every other method than GET and HEAD needs it; reads are everyone's
//! admitted, those scoped to channels (the monitor's stream) only of the
//! channels the access may read. When the hub has a token, every request must carry it as
//! `Authorization: Bearer <token>` — except the web monitor's page and
//! scripts under `/ui` (constant files with no bus data, [`super::ui`]),
//! and its WebSocket, which may carry it as `?token=` because browsers
//! cannot set a WebSocket's headers.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use std::collections::HashMap;

use axum::extract::rejection::JsonRejection;
use axum::extract::DefaultBodyLimit;
use axum::extract::{Path, Query, Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, patch, post, put};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;
use tokio::sync::{mpsc, oneshot};

use super::dbc::{self, DbcStore};
use super::workbench;
use crate::config::{ChannelConfig, RouteConfig};
use crate::credentials::{Access, Credentials, Refused};
use crate::peer_user::PeerOrigin;
use fieldhub_bus::fault::{FaultSpec, FaultSpecError};
use fieldhub_bus::inbox::{Inbound, InboxSender};
use fieldhub_bus::request::{
    ChannelUpdate, ControlError, ControlRequest, ControlResult, ForcedState, RecordingSpec, TimeCommand,
};

/// The OpenAPI document of this API, kept in the repository.
pub const OPENAPI: &str = include_str!("../../../../spec/control-api.yaml");

/// Every route of the API: (method, path). The OpenAPI document must list
/// each one (a test checks it).
#[cfg(test)]
const ROUTES: &[(&str, &str)] = &[
    ("get", "/openapi.yaml"),
    ("get", "/api/v1/stats"),
    ("get", "/api/v1/channels"),
    ("post", "/api/v1/channels"),
    ("patch", "/api/v1/channels/{channel}"),
    ("delete", "/api/v1/channels/{channel}"),
    ("get", "/api/v1/clients"),
    ("get", "/api/v1/ports"),
    ("get", "/api/v1/routes"),
    ("post", "/api/v1/routes"),
    ("delete", "/api/v1/routes/{route}"),
    ("post", "/api/v1/ports/{port}/plug"),
    ("post", "/api/v1/ports/{port}/unplug"),
    ("post", "/api/v1/channels/{channel}/cut"),
    ("post", "/api/v1/channels/{channel}/repair"),
    ("post", "/api/v1/channels/{channel}/short"),
    ("post", "/api/v1/channels/{channel}/unshort"),
    ("post", "/api/v1/ports/{port}/state"),
    ("get", "/api/v1/faults"),
    ("post", "/api/v1/faults"),
    ("delete", "/api/v1/faults/{id}"),
    ("get", "/api/v1/recordings"),
    ("post", "/api/v1/recordings"),
    ("delete", "/api/v1/recordings/{id}"),
    ("get", "/api/v1/recording-file"),
    ("post", "/api/v1/channels/{channel}/send"),
    ("get", "/api/v1/monitor"),
    ("get", "/api/v1/dbc"),
    ("put", "/api/v1/channels/{channel}/dbc"),
    ("delete", "/api/v1/channels/{channel}/dbc"),
    ("get", "/api/v1/time"),
    ("post", "/api/v1/time"),
];

/// How long an HTTP request waits for the bus thread.
const BUS_TIMEOUT: Duration = Duration::from_secs(5);

pub(super) struct ApiState {
    inbox: InboxSender,
    pub(super) credentials: Credentials,
    /// The DBC files the monitor decodes with.
    pub(super) dbc: DbcStore,
    /// `[hub] recordings_dir`: recording paths are resolved in it here,
    /// before a request reaches the bus.
    pub(super) recordings_dir: PathBuf,
}

/// A connection the reactor hands over because it speaks HTTP.
pub enum HttpConnection {
    Plain(std::net::TcpStream),
    /// TLS, its handshake done by the reactor, which also decrypted the
    /// request's first bytes (`read_ahead`). `certified`: the client
    /// presented a certificate `tls_client_ca` verified.
    Tls {
        tcp: std::net::TcpStream,
        session: Box<rustls::ServerConnection>,
        read_ahead: Vec<u8>,
        certified: bool,
    },
}

/// The running control server; dropping it stops the server.
pub struct ControlServer {
    connections: mpsc::UnboundedSender<HttpConnection>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ControlServer {
    /// Start the server thread.
    pub fn start(
        inbox: InboxSender,
        credentials: Credentials,
        recordings_dir: PathBuf,
        dbc: DbcStore,
    ) -> std::io::Result<Self> {
        let (connections, incoming) = mpsc::unbounded_channel();
        let (stop, stopped) = oneshot::channel::<()>();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let state = Arc::new(ApiState { inbox, credentials, recordings_dir, dbc });
        let thread = std::thread::Builder::new().name("fh-control".into()).spawn(move || {
            runtime.block_on(super::serve::serve(router(state), incoming, stopped));
        })?;
        Ok(Self { connections, stop: Some(stop), thread: Some(thread) })
    }

    /// Serve `stream`, an accepted TCP connection that speaks HTTP.
    pub fn hand_over(&self, stream: HttpConnection) {
        let _ = self.connections.send(stream);
    }

    /// Stop serving and wait for the server thread.
    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether the first bytes of a connection are an HTTP request line.
pub fn looks_like_http(first: &[u8]) -> bool {
    const METHODS: [&[u8]; 9] = [b"GET ", b"POST", b"PUT ", b"DELE", b"HEAD", b"PATC", b"OPTI", b"CONN", b"TRAC"];
    METHODS.iter().any(|m| first.starts_with(m))
}

fn router(state: Arc<ApiState>) -> Router {
    Router::new()
        .route("/openapi.yaml", get(|| async { ([("content-type", "application/yaml")], OPENAPI) }))
        .route("/api/v1/stats", get(|State(s): State<Arc<ApiState>>| ask(s, ControlRequest::Stats)))
        .route(
            "/api/v1/channels",
            get(|State(s): State<Arc<ApiState>>| ask(s, ControlRequest::Channels)).post(create_channel),
        )
        .route("/api/v1/channels/{channel}", patch(update_channel).delete(remove_channel))
        .route("/api/v1/clients", get(|State(s): State<Arc<ApiState>>| ask(s, ControlRequest::Clients)))
        .route("/api/v1/ports", get(|State(s): State<Arc<ApiState>>| ask(s, ControlRequest::Ports)))
        .route("/api/v1/routes", get(|State(s): State<Arc<ApiState>>| ask(s, ControlRequest::Routes)).post(add_route))
        .route("/api/v1/routes/{route}", delete(remove_route))
        .route("/api/v1/ports/{port}/plug", post(plug))
        .route("/api/v1/ports/{port}/unplug", post(unplug))
        .route("/api/v1/channels/{channel}/cut", post(cut))
        .route("/api/v1/channels/{channel}/repair", post(repair))
        .route("/api/v1/channels/{channel}/short", post(short))
        .route("/api/v1/channels/{channel}/unshort", post(unshort))
        .route("/api/v1/ports/{port}/state", post(force_state))
        .route("/api/v1/faults", get(|State(s): State<Arc<ApiState>>| ask(s, ControlRequest::Faults)).post(add_fault))
        .route("/api/v1/faults/{id}", delete(remove_fault))
        .route(
            "/api/v1/recordings",
            get(|State(s): State<Arc<ApiState>>| ask(s, ControlRequest::Recordings)).post(start_recording),
        )
        .route("/api/v1/recordings/{id}", delete(stop_recording))
        .route("/api/v1/recording-file", get(workbench::recording_file))
        .route("/api/v1/channels/{channel}/send", post(workbench::send_frame))
        .route("/api/v1/monitor", get(super::monitor_ws::open))
        .route("/api/v1/time", get(|State(s): State<Arc<ApiState>>| ask(s, ControlRequest::Time)).post(set_time))
        .route("/api/v1/dbc", get(dbc::list))
        .route(
            "/api/v1/channels/{channel}/dbc",
            put(dbc::put).delete(dbc::delete).layer(DefaultBodyLimit::max(dbc::MAX_DBC_BYTES)),
        )
        .merge(super::ui::routes())
        .fallback(|| async { error(StatusCode::NOT_FOUND, "no such endpoint; GET /openapi.yaml lists them".into()) })
        .method_not_allowed_fallback(|| async {
            let text = "this endpoint does not take that method; the Allow header and GET /openapi.yaml list the ones it takes";
            error(StatusCode::METHOD_NOT_ALLOWED, text.into())
        })
        .layer(axum::middleware::from_fn_with_state(Arc::clone(&state), authorize))
        .layer(axum::middleware::from_fn(request_deadline))
        .with_state(state)
}

/// A request is read and answered within [`super::serve::REQUEST_TIMEOUT`];
/// what streams after the answer (a download, a WebSocket) is not timed.
async fn request_deadline(request: Request, next: Next) -> Response {
    let limit = super::serve::REQUEST_TIMEOUT;
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => error(
            StatusCode::REQUEST_TIMEOUT,
            format!("the request was not complete within {} s (a body sent too slowly?)", limit.as_secs()),
        ),
    }
}

async fn authorize(State(state): State<Arc<ApiState>>, mut request: Request, next: Next) -> Response {
    // Browsers first: another site's page, or a rebound host name, is
    // refused whatever it asks for (`origin.rs`).
    // Over TLS a rebound name fails the browser's check of the hub's
    // certificate, so host names are as safe as with a token.
    let over_tls = request.extensions().get::<super::serve::OverTls>().is_some();
    if let Some(why) = super::origin::refusal(request.headers(), state.credentials.has_token() || over_tls) {
        return error(StatusCode::FORBIDDEN, why.into());
    }
    let path = request.uri().path();
    if path == "/ui" || path.starts_with("/ui/") {
        return next.run(request).await;
    }
    let presented = {
        let header = request
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::to_owned);
        // `&Request` is not `Send`: this closure must be gone before the await below.
        let query = || {
            let query = Query::<HashMap<String, String>>::try_from_uri(request.uri()).ok()?;
            query.0.get("token").cloned()
        };
        header.or_else(|| if path == "/api/v1/monitor" { query() } else { None }).unwrap_or_default()
    };
    // A request that came some other way than the server's own accept
    // (a test calling the router) has no origin and is nobody's.
    let origin = request.extensions().get::<PeerOrigin>().copied().unwrap_or(PeerOrigin::Unknown);
    let access = match state.credentials.access(&presented, &origin) {
        Err(Refused::TokenRequired) => {
            return error(StatusCode::UNAUTHORIZED, "this hub requires 'Authorization: Bearer <token>'".into())
        }
        Err(Refused::WrongToken) => {
            return error(StatusCode::UNAUTHORIZED, "wrong token in 'Authorization: Bearer <token>'".into())
        }
        Err(Refused::NotHubUser(who)) => {
            let text = format!(
                "this hub answers without a token only processes of the user it runs as, and this is {who}: \
                 send 'Authorization: Bearer <token>' (see docs/security.md)"
            );
            return error(StatusCode::UNAUTHORIZED, text);
        }
        Ok(access) => access,
    };
    if !matches!(*request.method(), Method::GET | Method::HEAD) && !access.may_control() {
        let text = match &access {
            Access::ReadOnly => format!(
                "{} {path}: the monitor token is read-only (GET only); changes need the hub's token",
                request.method()
            ),
            other => format!(
                "{} {path}: {} may not control the hub (its control = false; GET only); changes need an \
                 [[access]] with control = true or the hub's token",
                request.method(),
                other.describe()
            ),
        };
        return error(StatusCode::FORBIDDEN, text);
    }
    // Handlers that serve channel data check what it may read.
    request.extensions_mut().insert(access);
    next.run(request).await
}

pub(super) fn error(status: StatusCode, message: String) -> Response {
    (status, Json(json!({ "error": message }))).into_response()
}

/// Hand a request to the bus thread and turn its answer into a response.
pub(super) async fn ask(state: Arc<ApiState>, request: ControlRequest) -> Response {
    match ask_value(&state, request).await {
        Ok(body) => Json(body).into_response(),
        Err(response) => response,
    }
}

/// Hand a request to the bus thread: its answer, or the error response.
pub(super) async fn ask_value(state: &ApiState, request: ControlRequest) -> Result<serde_json::Value, Response> {
    // What needs no bus state is refused here, before the bus thread sees it.
    request.check().map_err(error_response)?;
    let (reply, answer) = oneshot::channel::<ControlResult>();
    let inbox = state.inbox.clone();
    let queued = tokio::task::spawn_blocking(move || {
        // The bus calls it once on its own thread; a oneshot send never waits.
        let reply = Box::new(move |result| {
            let _ = reply.send(result);
        });
        inbox.send_timeout(Inbound::Control { request, reply }, BUS_TIMEOUT).is_ok()
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

/// The response to a refused request.
fn error_response(refused: ControlError) -> Response {
    match refused {
        ControlError::NotFound(m) => error(StatusCode::NOT_FOUND, m),
        ControlError::Conflict(m) => error(StatusCode::CONFLICT, m),
        ControlError::Invalid(m) => error(StatusCode::UNPROCESSABLE_ENTITY, m),
    }
}

/// The request body, or the response explaining why it is unusable.
pub(super) fn body<T>(parsed: Result<Json<T>, JsonRejection>) -> Result<T, Box<Response>> {
    parsed
        .map(|Json(v)| v)
        .map_err(|e| Box::new(error(StatusCode::BAD_REQUEST, format!("invalid request body: {}", e.body_text()))))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlugBody {
    channel: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CutBody {
    ports: Vec<String>,
}

async fn plug(
    State(s): State<Arc<ApiState>>,
    Path(port): Path<String>,
    b: Result<Json<PlugBody>, JsonRejection>,
) -> Response {
    match body(b) {
        Ok(PlugBody { channel }) => ask(s, ControlRequest::Plug { port, channel }).await,
        Err(response) => *response,
    }
}

async fn unplug(State(s): State<Arc<ApiState>>, Path(port): Path<String>) -> Response {
    ask(s, ControlRequest::Unplug { port }).await
}

async fn cut(
    State(s): State<Arc<ApiState>>,
    Path(channel): Path<String>,
    b: Result<Json<CutBody>, JsonRejection>,
) -> Response {
    match body(b) {
        Ok(CutBody { ports }) => ask(s, ControlRequest::Cut { channel, ports }).await,
        Err(response) => *response,
    }
}

async fn repair(State(s): State<Arc<ApiState>>, Path(channel): Path<String>) -> Response {
    ask(s, ControlRequest::Repair { channel }).await
}

async fn create_channel(State(s): State<Arc<ApiState>>, b: Result<Json<ChannelConfig>, JsonRejection>) -> Response {
    match body(b) {
        Ok(config) => ask(s, ControlRequest::CreateChannel(config)).await,
        Err(response) => *response,
    }
}

async fn update_channel(
    State(s): State<Arc<ApiState>>,
    Path(channel): Path<String>,
    b: Result<Json<ChannelUpdate>, JsonRejection>,
) -> Response {
    match body(b) {
        Ok(update) => ask(s, ControlRequest::UpdateChannel { channel, update }).await,
        Err(response) => *response,
    }
}

async fn remove_channel(State(s): State<Arc<ApiState>>, Path(channel): Path<String>) -> Response {
    ask(s, ControlRequest::RemoveChannel { channel }).await
}

async fn short(State(s): State<Arc<ApiState>>, Path(channel): Path<String>) -> Response {
    ask(s, ControlRequest::Short { channel }).await
}

async fn unshort(State(s): State<Arc<ApiState>>, Path(channel): Path<String>) -> Response {
    ask(s, ControlRequest::Unshort { channel }).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StateBody {
    state: ForcedState,
}

async fn force_state(
    State(s): State<Arc<ApiState>>,
    Path(port): Path<String>,
    b: Result<Json<StateBody>, JsonRejection>,
) -> Response {
    match body(b) {
        Ok(StateBody { state }) => ask(s, ControlRequest::ForceState { port, state }).await,
        Err(response) => *response,
    }
}

async fn add_fault(State(s): State<Arc<ApiState>>, b: Result<Json<FaultSpec>, JsonRejection>) -> Response {
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

async fn set_time(State(s): State<Arc<ApiState>>, b: Result<Json<TimeCommand>, JsonRejection>) -> Response {
    match body(b) {
        Ok(command) => ask(s, ControlRequest::SetTime(command)).await,
        Err(response) => *response,
    }
}

async fn remove_fault(State(s): State<Arc<ApiState>>, Path(id): Path<String>) -> Response {
    match id.parse::<u32>() {
        Ok(id) => ask(s, ControlRequest::RemoveFault { id }).await,
        Err(_) => error(StatusCode::BAD_REQUEST, format!("fault id '{id}' is not a number")),
    }
}

async fn start_recording(State(s): State<Arc<ApiState>>, b: Result<Json<RecordingSpec>, JsonRejection>) -> Response {
    match body(b) {
        Ok(spec) => match crate::recording::path::resolve(&s.recordings_dir, &spec.path) {
            Ok(file) => ask(s, ControlRequest::StartRecording { spec, file }).await,
            Err(e) => error(StatusCode::BAD_REQUEST, e.to_string()),
        },
        Err(response) => *response,
    }
}

async fn stop_recording(State(s): State<Arc<ApiState>>, Path(id): Path<String>) -> Response {
    match id.parse::<u32>() {
        Ok(id) => ask(s, ControlRequest::StopRecording { id }).await,
        Err(_) => error(StatusCode::BAD_REQUEST, format!("recording id '{id}' is not a number")),
    }
}

async fn add_route(State(s): State<Arc<ApiState>>, b: Result<Json<RouteConfig>, JsonRejection>) -> Response {
    match body(b) {
        Ok(spec) => ask(s, ControlRequest::AddRoute(spec)).await,
        Err(response) => *response,
    }
}

async fn remove_route(State(s): State<Arc<ApiState>>, Path(route): Path<String>) -> Response {
    match route.parse::<u32>() {
        Ok(id) => ask(s, ControlRequest::RemoveRoute { id }).await,
        Err(_) => error(StatusCode::BAD_REQUEST, format!("route '{route}' is not a number (a route's `route` field)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body that never arrives.
    struct Silent;

    impl http_body::Body for Silent {
        type Data = axum::body::Bytes;
        type Error = std::convert::Infallible;
        fn poll_frame(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
            std::task::Poll::Pending
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_whose_body_never_comes_is_answered_408_after_the_deadline() {
        use tower::ServiceExt;
        let app = Router::new()
            .route("/echo", post(|body: String| async move { body }))
            .layer(axum::middleware::from_fn(request_deadline));
        let request = axum::http::Request::post("/echo").body(axum::body::Body::new(Silent)).unwrap();
        let started = tokio::time::Instant::now();
        let response = app.oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::REQUEST_TIMEOUT);
        assert_eq!(started.elapsed(), super::super::serve::REQUEST_TIMEOUT);
    }

    #[test]
    fn openapi_document_lists_every_route() {
        for (method, path) in ROUTES {
            let at = OPENAPI
                .find(&format!("\n  {path}:"))
                .unwrap_or_else(|| panic!("{path} missing from the OpenAPI document"));
            let section = &OPENAPI[at + 1..];
            let end = section[2..].find("\n  /").map_or(section.len(), |e| e + 2);
            assert!(section[..end].contains(&format!("\n    {method}:")), "{method} {path} missing");
        }
    }

    #[test]
    fn http_methods_are_told_apart_from_the_binary_handshake() {
        assert!(looks_like_http(b"GET /api/v1/stats HTTP/1.1"));
        assert!(looks_like_http(b"POST"));
        assert!(!looks_like_http(&[0x0c, 0, 0, 0]));
    }
}
