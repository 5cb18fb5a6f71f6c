//! The HTTP/JSON control API (axum), served on the hub's TCP listen
//! addresses: a connection whose first bytes are an HTTP method is handed
//! here instead of to the binary protocol. The OpenAPI document
//! (`spec/control-api.yaml`) is served at `/openapi.yaml`.
//!
//! Runs on its own thread with a single-threaded tokio runtime; every request
//! becomes one `Inbound::Control` for the bus thread and waits for its
//! answer. Only clients whose access may control (`credentials.rs`: the
//! hub's token, an `[[access]]` with `control = true`) change anything:
//! every other method than GET and HEAD needs it; reads are everyone's
//! admitted, those scoped to channels (the monitor's stream) only of the
//! channels the access may read. When the hub has a token, every request must carry it as
//! `Authorization: Bearer <token>` — except the web monitor's page and
//! scripts under `/ui` (constant files with no bus data, [`super::ui`]),
//! and its WebSocket, which may carry it as `?token=` because browsers
//! cannot set a WebSocket's headers. A request refused for its
//! credentials (`401`) closes its connection (`Connection: close`), and an
//! authorised request keeps its connection's slot until it is answered
//! (`http_slots.rs`).

use std::path::PathBuf;
use std::sync::Arc;

use std::collections::HashMap;

