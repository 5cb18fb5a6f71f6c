//! Per-client permissions (`[[access]]`) through real hub processes: the
//! binary reads each access's token file; a port's rights on a channel are
//! its grant's (refused, read-only, transmit-only); the control API answers
//! an access without `control` GET only, and adds a gateway only for one
//! that reads its `from` and sends on its `to`; configuration mistakes are
//! named with their line.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::FIELDHUB;
use fieldhub_client::{Client, ClientOptions, ErrorCode, PortConfig};
use fieldhub_testkit::{base, control, HubProcess};

/// A directory holding owner-only token files, and the config naming them.
struct Tokens {
    dir: tempfile::TempDir,
}

impl Tokens {
    fn new(tokens: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        for (name, secret) in tokens {
            let path = dir.path().join(format!("{name}.token"));
            std::fs::write(&path, format!("{secret}\n")).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        Self { dir }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(format!("{name}.token"))
    }
}

/// Three channels; `hil` reads can0 and can1 and writes can0, `gen` writes
/// every channel and reads none, `ops` reads everything and may control.
fn config(tokens: &Tokens) -> String {
    format!(
        r#"
[hub]
token = "sesame"
[[channel]]
name = "can0"
[[channel]]
name = "can1"
[[channel]]
name = "can2"
[[access]]
name = "hil-tester"
token_file = "{}"
read = ["can0", "can1"]
write = ["can0"]
[[access]]
name = "gen"
token_file = "{}"
write = ["*"]
[[access]]
name = "ops"
token_file = "{}"
read = ["*"]
control = true
"#,
        tokens.file("hil").display(),
        tokens.file("gen").display(),
        tokens.file("ops").display()
    )
}

fn start() -> (HubProcess, Tokens) {
    let tokens = Tokens::new(&[("hil", "hil-secret"), ("gen", "gen-secret"), ("ops", "ops-secret")]);
    (FIELDHUB.start_with(Some(&config(&tokens)), &[]), tokens)
}

fn client(hub: &HubProcess, name: &str, token: &str) -> Client {
    let options = ClientOptions { name: name.into(), token: Some(token.into()), ..Default::default() };
    Client::connect_with(&hub.url, &options).unwrap()
}

/// (status, body) of one control API call with `token`.
fn call(hub: &HubProcess, method: &str, path: &str, token: &str, body: Option<&str>) -> (u16, String) {
    let request = control::request(hub, method, path, Some(token));
    let answer = match body {
        Some(body) => request.set("Content-Type", "application/json").send_string(body),
        None => request.call(),
    };
    let (status, response) = control::answered(answer, &format!("{method} {path}"));
    (status, response.into_string().unwrap())
}

fn numbered(n: u32) -> fieldhub_client::Frame {
    fieldhub_client::Frame::can(0x100, false, &n.to_le_bytes()).unwrap()
}

#[test]
fn a_channel_outside_the_grant_cannot_be_opened_and_a_read_only_channel_refuses_frames() {
    let (hub, _tokens) = start();
    let hil = client(&hub, "hil", "hil-secret");
    let Err(refused) = hil.open_port("can2") else { panic!("can2 is outside its grant") };
    assert_eq!(refused.code(), Some(ErrorCode::Unauthorized), "{refused}");
    assert!(refused.to_string().contains("access 'hil-tester' may not use channel 'can2'"), "{refused}");

    let ecu = client(&hub, "ecu", "sesame");
    let tx = ecu.open_port("can1").unwrap();
    let reading = hil.open_port("can1").unwrap();
    for n in 0..100 {
        ecu.send(&tx, &numbered(n)).unwrap();
    }
    ecu.flush().unwrap();
    for n in 0..100u32 {
        let rx = hil.recv(Some(fieldhub_testkit::PATIENCE)).unwrap().expect("it reads can1");
        assert_eq!(rx.frame.data(), n.to_le_bytes());
    }
    hil.send(&reading, &numbered(7)).unwrap();
    let refused = hil.flush().expect_err("can1 is read-only for it");
    assert_eq!(refused.code(), Some(ErrorCode::Unauthorized), "{refused}");
    assert!(refused.to_string().contains("access 'hil-tester' may receive on its channel, not send"), "{refused}");
    ecu.flush().unwrap();
    assert!(ecu.try_recv().unwrap().is_none(), "nothing it sent on can1 reached the bus");

    // can0 it reads and writes.
    let both = hil.open_port("can0").unwrap();
    let listen = ecu.open_port("can0").unwrap();
    hil.send(&both, &numbered(1)).unwrap();
    hil.flush().unwrap();
    let rx = ecu.recv(Some(fieldhub_testkit::PATIENCE)).unwrap().expect("its frame on can0 arrives");
    assert_eq!((rx.port, rx.frame.data()), (listen.handle, &1u32.to_le_bytes()[..]));
}

#[test]
fn a_write_only_grant_sends_a_thousand_frames_in_order_and_hears_only_its_echoes() {
    let (hub, _tokens) = start();
    let gen = client(&hub, "gen", "gen-secret");
    let ecu = client(&hub, "ecu", "sesame");
    let ecu_port = ecu.open_port("can0").unwrap();
    let tx = gen.open_port_with("can0", &PortConfig { receive_own: true, ..Default::default() }).unwrap();
    for n in 0..1000 {
        gen.send(&tx, &numbered(n)).unwrap();
    }
    gen.flush().unwrap();
    let mut last_seq = 0;
    for n in 0..1000u32 {
        let rx = ecu.recv(Some(fieldhub_testkit::PATIENCE)).unwrap().expect("every frame arrives");
        assert_eq!(rx.frame.data(), n.to_le_bytes(), "frame {n} in order");
        assert!(rx.meta.seq > last_seq, "sequence numbers rise");
        last_seq = rx.meta.seq;
    }
    ecu.send(&ecu_port, &numbered(4242)).unwrap();
    ecu.flush().unwrap();
    for n in 0..1000u32 {
        let rx = gen.recv(Some(fieldhub_testkit::PATIENCE)).unwrap().expect("its echoes arrive");
        assert!(rx.frame.is_echo() && rx.frame.data() == n.to_le_bytes(), "echo {n}: {:?}", rx.frame);
    }
    gen.flush().unwrap();
    assert!(gen.try_recv().unwrap().is_none(), "the ECU's frame never reaches a write-only port");
}

#[test]
fn control_needs_control_and_reading_is_everyones() {
    let (hub, _tokens) = start();
    let fault = r#"{"channel": "can0", "at": "bus", "action": {"type": "drop"}}"#;
    let (status, body) = call(&hub, "GET", "/api/v1/stats", "hil-secret", None);
    assert_eq!(status, 200, "{body}");
    let (status, body) = call(&hub, "POST", "/api/v1/faults", "hil-secret", Some(fault));
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("access 'hil-tester' may not control the hub"), "{body}");
    let (status, body) = call(&hub, "POST", "/api/v1/channels/can0/short", "gen-secret", None);
    assert_eq!(status, 403, "{body}");
    let (_, faults) = call(&hub, "GET", "/api/v1/faults", "hil-secret", None);
    assert_eq!(faults.trim(), "[]", "the refused request changed nothing");
    let (status, body) = call(&hub, "POST", "/api/v1/faults", "ops-secret", Some(fault));
    assert_eq!(status, 200, "control = true changes the hub: {body}");
    let (status, body) = call(&hub, "POST", "/api/v1/channels/can2/short", "ops-secret", None);
    assert_eq!(status, 200, "{body}");
}

