//! The HTTP control API and `fieldhub ctl` against a real hub: rewiring
//! while traffic flows, and a clear 4xx for every kind of bad request.

use crate::FIELDHUB;
use fieldhub_client::{Client, Port, PortConfig};
use fieldhub_testkit::*;
use serde_json::{json, Value};

struct Node {
    client: Client,
    port: Port,
}

fn node(hub: &HubProcess, name: &str, channel: &str) -> Node {
    let client = hub.client(name);
    let port = client.open_port_with(channel, &PortConfig { name: Some(name.into()), ..lossless() }).unwrap();
    Node { client, port }
}

impl Node {
    fn send(&self, tag: u8, count: u32) {
        for i in 0..count {
            self.client.send(&self.port, &numbered(0x100 + u32::from(tag), tag, i)).unwrap();
        }
        flush_all(&self.client);
    }

    /// Tags of every frame received so far (after a barrier).
    fn heard(&self) -> Vec<(u8, u32)> {
        flush_all(&self.client);
        let mut got = Vec::new();
        while let Some(r) = self.client.try_recv().unwrap() {
            got.push(number_of(&r.frame));
        }
        got
    }
}

fn tags(heard: &[(u8, u32)]) -> Vec<u8> {
    let mut t: Vec<u8> = heard.iter().map(|(tag, _)| *tag).collect();
    t.dedup();
    t
}

#[test]
fn unplugged_port_neither_sends_nor_receives_and_plugging_restores_it() {
    let hub = FIELDHUB.start();
    let (a, b, c) = (node(&hub, "a", "can0"), node(&hub, "b", "can0"), node(&hub, "c", "can0"));
    a.send(1, 100);
    ok(&hub, "POST", "/api/v1/ports/b/unplug", None);
    a.send(2, 100);
    b.send(3, 100); // lost: b has no cable
    ok(&hub, "POST", "/api/v1/ports/b/plug", Some(json!({"channel": "can0"})));
    a.send(4, 100);
    assert_eq!(tags(&b.heard()), [1, 4]);
    assert_eq!(tags(&c.heard()), [1, 2, 4], "c lost nothing and heard nothing from the unplugged b");
    let ports = ok(&hub, "GET", "/api/v1/ports", None);
    let b_port = ports.as_array().unwrap().iter().find(|p| p["name"] == "b").unwrap();
    assert_eq!((b_port["tx_dropped"].as_u64(), b_port["plugged"].as_bool()), (Some(100), Some(true)));
}

#[test]
fn plugging_into_another_channel_moves_the_port() {
    let hub = FIELDHUB.start();
    let (a, mover, far) = (node(&hub, "a", "can0"), node(&hub, "mover", "can0"), node(&hub, "far", "can1"));
    ok(&hub, "POST", "/api/v1/ports/mover/plug", Some(json!({"channel": "can1"})));
    a.send(1, 50);
    mover.send(2, 50);
    assert_eq!(tags(&far.heard()), [2]);
    let heard = mover.client.flush().and_then(|_| mover.client.try_recv()).unwrap();
    assert!(heard.is_none(), "the moved port no longer hears can0");
    assert_eq!(tags(&a.heard()), Vec::<u8>::new());
}

#[test]
fn cut_isolates_segments_and_repair_joins_them() {
    let hub = FIELDHUB.start();
    let nodes: Vec<Node> = ["a", "b", "c", "d"].iter().map(|n| node(&hub, n, "can0")).collect();
    let cut = ok(&hub, "POST", "/api/v1/channels/can0/cut", Some(json!({"ports": ["c", "d"]})));
    assert_eq!(cut["cut"], true);
    nodes[0].send(1, 200);
    nodes[2].send(3, 200);
    ok(&hub, "POST", "/api/v1/channels/can0/repair", None);
    nodes[0].send(5, 200);
    assert_eq!(tags(&nodes[1].heard()), [1, 5]);
    assert_eq!(tags(&nodes[3].heard()), [3, 5]);
    assert_eq!(tags(&nodes[2].heard()), [5]);
    assert!(nodes[0].heard().is_empty(), "c's frames never crossed the cut to a");
}

