//! The hub's HTTP control API: one call, with its status and JSON answer.

use crate::hub::HubProcess;
use crate::wait::PATIENCE;

/// Base URL of a hub's HTTP control API.
pub fn base(hub: &HubProcess) -> String {
    hub.url.replace("tcp://", "http://")
}

/// A control API request, with `token` as its bearer token when given.
pub fn request(hub: &HubProcess, method: &str, path: &str, token: Option<&str>) -> ureq::Request {
    let request = ureq::request(method, &format!("{}{path}", base(hub)));
    match token {
        Some(token) => request.set("Authorization", &format!("Bearer {token}")),
        None => request,
    }
}

/// How a request was answered, whatever the status: (status, response).
/// A request that got no answer at all fails the test, naming `what`.
pub fn answered(result: Result<ureq::Response, ureq::Error>, what: &str) -> (u16, ureq::Response) {
    match result {
        Ok(r) => (r.status(), r),
        Err(ureq::Error::Status(code, r)) => (code, r),
        Err(e) => panic!("{what}: {e}"),
    }
}

/// One control API call: (status, JSON body).
pub fn api(hub: &HubProcess, method: &str, path: &str, body: Option<serde_json::Value>) -> (u16, serde_json::Value) {
    let request = request(hub, method, path, None);
    let result = match body {
        Some(b) => request.send_json(b),
        None => request.call(),
    };
    let (status, response) = answered(result, &format!("{method} {path}"));
    (status, response.into_json().unwrap())
}

/// A control API call that must succeed.
pub fn ok(hub: &HubProcess, method: &str, path: &str, body: Option<serde_json::Value>) -> serde_json::Value {
    let (status, answer) = api(hub, method, path, body);
    assert_eq!(status, 200, "{method} {path}: {answer}");
    answer
}

/// An HTTP agent for the control API that reuses its connection and never
/// waits longer than [`PATIENCE`] for an answer.
pub fn patient_agent() -> ureq::Agent {
    ureq::AgentBuilder::new().timeout(PATIENCE).build()
}

/// One control API call through `agent`: (status, JSON body). A transport
/// failure (a timeout included) is reported as status 0 with the error text.
pub fn api_via(
    agent: &ureq::Agent,
    hub: &HubProcess,
    method: &str,
    path: &str,
    body: Option<serde_json::Value>,
) -> (u16, serde_json::Value) {
    let request = agent.request(method, &format!("{}{path}", base(hub)));
    let result = match body {
        Some(b) => request.send_json(b),
        None => request.call(),
    };
    match result {
        Ok(r) => (r.status(), r.into_json().unwrap_or(serde_json::Value::Null)),
        Err(ureq::Error::Status(code, r)) => (code, r.into_json().unwrap_or(serde_json::Value::Null)),
        Err(e) => (0, serde_json::Value::String(format!("{method} {path}: {e}"))),
    }
}
