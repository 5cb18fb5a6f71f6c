//! What the control API removes gives its room back: a channel created and
//! removed 2,000 times, and a route added and removed 2,000 times (70,000
//! times, past any 16-bit numbering, in an ignored test: it takes a minute),
//! leave a hub that still creates a channel that carries frames and adds a
//! route that routes them — and the port id a route sends with is never one
//! of the clients' port ids.

use std::collections::HashSet;

use crate::FIELDHUB;
use fieldhub_client::{Client, Port};
use fieldhub_testkit::*;
use serde_json::{json, Value};

const CHANNEL_CYCLES: usize = 2_000;
const ROUTE_CYCLES: usize = 2_000;

/// A control call that must succeed; `what` says which step failed.
fn must(agent: &ureq::Agent, hub: &HubProcess, what: &str, method: &str, path: &str, body: Option<Value>) -> Value {
    let (status, answer) = api_via(agent, hub, method, path, body);
    if status != 200 {
        let panics: Vec<String> = hub.log().into_iter().filter(|l| l.contains("panicked")).collect();
        panic!("{what}: {method} {path}: {status} {answer}; hub panics: {panics:?}");
    }
    answer
}

fn names(list: &Value) -> Vec<String> {
    list.as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap().to_owned()).collect()
}

fn pair(hub: &HubProcess, from: &str, to: &str) -> (Client, Port, Client) {
    let (sender, receiver) = (hub.client("sender"), hub.client("receiver"));
    let tx = sender.open_port(from).unwrap();
    receiver.open_port_with(to, &lossless()).unwrap();
    (sender, tx, receiver)
}

#[test]
fn a_channel_created_and_removed_two_thousand_times_leaves_room_for_another_that_carries_frames() {
    let hub = FIELDHUB.start();
    let agent = patient_agent();
    for cycle in 0..CHANNEL_CYCLES {
        let what = format!("cycle {cycle}");
        must(&agent, &hub, &what, "POST", "/api/v1/channels", Some(json!({"name": "cycled"})));
        must(&agent, &hub, &what, "DELETE", "/api/v1/channels/cycled", None);
    }
    let created = must(&agent, &hub, "afterwards", "POST", "/api/v1/channels", Some(json!({"name": "fresh"})));
    assert_eq!(created["name"], "fresh");
    let listed = must(&agent, &hub, "afterwards", "GET", "/api/v1/channels", None);
    assert_eq!(names(&listed), ["can0", "can1", "fresh"]);

    let (sender, tx, receiver) = pair(&hub, "fresh", "fresh");
    exchange_numbered(&sender, &tx, &receiver, 0x42, 1, 10_000);
    assert_nothing_pending(&receiver);
}

#[test]
fn a_route_added_and_removed_two_thousand_times_leaves_room_for_another_that_routes_frames() {
    // Past 65,536 cycles, in the bus crate: bus/route_ids_tests.rs.
    route_cycles_leave_room(ROUTE_CYCLES);
}

/// Add and remove a route `cycles` times, then add one more and check it
/// routes frames under a port id of its own.
fn route_cycles_leave_room(cycles: usize) {
    let hub = FIELDHUB.start();
    let agent = patient_agent();
    // Clients with ports on both channels while the routes come and go.
    let (sender, tx, receiver) = pair(&hub, "can0", "can1");
    let bystander = hub.client("bystander");
    bystander.open_port_with("can0", &lossless()).unwrap();
    let route = json!({"from": "can0", "to": "can1"});
    for cycle in 0..cycles {
        let what = format!("cycle {cycle}");
        let added = must(&agent, &hub, &what, "POST", "/api/v1/routes", Some(route.clone()));
        let id = added["route"].as_u64().unwrap_or_else(|| panic!("{what}: no route number in {added}"));
        must(&agent, &hub, &what, "DELETE", &format!("/api/v1/routes/{id}"), None);
    }
    assert_eq!(must(&agent, &hub, "afterwards", "GET", "/api/v1/routes", None), json!([]));

    let added = must(&agent, &hub, "afterwards", "POST", "/api/v1/routes", Some(route));
    // A port opened after the route: whatever numbering the hub recycles,
    // it must not hand this port the route's id.
    let late = hub.client("late");
    late.open_port("can1").unwrap();
    exchange_numbered(&sender, &tx, &receiver, 0x42, 1, 10_000);
    assert_nothing_pending(&receiver);
    let routes = must(&agent, &hub, "afterwards", "GET", "/api/v1/routes", None);
    assert_eq!(routes[0]["route"], added["route"]);
    assert_eq!(routes[0]["routed"], 10_000);

    // The port id the route sends with (a routed frame's sender) is its
    // own: no client's port has it.
    sender.send(&tx, &numbered(0x42, 2, 0)).unwrap();
    sender.flush().unwrap();
    let routed = &recv_n(&receiver, 1)[0];
    let gateway = routed.meta.sender;
    let ports = must(&agent, &hub, "afterwards", "GET", "/api/v1/ports", None);
    let client_ports: HashSet<u64> = ports.as_array().unwrap().iter().map(|p| p["port_id"].as_u64().unwrap()).collect();
    assert_eq!(client_ports.len(), 4, "{ports}");
    assert!(
        !client_ports.contains(&u64::from(gateway)),
        "the route sends as port {gateway}, which is a client's port: {ports}"
    );
    if let Some(port_id) = routes[0].get("port_id").and_then(Value::as_u64) {
        assert_eq!(port_id, u64::from(gateway), "the route's port id as listed and as seen on the bus");
    }
}