#[test]
fn bridge_and_unbridge_through_the_api() {
    let hub = FIELDHUB.start();
    let (a, far) = (node(&hub, "a", "can0"), node(&hub, "far", "can1"));
    let route =
        ok(&hub, "POST", "/api/v1/routes", Some(json!({"from": "can0", "to": "can1", "id": 0x100, "mask": 0x7FF})));
    a.send(0, 20); // id 0x100: routed
    a.send(1, 20); // id 0x101: filtered out
    assert_eq!(tags(&far.heard()), [0]);
    let id = route["route"].as_u64().unwrap();
    assert_eq!(ok(&hub, "GET", "/api/v1/routes", None)[0]["routed"], 20);
    ok(&hub, "DELETE", &format!("/api/v1/routes/{id}"), None);
    a.send(0, 20);
    assert!(far.heard().is_empty());
}

#[test]
fn every_bad_request_gets_a_4xx_with_a_reason_and_the_bus_goes_on() {
    let hub = FIELDHUB.start();
    let (a, b) = (node(&hub, "a", "can0"), node(&hub, "b", "can0"));
    let cases: Vec<(&str, &str, Option<Value>, u16, &str)> = vec![
        ("POST", "/api/v1/ports/ghost/unplug", None, 404, "no open port named 'ghost'"),
        ("POST", "/api/v1/ports/ghost/plug", Some(json!({"channel": "can0"})), 404, "ghost"),
        ("POST", "/api/v1/ports/a/plug", Some(json!({"channel": "can9"})), 404, "no channel named 'can9'"),
        ("POST", "/api/v1/ports/a/plug", Some(json!({"chanel": "can0"})), 400, "invalid request body"),
        ("POST", "/api/v1/ports/a/plug", None, 400, "invalid request body"),
        ("POST", "/api/v1/channels/can9/cut", Some(json!({"ports": ["a"]})), 404, "can9"),
        ("POST", "/api/v1/channels/can0/cut", Some(json!({"ports": []})), 422, "at least one port"),
        ("POST", "/api/v1/channels/can1/cut", Some(json!({"ports": ["a"]})), 422, "is on channel 'can0'"),
        ("POST", "/api/v1/channels/can0/repair", None, 409, "not cut"),
        ("POST", "/api/v1/routes", Some(json!({"from": "can0", "to": "can0"})), 422, "to itself"),
        ("POST", "/api/v1/routes", Some(json!({"from": "can0", "to": "nowhere"})), 404, "nowhere"),
        ("POST", "/api/v1/routes", Some(json!({"from": "can0", "to": "can1", "mask": 0x4000_0000u32})), 422, "mask"),
        ("POST", "/api/v1/routes", Some(json!({"from": "can0", "to": "can1", "hop_limit": 0})), 422, "hop_limit"),
        ("POST", "/api/v1/routes", Some(json!({"from": "can0", "to": "can1", "colour": 1})), 400, "colour"),
        ("DELETE", "/api/v1/routes/77", None, 404, "no route with id 77"),
        ("DELETE", "/api/v1/routes/x", None, 400, "not a number"),
        ("GET", "/api/v1/nothing", None, 404, "no such endpoint"),
    ];
    for (method, path, body, status, reason) in cases {
        let (got, answer) = api(&hub, method, path, body);
        assert_eq!(got, status, "{method} {path}: {answer}");
        let text = answer["error"].as_str().unwrap_or_else(|| panic!("{method} {path}: no error text: {answer}"));
        assert!(text.contains(reason), "{method} {path}: {text}");
    }
    ok(&hub, "POST", "/api/v1/ports/a/unplug", None);
    let (status, answer) = api(&hub, "POST", "/api/v1/ports/a/unplug", None);
    assert_eq!((status, answer["error"].as_str().unwrap()), (409, "port 'a' is already unplugged"));
    ok(&hub, "POST", "/api/v1/ports/a/plug", Some(json!({"channel": "can0"})));
    ok(&hub, "POST", "/api/v1/channels/can0/cut", Some(json!({"ports": ["a"]})));
    let (status, _) = api(&hub, "POST", "/api/v1/channels/can0/cut", Some(json!({"ports": ["b"]})));
    assert_eq!(status, 409);
    ok(&hub, "POST", "/api/v1/channels/can0/repair", None);
    b.send(7, 1000);
    assert_eq!(a.heard().len(), 1000, "traffic flows after all the bad requests");
}