use axum::extract::DefaultBodyLimit;
use axum::extract::{Query, Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::{delete, get, patch, post};
use axum::Router;
use fieldhub_bus::auth_refusals::AuthTransport;
use fieldhub_bus::inbox::InboxSender;
use fieldhub_bus::request::ControlRequest;
use tokio::sync::{mpsc, oneshot};

use super::api::error;
use super::dbc_store::DbcStore;
use super::handlers::requests::*;
use super::handlers::{cannelloni, dbc, rbs, recording_decode, signals, workbench};
use super::http_slots::SlotHandle;
use super::state::{ask, ApiState};
use crate::session::credentials::{Access, Credentials, Refused};
use crate::session::peer_user::PeerOrigin;
use crate::transport::cannelloni::stats::CannelloniStats;
use crate::transport::http::{HttpConnection, HttpHandoff};
use crate::transport::rbs::RestBus;

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
    ("post", "/api/v1/channels/{channel}/lin/sleep"),
    ("post", "/api/v1/channels/{channel}/lin/wake"),
    ("post", "/api/v1/ports/{port}/state"),
    ("get", "/api/v1/faults"),
    ("post", "/api/v1/faults"),
    ("delete", "/api/v1/faults/{id}"),
    ("get", "/api/v1/recordings"),
    ("post", "/api/v1/recordings"),
    ("delete", "/api/v1/recordings/{id}"),
    ("post", "/api/v1/recordings/decode"),
    ("get", "/api/v1/recording-file"),
    ("post", "/api/v1/channels/{channel}/send"),
    ("get", "/api/v1/monitor"),
    ("get", "/api/v1/dbc"),
    ("put", "/api/v1/channels/{channel}/dbc"),
    ("delete", "/api/v1/channels/{channel}/dbc"),
    ("get", "/api/v1/channels/{channel}/dbc"),
    ("post", "/api/v1/channels/{channel}/send-signals"),
    ("get", "/api/v1/time"),
    ("get", "/api/v1/access"),
    ("get", "/api/v1/cannelloni"),
    ("get", "/api/v1/rbs"),
    ("post", "/api/v1/rbs"),
    ("post", "/api/v1/rbs/sims"),
    ("delete", "/api/v1/rbs/sims/{sim}"),
    ("post", "/api/v1/time"),
];

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
        cannelloni: Arc<CannelloniStats>,
        rbs: Arc<RestBus>,
    ) -> std::io::Result<Self> {
        let (connections, incoming) = mpsc::unbounded_channel();
        let (stop, stopped) = oneshot::channel::<()>();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let state = Arc::new(ApiState { inbox, credentials, recordings_dir, dbc, cannelloni, rbs });
        let thread = std::thread::Builder::new().name("fh-control".into()).spawn(move || {
            runtime.block_on(super::serve::serve(router(state), incoming, stopped));
        })?;
        Ok(Self { connections, stop: Some(stop), thread: Some(thread) })
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

impl HttpHandoff for ControlServer {
    /// Serve `stream`, an accepted TCP connection that speaks HTTP.
    fn hand_over(&self, stream: HttpConnection) {
        let _ = self.connections.send(stream);
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.stop();
    }
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
        .route(
            "/api/v1/gateways",
            get(|State(s): State<Arc<ApiState>>| ask(s, ControlRequest::Gateways)).post(add_gateway),
        )
        .route("/api/v1/gateways/{gateway}", delete(remove_gateway))
        .route("/api/v1/ports/{port}/plug", post(plug))
        .route("/api/v1/ports/{port}/unplug", post(unplug))
        .route("/api/v1/channels/{channel}/cut", post(cut))
        .route("/api/v1/channels/{channel}/repair", post(repair))
        .route("/api/v1/channels/{channel}/short", post(short))
        .route("/api/v1/channels/{channel}/unshort", post(unshort))
        .route("/api/v1/channels/{channel}/lin/sleep", post(lin_sleep))
        .route("/api/v1/channels/{channel}/lin/wake", post(lin_wake))
        .route("/api/v1/ports/{port}/state", post(force_state))
        .route("/api/v1/faults", get(|State(s): State<Arc<ApiState>>| ask(s, ControlRequest::Faults)).post(add_fault))
        .route("/api/v1/faults/{id}", delete(remove_fault))
        .route(
            "/api/v1/recordings",
            get(|State(s): State<Arc<ApiState>>| ask(s, ControlRequest::Recordings)).post(start_recording),
        )
        .route("/api/v1/recordings/{id}", delete(stop_recording))
        .route(
            "/api/v1/recordings/decode",
            post(recording_decode::decode).layer(DefaultBodyLimit::max(recording_decode::MAX_RECORDING_BYTES)),
        )
        .route("/api/v1/recording-file", get(workbench::recording_file))
        .route("/api/v1/channels/{channel}/send", post(workbench::send_frame))
        .route("/api/v1/monitor", get(super::handlers::monitor_ws::open))
        .route("/api/v1/time", get(|State(s): State<Arc<ApiState>>| ask(s, ControlRequest::Time)).post(set_time))
        .route("/api/v1/dbc", get(dbc::list))
        .route("/api/v1/access", get(workbench::access))
        .route("/api/v1/cannelloni", get(cannelloni::report))
        .route("/api/v1/rbs", get(rbs::list).post(rbs::change))
        // A DBC's text in JSON: the monitor's DBC upload's limit.
        .route("/api/v1/rbs/sims", post(rbs::add).layer(DefaultBodyLimit::max(dbc::MAX_DBC_BYTES)))
        .route("/api/v1/rbs/sims/{sim}", delete(rbs::remove))
        .route(
            "/api/v1/channels/{channel}/dbc",
            get(signals::messages)
                .put(dbc::put)
                .delete(dbc::delete)
                .layer(DefaultBodyLimit::max(dbc::MAX_DBC_BYTES)),
        )
        .route("/api/v1/channels/{channel}/send-signals", post(signals::send))
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
    let decided = state.credentials.access(&presented, &origin);
    if decided.is_err() {
        state.credentials.count_refusal(AuthTransport::Http);
    }
    let access = match decided {
        Err(Refused::TokenRequired) => {
            return unauthorized("this hub requires 'Authorization: Bearer <token>'".into());
        }
        Err(Refused::WrongToken) => return unauthorized("wrong token in 'Authorization: Bearer <token>'".into()),
        Err(Refused::NotHubUser(who)) => {
            let text = format!(
                "this hub answers without a token only processes of the user it runs as, and this is {who}: \
                 send 'Authorization: Bearer <token>' (see docs/security.md)"
            );
            return unauthorized(text);
        }
        Ok(access) => access,
    };
    // Kept from being closed to make room until it is answered.
    let _busy = request.extensions().get::<SlotHandle>().map(SlotHandle::authorised);
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

/// `401` with `text`, closing the connection: a client without valid
/// credentials keeps no slot by asking again.
fn unauthorized(text: String) -> Response {
    let mut response = error(StatusCode::UNAUTHORIZED, text);
    response.headers_mut().insert(axum::http::header::CONNECTION, axum::http::HeaderValue::from_static("close"));
    response
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
}