#[test]
fn adding_a_gateway_needs_control_reading_its_from_and_sending_on_its_to() {
    let (hub, _tokens) = start();
    let gateway = r#"{"from": "can0", "to": "can1", "can_id": 288, "lin_id": 32}"#;
    let (status, body) = call(&hub, "POST", "/api/v1/gateways", "hil-secret", Some(gateway));
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("access 'hil-tester' may not control the hub"), "{body}");
    // ops controls and reads everything, but sends on nothing: a gateway sends on its `to`.
    let (status, body) = call(&hub, "POST", "/api/v1/gateways", "ops-secret", Some(gateway));
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("may not send on channel 'can1', so it may not add a gateway there"), "{body}");
    let (status, body) = call(&hub, "DELETE", "/api/v1/gateways/0", "hil-secret", None);
    assert_eq!(status, 403, "{body}");
    // The hub's token passes; the table itself is then checked.
    let (status, body) = call(&hub, "POST", "/api/v1/gateways", "sesame", Some(gateway));
    assert_eq!(status, 422, "{body}");
    assert!(body.contains("to: 'can0' and 'can1' are both CAN channels"), "{body}");
}

#[test]
fn adding_a_route_needs_control_reading_its_from_and_sending_on_its_to() {
    let (hub, _tokens) = start();
    let route = r#"{"from": "can0", "to": "can1"}"#;
    let (status, body) = call(&hub, "POST", "/api/v1/routes", "hil-secret", Some(route));
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("access 'hil-tester' may not control the hub"), "{body}");
    // ops controls and reads everything, but sends on nothing: a route sends on its `to`.
    let (status, body) = call(&hub, "POST", "/api/v1/routes", "ops-secret", Some(route));
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("may not send on channel 'can1', so it may not add a route there"), "{body}");
    let (_, routes) = call(&hub, "GET", "/api/v1/routes", "ops-secret", None);
    assert_eq!(routes.trim(), "[]", "the refused request changed nothing");
    let (status, body) = call(&hub, "POST", "/api/v1/routes", "sesame", Some(route));
    assert_eq!(status, 200, "the hub's token reads and sends everywhere: {body}");
}