#[test]
fn control_api_requires_the_token_when_the_hub_has_one() {
    let hub = FIELDHUB.start_with_token("sesame");
    let (status, answer) = api(&hub, "GET", "/api/v1/ports", None);
    assert_eq!(status, 401);
    assert!(answer["error"].as_str().unwrap().contains("Bearer"));
    let with_token = ureq::get(&format!("{}/api/v1/ports", base(&hub))).set("Authorization", "Bearer sesame").call();
    assert_eq!(with_token.unwrap().status(), 200);
}

#[test]
fn openapi_document_is_served() {
    let hub = FIELDHUB.start();
    let text = ureq::get(&format!("{}/openapi.yaml", base(&hub))).call().unwrap().into_string().unwrap();
    assert!(text.starts_with("openapi: 3"));
    assert_eq!(text, include_str!("../../../../spec/control-api.yaml"));
}

#[test]
fn ctl_command_rewires_and_reports_errors_in_words() {
    let hub = FIELDHUB.start();
    let (a, b) = (node(&hub, "a", "can0"), node(&hub, "b", "can0"));
    let ctl = |args: &[&str]| FIELDHUB.command().arg("ctl").args(["--hub", &hub.url]).args(args).output().unwrap();
    let out = ctl(&["unplug", "b"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    a.send(1, 10);
    assert!(b.heard().is_empty());
    assert!(ctl(&["plug", "b", "can0"]).status.success());
    let ports: Value = serde_json::from_slice(&ctl(&["ports"]).stdout).unwrap();
    assert_eq!(ports.as_array().unwrap().len(), 2);
    let out = ctl(&["unplug", "nobody"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("404: no open port named 'nobody'"));
    let out = ctl(&["bridge", "can0", "can1", "--id", "100", "--mask", "7FF", "--rewrite-id", "200"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // An identifier without a mask is that identifier, not every frame.
    let out = ctl(&["bridge", "can1", "can0", "--id", "123"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let route: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((route["id"].as_u64(), route["mask"].as_u64()), (Some(0x123), Some(0x1FFF_FFFF)), "{route}");
}

#[test]
fn channels_are_created_changed_and_removed_while_the_bus_runs() {
    let hub = FIELDHUB.start();
    let a = node(&hub, "a", "can0");
    let created =
        ok(&hub, "POST", "/api/v1/channels", Some(json!({"name": "body", "protocol": "canfd", "bitrate": 250000})));
    assert_eq!((created["name"].as_str(), created["bitrate"].as_u64()), (Some("body"), Some(250000)));
    let (x, y) = (node(&hub, "x", "body"), node(&hub, "y", "body"));
    x.send(9, 100);
    assert_eq!(tags(&y.heard()), [9]);
    let changed = ok(&hub, "PATCH", "/api/v1/channels/body", Some(json!({"timing": "timed", "bitrate": 1000000})));
    assert_eq!((changed["timing"].as_str(), changed["bitrate"].as_u64()), (Some("timed"), Some(1000000)));
    x.send(8, 100);
    let heard = y.heard();
    assert_eq!((tags(&heard), heard.len()), (vec![8], 100), "timed now, nothing lost");
    let clients = ok(&hub, "GET", "/api/v1/clients", None);
    assert_eq!(clients.as_array().unwrap().len(), 3);
    assert_eq!(clients[1]["ports"][0], "x");

    let (status, answer) = api(&hub, "DELETE", "/api/v1/channels/body", None);
    assert_eq!(status, 409, "{answer}");
    assert!(answer["error"].as_str().unwrap().contains("2 port(s)"));
    ok(&hub, "POST", "/api/v1/ports/x/plug", Some(json!({"channel": "can0"})));
    ok(&hub, "POST", "/api/v1/ports/y/plug", Some(json!({"channel": "can0"})));
    ok(&hub, "DELETE", "/api/v1/channels/body", None);
    let names: Vec<String> = ok(&hub, "GET", "/api/v1/channels", None)
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["can0", "can1"]);
    x.send(7, 10);
    assert_eq!(tags(&a.heard()), [7]);

    for (method, path, body, status, reason) in [
        ("POST", "/api/v1/channels", json!({"name": "can0"}), 409, "exists already"),
        ("POST", "/api/v1/channels", json!({"name": "bad name"}), 422, "name"),
        ("POST", "/api/v1/channels", json!({"name": "z", "bitrate": 0}), 422, "bitrate"),
        ("POST", "/api/v1/channels", json!({"name": "z", "data_bitrate": 2000000}), 422, "only protocol"),
        ("POST", "/api/v1/channels", json!({"name": "z", "speed": 1}), 400, "speed"),
        ("PATCH", "/api/v1/channels/can0", json!({"timing": "warp"}), 400, "warp"),
        ("PATCH", "/api/v1/channels/can0", json!({"bitrate": 5000000}), 422, "bitrate"),
        ("PATCH", "/api/v1/channels/nope", json!({"bitrate": 1000}), 404, "nope"),
        ("DELETE", "/api/v1/channels/nope", json!(null), 404, "nope"),
    ] {
        let body = (!body.is_null()).then_some(body);
        let (got, answer) = api(&hub, method, path, body);
        assert_eq!(got, status, "{method} {path}: {answer}");
        assert!(answer["error"].as_str().unwrap().contains(reason), "{method} {path}: {answer}");
    }
}

#[test]
fn recording_shorting_and_state_requests_refuse_bad_input_with_reasons() {
    let dir = std::env::temp_dir().join(format!("fieldhub-api-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let hub = FIELDHUB.start_with(None, &["--recordings-dir", dir.to_str().unwrap()]);
    let _a = node(&hub, "a", "can0");
    let log = "x.log";
    let cases: Vec<(&str, String, Option<Value>, u16, &str)> = vec![
        ("POST", "/api/v1/recordings".into(), Some(json!({"path": "x.txt"})), 422, "cannot tell the format"),
        (
            "POST",
            "/api/v1/recordings".into(),
            Some(json!({"path": log, "format": "pcap"})),
            422,
            "neither candump nor asc",
        ),
        ("POST", "/api/v1/recordings".into(), Some(json!({"path": log, "channels": ["nope"]})), 404, "nope"),
        ("POST", "/api/v1/recordings".into(), Some(json!({"path": "nonexistent-dir/x.log"})), 400, "create it first"),
        ("POST", "/api/v1/recordings".into(), Some(json!({"file": log})), 400, "file"),
        ("DELETE", "/api/v1/recordings/5".into(), None, 404, "no recording with id 5"),
        ("DELETE", "/api/v1/recordings/five".into(), None, 400, "not a number"),
        ("POST", "/api/v1/channels/can0/unshort".into(), None, 409, "not shorted"),
        ("POST", "/api/v1/channels/nope/short".into(), None, 404, "nope"),
        ("POST", "/api/v1/ports/ghost/state".into(), Some(json!({"state": "bus_off"})), 404, "ghost"),
        ("POST", "/api/v1/ports/a/state".into(), None, 400, "invalid request body"),
    ];
    for (method, path, body, status, reason) in cases {
        let (got, answer) = api(&hub, method, &path, body);
        assert_eq!(got, status, "{method} {path}: {answer}");
        assert!(answer["error"].as_str().unwrap().contains(reason), "{method} {path}: {answer}");
    }
    let started = ok(&hub, "POST", "/api/v1/recordings", Some(json!({"path": log})));
    let (status, answer) = api(&hub, "POST", "/api/v1/recordings", Some(json!({"path": log})));
    assert_eq!((status, answer["error"].as_str().unwrap().contains("being recorded already")), (409, true));
    ok(&hub, "DELETE", &format!("/api/v1/recordings/{}", started["id"]), None);
    ok(&hub, "POST", "/api/v1/channels/can0/short", None);
    assert_eq!(api(&hub, "POST", "/api/v1/channels/can0/short", None).0, 409);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The README's first `ctl` command: tools that reach the hub through
/// shared memory (the default URL) find its control API too, through the
/// address the hub publishes next to its session socket — and say so
/// plainly when there is none.
#[test]
fn ctl_reaches_the_control_api_through_an_shm_url() {
    let hub = FIELDHUB.start_shm_with(None, &[]);
    let shm_url = hub.shm_url.clone().expect("a hub serving shm");
    let _a = node(&hub, "a", "can0");
    let ctl =
        |url: &str, args: &[&str]| FIELDHUB.command().arg("ctl").args(["--hub", url]).args(args).output().unwrap();
    let out = ctl(&shm_url, &["ports"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let ports: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(ports.as_array().unwrap().len(), 1);
    let name = shm_url.strip_prefix("shm://").unwrap();
    let control = fieldhub_shm::socket::control_path(name).unwrap();
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&control).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600, "the control file is the owner's only");
    assert!(hub.terminate().success());
    assert!(!control.exists(), "a hub that stops takes its control file away");
    let out = ctl("shm://no-such-hub-here", &["ports"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("publishes no control address"));
}

#[test]
fn recordings_are_written_only_to_regular_files_inside_the_recordings_directory() {
    let dir = std::env::temp_dir().join(format!("fieldhub-recdir-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("rec/sub")).unwrap();
    let outside = dir.join("outside.log");
    std::os::unix::fs::symlink(&dir, dir.join("rec/out")).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("rec/link.log")).unwrap();
    let fifo = std::ffi::CString::new(dir.join("rec/pipe.log").to_str().unwrap()).unwrap();
    // SAFETY: mkfifo(3) reads a NUL-terminated path we own.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let hub = FIELDHUB.start_with(None, &["--recordings-dir", dir.join("rec").to_str().unwrap()]);
    let refusals = [
        (outside.display().to_string(), "is absolute"),
        ("/proc/self/mem".to_owned(), "is absolute"),
        ("../outside.log".to_owned(), "contains '..'"),
        ("sub/../../outside.log".to_owned(), "contains '..'"),
        ("out/outside.log".to_owned(), "leads outside"),
        ("link.log".to_owned(), "is a symbolic link"),
        ("pipe.log".to_owned(), "is a FIFO, not a regular file"),
        ("sub".to_owned(), "is a directory"),
        (String::new(), "names no file"),
    ];
    for (path, reason) in refusals {
        let (status, answer) = api(&hub, "POST", "/api/v1/recordings", Some(json!({ "path": path })));
        assert_eq!(status, 400, "{path}: {answer}");
        assert!(answer["error"].as_str().unwrap().contains(reason), "{path}: {answer}");
    }
    assert!(!outside.exists(), "nothing was written outside the directory");
    let started = ok(&hub, "POST", "/api/v1/recordings", Some(json!({"path": "sub/good.log"})));
    ok(&hub, "DELETE", &format!("/api/v1/recordings/{}", started["id"]), None);
    assert!(dir.join("rec/sub/good.log").is_file());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every mistake is answered in JSON, a method an endpoint does not take
/// (405) included.
#[test]
fn a_method_an_endpoint_does_not_take_is_a_json_error() {
    let hub = FIELDHUB.start();
    let (status, answer) = api(&hub, "PUT", "/api/v1/channels", None);
    assert_eq!(status, 405);
    assert!(answer["error"].as_str().unwrap().contains("does not take that method"), "{answer}");
}

/// One raw HTTP request with the headers a browser would send: the status.
fn browser_request(hub: &HubProcess, method: &str, path: &str, host: &str, origin: Option<&str>) -> u16 {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(hub.url.trim_start_matches("tcp://")).unwrap();
    let origin = origin.map(|o| format!("Origin: {o}\r\n")).unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\n{origin}Content-Type: text/plain\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
}

#[test]
fn another_sites_page_and_a_rebound_host_name_cannot_use_the_api() {
    let hub = FIELDHUB.start();
    let _ecu = node(&hub, "ecu", "can0");
    let host = hub.url.trim_start_matches("tcp://").to_owned();
    let unplug = "/api/v1/ports/ecu/unplug";
    // A cross-site form post: refused, and the port stays plugged.
    assert_eq!(browser_request(&hub, "POST", unplug, &host, Some("https://evil.example")), 403);
    // DNS rebinding: the attacker's name resolves to the hub, same-origin.
    let rebound = "rebind.attacker.test:29536";
    assert_eq!(browser_request(&hub, "POST", unplug, rebound, Some(&format!("http://{rebound}"))), 403);
    assert_eq!(browser_request(&hub, "GET", "/api/v1/stats", rebound, None), 403);
    assert_eq!(ok(&hub, "GET", "/api/v1/ports", None)[0]["plugged"], true);
    // The hub's own page (same origin, by address) and tools are served.
    assert_eq!(browser_request(&hub, "POST", unplug, &host, Some(&format!("http://{host}"))), 200);
    assert_eq!(ok(&hub, "GET", "/api/v1/ports", None)[0]["plugged"], false);
}
