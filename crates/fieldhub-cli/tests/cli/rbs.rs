//! `fieldhub ctl rbs` and `fieldhub rbs` against real hubs: a simulation's
//! messages listed with their values, set, ramped, stopped, started and
//! faulted by name; a DBC simulated on a running hub for as long as the
//! command runs; a broken DBC refused naming its line.

use std::process::{Command, Stdio};

use crate::FIELDHUB;
use fieldhub_client::PortConfig;
use fieldhub_testkit::*;
use serde_json::Value;

const DBC: &str = include_str!("../../../fieldhub-rbs/tests/data/body.dbc");

fn fieldhub(hub: &HubProcess, args: &[&str]) -> std::process::Output {
    let (tool, rest) = args.split_first().expect("a subcommand");
    FIELDHUB.command().arg(tool).args(["--hub", &hub.url]).args(rest).output().expect("run fieldhub")
}

/// Its JSON output, after checking it succeeded.
fn json_of(out: std::process::Output) -> Value {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

/// A directory of its own with the test DBC in it, removed when dropped.
struct Dir(std::path::PathBuf);

impl Dir {
    fn with_dbc() -> Self {
        let dir = std::env::temp_dir().join(format!("fieldhub-cli-rbs-{}-{}", std::process::id(), unique()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("body.dbc"), DBC).unwrap();
        Self(dir)
    }

    fn dbc(&self) -> String {
        self.0.join("body.dbc").display().to_string()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn ctl_rbs_lists_sets_ramps_stops_and_faults_messages_by_name() {
    let dir = Dir::with_dbc();
    let config = format!(
        "[[channel]]\nname = \"can0\"\n\n[[rbs]]\ndbc = \"{}\"\nchannel = \"can0\"\nexcept = [\"DUT\"]\n\n\
         [[rbs.counter]]\nmessage = \"EngineStatus\"\nsignal = \"Counter\"\n",
        dir.dbc()
    );
    let hub = FIELDHUB.start_with(Some(&config), &[]);
    let listed = json_of(fieldhub(&hub, &["ctl", "rbs"]));
    let names: Vec<&str> =
        listed[0]["messages"].as_array().unwrap().iter().map(|m| m["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["EngineStatus", "BodyMux", "BodyEvent"]);
    assert_eq!(listed[0]["messages"][0]["signals"]["Rpm"], 800.0);

    let set = json_of(fieldhub(&hub, &["ctl", "rbs", "set", "EngineStatus", "Rpm=1000", "CoolantTemp=20"]));
    assert_eq!((set["signals"]["Rpm"].as_f64(), set["signals"]["CoolantTemp"].as_f64()), (Some(1000.0), Some(20.0)));
    let ramp = json_of(fieldhub(&hub, &["ctl", "rbs", "ramp", "EngineStatus", "Rpm=3000", "--over", "2s"]));
    assert_eq!(ramp["ramps"]["Rpm"], serde_json::json!({"to": 3000.0, "ms": 2000.0}));
    assert_eq!(json_of(fieldhub(&hub, &["ctl", "rbs", "stop", "BodyMux"]))["enabled"], false);
    assert_eq!(json_of(fieldhub(&hub, &["ctl", "rbs", "start", "BodyMux"]))["enabled"], true);
    let node = json_of(fieldhub(&hub, &["ctl", "rbs", "stop-node", "BODY"]));
    let messages = node["messages"].as_array().unwrap();
    assert_eq!(
        messages.iter().map(|m| (m["name"].as_str().unwrap(), m["enabled"].as_bool().unwrap())).collect::<Vec<_>>(),
        [("BodyMux", false), ("BodyEvent", false)]
    );
    assert_eq!(json_of(fieldhub(&hub, &["ctl", "rbs", "start-node", "BODY"]))["enabled"], true);
    assert_eq!(json_of(fieldhub(&hub, &["ctl", "rbs", "counter", "EngineStatus", "stuck"]))["counter_stuck"], true);
    assert_eq!(json_of(fieldhub(&hub, &["ctl", "rbs", "checksum", "EngineStatus", "wrong"]))["checksum_wrong"], true);

    for (args, needle) in [
        (&["set", "EngineStatus", "CoolantTemp=300"][..], "CoolantTemp: 300 is outside its range -40..=215"),
        (&["set", "EngineStatus", "Counter=3"], "Counter: it is the message's alive counter"),
        (&["set", "EngineStatus", "Rpm"], "'Rpm' is not SIGNAL=VALUE"),
        (&["set", "Nope", "X=1"], "simulation 0 sends no message 'Nope'; it sends: EngineStatus, BodyMux, BodyEvent"),
        (&["ramp", "BodyEvent", "Horn=1", "--over", "1s"], "BodyEvent is sent on change"),
        (&["--sim", "4", "stop", "BodyMux"], "no rest-bus simulation 4 runs"),
        (&["stop-node", "BRAKES"], "simulation 0 simulates no node 'BRAKES'; it simulates: ENGINE, BODY"),
    ] {
        let out = fieldhub(&hub, &[&["ctl", "rbs"][..], args].concat());
        assert!(!out.status.success(), "{args:?} was taken");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

#[test]
fn fieldhub_rbs_simulates_a_dbc_on_a_running_hub_until_it_is_stopped() {
    let dir = Dir::with_dbc();
    let hub = FIELDHUB.start();
    let watcher = hub.client("watcher");
    watcher.open_port_with("can0", &PortConfig::default()).unwrap();
    let rbs = Command::new(FIELDHUB.path())
        .args(["rbs", "--hub", &hub.url, &dir.dbc(), "--channel", "can0", "--except", "DUT"])
        .args(["--counter", "EngineStatus.Counter=0..14", "--checksum", "EngineStatus.Checksum=crc8-sae-j1850"])
        .stderr(Stdio::piped())
        .spawn()
        .expect("start fieldhub rbs");
    let sims = wait_for(deadline(), "the simulation started", || {
        let sims = ok(&hub, "GET", "/api/v1/rbs", None);
        (sims.as_array()?.len() == 1).then_some(sims)
    });
    assert_eq!((sims[0]["sim"].as_u64(), sims[0]["dbc"].as_str()), (Some(0), Some("body.dbc")));
    json_of(fieldhub(&hub, &["ctl", "rbs", "set", "EngineStatus", "Rpm=1500"]));
    wait_for(deadline(), "EngineStatus with 1500 rpm on can0", || {
        while let Ok(Some(rx)) = watcher.try_recv() {
            if rx.frame.id() == 0x100 && rx.frame.data()[2..4] == 6000u16.to_le_bytes() {
                return Some(());
            }
        }
        None
    });

    // As a service manager stops it (Ctrl-C is SIGINT, the same path).
    let status = Command::new("kill").args(["-TERM", &rbs.id().to_string()]).status().unwrap();
    assert!(status.success());
    let out = rbs.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("simulation 0 of body.dbc: ENGINE, BODY (3 messages) on can0"), "{stderr}");
    assert!(stderr.contains("simulation 0 removed"), "{stderr}");
    assert_eq!(ok(&hub, "GET", "/api/v1/rbs", None), serde_json::json!([]));
}

#[test]
fn fieldhub_rbs_refuses_a_broken_dbc_naming_its_line_and_an_unknown_channel() {
    let dir = Dir::with_dbc();
    let broken = dir.0.join("broken.dbc");
    std::fs::write(&broken, DBC.replace(" SG_ Rpm : 16|16@1+", " SG_ Rpm : 16|16@9+")).unwrap();
    let hub = FIELDHUB.start();
    let out = fieldhub(&hub, &["rbs", broken.to_str().unwrap(), "--channel", "can0"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("broken.dbc: line 12: the DBC file does not parse"), "{stderr}");
    let out = fieldhub(&hub, &["rbs", &dir.dbc(), "--channel", "can9", "--except", "DUT"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("can9"), "{stderr}");
    let out = fieldhub(&hub, &["rbs", &dir.dbc(), "--nodes", "BRAKES"]);
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("the DBC defines no node 'BRAKES'; its nodes are: ENGINE, BODY, DUT"));
    assert_eq!(ok(&hub, "GET", "/api/v1/rbs", None), serde_json::json!([]), "nothing left behind");
}
