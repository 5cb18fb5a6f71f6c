//! Rest-bus simulation through a real hub in virtual time (`[[rbs]]`,
//! `docs/rest-bus.md`): over 10 s of bus time every simulated message is on
//! the bus at its exact cycle, python `cantools` decodes each frame to the
//! DBC's start values, the alive counter counts and wraps, the checksum
//! `cantools` decodes is the one an independent CRC-8 here computes; a
//! value set through the control API is in the message's next cycle, and
//! the event message goes once at the start and once on the change.
//! The device under test joins at bus time 0, after that instant's cycles.

use std::collections::BTreeMap;
use std::process::Command;

use crate::FIELDHUB;
use fieldhub_client::{Client, ClientOptions, PortConfig};
use fieldhub_testkit::{ok, HubProcess};
use serde_json::json;

const MS: u64 = 1_000_000;
/// The DBC of the engine's own tests: EngineStatus (10 ms, counter and
/// CRC), BodyMux (100 ms after 5 ms, multiplexed), BodyEvent (on change),
/// DutCommand (the device under test's, not simulated).
const DBC: &str = include_str!("../../../fieldhub-rbs/tests/data/body.dbc");
/// The project's python venv (`make python-env`), which has `cantools`.
const PYTHON: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../.venv/bin/python");

/// Decodes `(name, signals)` per line of `ID#HEX` on stdin, as JSON.
const DECODE: &str = r##"
import json, sys, cantools
db = cantools.database.load_file(sys.argv[1])
out = []
for line in sys.stdin:
    ident, data = line.split("#")
    message = db.get_message_by_frame_id(int(ident, 16))
    out.append([message.name, message.decode(bytes.fromhex(data.strip()), decode_choices=False)])
print(json.dumps(out))
"##;

/// CRC-8/SAE-J1850 bit by bit (poly 0x1D, init 0xFF, xorout 0xFF).
fn j1850(bytes: &[u8]) -> u8 {
    let mut crc = 0xFFu8;
    for &b in bytes {
        crc ^= b;
        for _ in 0..8 {
            crc = if crc & 0x80 != 0 { (crc << 1) ^ 0x1D } else { crc << 1 };
        }
    }
    crc ^ 0xFF
}

struct Seen {
    t_ns: u64,
    id: u32,
    data: Vec<u8>,
}

fn decode(dbc: &std::path::Path, frames: &[Seen]) -> Vec<(String, BTreeMap<String, f64>)> {
    let mut child = Command::new(PYTHON)
        .args(["-c", DECODE, dbc.to_str().unwrap()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{PYTHON} with cantools is needed (make python-env): {e}"));
    let lines: String = frames.iter().map(|f| format!("{:03X}#{}\n", f.id, hex(&f.data))).collect();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), lines.as_bytes()).unwrap();
    drop(child.stdin.take());
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "cantools failed (make python-env installs it)");
    serde_json::from_slice(&output.stdout).expect("cantools' decoded frames")
}

fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02X}")).collect()
}

fn start(dir: &std::path::Path) -> HubProcess {
    let dbc = dir.join("body.dbc");
    std::fs::write(&dbc, DBC).unwrap();
    let config = format!(
        r#"
        [hub]
        time = "virtual"
        time_participants = ["dut"]
        [[channel]]
        name = "can0"
        [[rbs]]
        dbc = "{}"
        channel = "can0"
        except = ["DUT"]
        [[rbs.counter]]
        message = "EngineStatus"
        signal = "Counter"
        max = 14
        [[rbs.checksum]]
        message = "EngineStatus"
        signal = "Checksum"
        algorithm = "crc8-sae-j1850"
        "#,
        dbc.display()
    );
    FIELDHUB.start_with(Some(&config), &[])
}