#[test]
fn the_clients_listing_names_each_clients_access() {
    let (hub, _tokens) = start();
    let _hil = client(&hub, "hil", "hil-secret");
    let _ecu = client(&hub, "ecu", "sesame");
    let (_, body) = call(&hub, "GET", "/api/v1/clients", "ops-secret", None);
    let clients: serde_json::Value = serde_json::from_str(&body).unwrap();
    let access_of =
        |name: &str| clients.as_array().unwrap().iter().find(|c| c["name"] == name).unwrap()["access"].clone();
    assert_eq!(access_of("hil"), "hil-tester");
    assert_eq!(access_of("ecu"), serde_json::Value::Null);
}

/// `fieldhub hub --check-config` on `text`: its error output.
fn check_config(dir: &Path, text: &str) -> String {
    let path = dir.join("hub.toml");
    std::fs::write(&path, text).unwrap();
    let out = FIELDHUB
        .command()
        .args(["hub", "--check-config", "--config"])
        .arg(&path)
        .env_remove("FIELDHUB_TOKEN")
        .env_remove("FIELDHUB_TOKEN_FILE")
        .output()
        .unwrap();
    assert!(!out.status.success(), "the configuration was accepted:\n{text}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn configuration_mistakes_are_named_with_their_line() {
    let tokens = Tokens::new(&[("hil", "hil-secret"), ("gen", "gen-secret"), ("ops", "ops-secret"), ("dup", "sesame")]);
    let good = config(&tokens);
    let dir = tokens.dir.path();

    let err = check_config(dir, &good.replace(r#"write = ["can0"]"#, r#"write = ["can9"]"#));
    assert!(err.contains("line 14: access[0].write: no channel named 'can9'"), "{err}");

    let err = check_config(dir, &good.replace("token = \"sesame\"\n", ""));
    assert!(err.contains("access[0].token_file: needs the hub's token"), "{err}");
    assert!(err.contains("line 11"), "{err}");

    let err = check_config(dir, &good.replace("name = \"gen\"", "name = \"hil-tester\""));
    assert!(err.contains("line 16: access[1].name: access 'hil-tester' is defined twice"), "{err}");

    let dup = tokens.file("dup");
    let err = check_config(dir, &good.replace(&tokens.file("gen").display().to_string(), &dup.display().to_string()));
    assert!(err.contains("line 17: access[1].token_file: holds the same token as the hub's token"), "{err}");
}

/// The status line of a WebSocket upgrade of `GET path` with `token`, and
/// the body when it was refused.
fn upgrade(hub: &HubProcess, path: &str, token: &str) -> String {
    use std::io::{Read, Write};
    let authority = base(hub).trim_start_matches("http://").to_owned();
    let mut stream = std::net::TcpStream::connect(&authority).unwrap();
    stream.set_read_timeout(Some(fieldhub_testkit::PATIENCE)).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer {token}\r\nConnection: Upgrade\r\n\
         Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    )
    .unwrap();
    let mut answer = Vec::new();
    let mut chunk = [0; 4096];
    // The head (and a refusal's short body) arrive together; a 101 keeps the
    // connection open, so stop at the first read.
    let n = stream.read(&mut chunk).unwrap();
    answer.extend_from_slice(&chunk[..n]);
    String::from_utf8_lossy(&answer).into_owned()
}

#[test]
fn the_monitor_stream_shows_only_channels_the_access_may_read() {
    let (hub, _tokens) = start();
    let answer = upgrade(&hub, "/api/v1/monitor?channels=can2", "hil-secret");
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert!(answer.contains("access 'hil-tester' may not read channel 'can2'"), "{answer}");
    let answer = upgrade(&hub, "/api/v1/monitor?channels=can0,can1", "hil-secret");
    assert!(answer.starts_with("HTTP/1.1 101"), "{answer}");
    let answer = upgrade(&hub, "/api/v1/monitor", "hil-secret");
    assert!(answer.starts_with("HTTP/1.1 101"), "every channel, for it, is those it reads: {answer}");
    let answer = upgrade(&hub, "/api/v1/monitor", "gen-secret");
    assert!(answer.starts_with("HTTP/1.1 403") && answer.contains("may read no channel"), "{answer}");
    let (status, body) = call(&hub, "GET", "/api/v1/recording-file?path=x.log", "hil-secret", None);
    assert_eq!(status, 403, "a recording may hold channels it may not read: {body}");
}