/// The device under test steps `until_ms` in 10 ms steps, reading what it
/// receives; at 5 s the test sets two signals through the control API.
fn run_dut(hub: &HubProcess, until_ms: u64) -> Vec<Seen> {
    let options = ClientOptions { name: "dut".into(), synchronized: true, ..Default::default() };
    let dut = Client::connect_with(&hub.url, &options).expect("connect as a synchronised participant");
    dut.open_port_with("can0", &PortConfig { name: Some("dut".into()), ..Default::default() }).unwrap();
    let mut seen = Vec::new();
    while dut.now().unwrap() < until_ms * MS {
        if dut.now().unwrap() == 5_000 * MS {
            ok(hub, "POST", "/api/v1/rbs", Some(json!({"message": "EngineStatus", "set": {"Rpm": 1000.0}})));
            ok(hub, "POST", "/api/v1/rbs", Some(json!({"message": "BodyEvent", "set": {"Horn": 1}})));
        }
        dut.step(dut.now().unwrap() + 10 * MS).unwrap();
        while let Some(rx) = dut.try_recv().unwrap() {
            seen.push(Seen { t_ns: rx.meta.timestamp_ns, id: rx.frame.id(), data: rx.frame.data().to_vec() });
        }
    }
    seen
}

#[test]
fn ten_seconds_of_a_simulated_network_decode_to_the_dbc_with_exact_cycles_counters_and_crcs() {
    let dir = std::env::temp_dir().join(format!("fieldhub-rbs-{}-{}", std::process::id(), fieldhub_testkit::unique()));
    std::fs::create_dir_all(&dir).unwrap();
    let hub = start(&dir);
    let seen = run_dut(&hub, 10_000);
    let decoded = decode(&dir.join("body.dbc"), &seen);
    let _ = std::fs::remove_dir_all(&dir);

    let times = |id: u32| seen.iter().filter(|s| s.id == id).map(|s| s.t_ns).collect::<Vec<_>>();
    // The cycles at bus time 0 went before the device under test joined.
    assert_eq!(times(0x100), (1..=1000).map(|k| k * 10 * MS).collect::<Vec<_>>(), "EngineStatus every 10 ms");
    assert_eq!(times(0x200), (0..100).map(|k| 5 * MS + k * 100 * MS).collect::<Vec<_>>(), "BodyMux from 5 ms");
    assert_eq!(times(0x300), [5_000 * MS], "BodyEvent on the change");
    assert!(times(0x400).is_empty(), "DutCommand is the device under test's");

    let mut counter = 1.0;
    for (frame, (name, signals)) in seen.iter().zip(&decoded) {
        match name.as_str() {
            "EngineStatus" => {
                assert_eq!(signals["Counter"], counter, "at {} ns", frame.t_ns);
                counter = (counter + 1.0) % 15.0;
                assert_eq!(signals["Checksum"], f64::from(j1850(&frame.data[1..])), "at {} ns", frame.t_ns);
                let rpm = if frame.t_ns > 5_000 * MS { 1000.0 } else { 800.0 };
                assert_eq!((signals["Rpm"], signals["CoolantTemp"]), (rpm, 90.0), "at {} ns", frame.t_ns);
            }
            "BodyMux" => assert_eq!((signals["Page"], signals["DoorsOpen"]), (1.0, 3.0)),
            "BodyEvent" => assert_eq!(signals["Horn"], if frame.t_ns == 0 { 0.0 } else { 1.0 }),
            other => panic!("unexpected message {other}"),
        }
    }
    let listed = ok(&hub, "GET", "/api/v1/rbs", None);
    let sent = |m: usize| (listed[0]["messages"][m]["name"].as_str(), listed[0]["messages"][m]["sent"].as_u64());
    assert_eq!(sent(0), (Some("EngineStatus"), Some(1001)), "{listed}");
    assert_eq!(sent(2), (Some("BodyEvent"), Some(2)), "at the start and on the change: {listed}");
    assert_eq!(listed[0]["messages"][0]["signals"]["Rpm"], 1000.0);
}
