//! Virtual time through real hub processes: synchronised participants step
//! bus time, and the same scenario gives byte-identical candump output on
//! every run — the hub's recording and a real-time observer's alike.

use std::thread;
use std::time::Duration;

use crate::FIELDHUB;
use fieldhub_client::{Client, ClientError, ClientOptions, ErrorCode, Frame, PortConfig};
use fieldhub_proto::bits::FrameBits;
use fieldhub_proto::text::format_log_line;
use fieldhub_testkit::{deadline, ok, poll, HubProcess};
use serde_json::json;

const MS: u64 = 1_000_000;

fn participant(hub: &HubProcess, name: &str) -> Client {
    let options = ClientOptions { name: name.into(), synchronized: true, ..Default::default() };
    Client::connect_with(&hub.url, &options).expect("connect as a synchronised participant")
}

fn port_named(name: &str) -> PortConfig {
    PortConfig { name: Some(name.into()), ..Default::default() }
}

/// An ECU stepping `step_ms` at a time until `end_ms`: every `period_ms`
/// it sends `id` with a counter, and at every 10 ms also `contended`, an
/// identifier another ECU sends in the same bit time. It reads what it
/// receives and answers frame 0x300 with 0x301, so what it sends depends on
/// what the bus delivered in its windows.
fn run_ecu(client: Client, name: &str, id: u32, period_ms: u64, step_ms: u64, end_ms: u64, contended: Option<u32>) {
    let port = client.open_port_with("can0", &port_named(name)).unwrap();
    let mut counter = 0u32;
    while client.now().unwrap() < end_ms * MS {
        let now_ms = client.now().unwrap() / MS;
        if now_ms % period_ms == 0 {
            client.send(&port, &Frame::can(id, false, &counter.to_le_bytes()).unwrap()).unwrap();
            counter += 1;
        }
        if let Some(contended) = contended.filter(|_| now_ms % 10 == 0) {
            client.send(&port, &Frame::can(contended, false, &[name.as_bytes()[3]]).unwrap()).unwrap();
        }
        client.step(client.now().unwrap() + step_ms * MS).unwrap();
        while let Some(rx) = client.try_recv().unwrap() {
            if rx.frame.id() == 0x300 && !rx.frame.is_error() {
                client.send(&port, &Frame::can(0x301, false, &rx.frame.data()[..1]).unwrap()).unwrap();
            }
        }
    }
}

/// Three ECUs with periodic frames at 1, 10 and 100 ms, a seeded fault
/// rule, two ECUs contending with the same identifier; a hub recording and
/// a real-time observer. Returns (recording, observer's log).
fn three_ecu_run(end_ms: u64) -> (String, String) {
    let dir = std::env::temp_dir().join(format!("fieldhub-vt-{}-{}", std::process::id(), fieldhub_testkit::unique()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = r#"
        [hub]
        time = "virtual"
        time_participants = ["ecu1", "ecu2", "ecu3"]
        [[channel]]
        name = "can0"
        timing = "timed"
        bitrate = 500000
    "#;
    let hub = FIELDHUB.start_with(Some(config), &["--recordings-dir", dir.to_str().unwrap()]);
    let fault = json!({"channel": "can0", "at": "bus", "id": 0x100, "mask": 0x7FF,
        "action": {"type": "drop"}, "probability": 0.25, "seed": 42});
    ok(&hub, "POST", "/api/v1/faults", Some(fault));
    let recording = ok(&hub, "POST", "/api/v1/recordings", Some(json!({"path": "run.log"})));
    let observer = hub.client("observer");
    observer.open_port("can0").unwrap();

    let ecus =
        [("ecu1", 0x100, 1, 1, None), ("ecu2", 0x200, 10, 10, Some(0x050)), ("ecu3", 0x300, 100, 5, Some(0x050))];
    let threads: Vec<_> = ecus
        .into_iter()
        .map(|(name, id, period, step, contended)| {
            let client = participant(&hub, name);
            thread::spawn(move || run_ecu(client, name, id, period, step, end_ms, contended))
        })
        .collect();
    for thread in threads {
        thread.join().expect("ECU thread");
    }
    // The observer's deliveries were queued before the last grant, and its
    // PONG after them.
    observer.flush().unwrap();
    let mut seen = String::new();
    while let Some(rx) = observer.try_recv().unwrap() {
        seen.push_str(&format_log_line(rx.meta.timestamp_ns, "can0", &rx.frame));
        seen.push('\n');
    }
    ok(&hub, "DELETE", &format!("/api/v1/recordings/{}", recording["id"]), None);
    let recorded = std::fs::read_to_string(dir.join("run.log")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    (recorded, seen)
}

#[test]
fn the_same_scenario_gives_byte_identical_candump_logs_on_every_run() {
    let (first, observed) = three_ecu_run(300);
    let (second, observed_again) = three_ecu_run(300);
    assert_eq!(first, second, "two runs of one scenario record the same bytes");
    assert_eq!(observed, observed_again, "and a real-time observer sees the same");
    assert_eq!(first, observed, "the observer sees the recorded frames in the recorded order");
    let count = |id: &str| first.lines().filter(|l| l.split(' ').nth(2).is_some_and(|f| f.starts_with(id))).count();
    // 300 frames of 0x100 less those the seeded rule dropped; 30 of 0x200;
    // 3 of 0x300, each answered by ecu1 and ecu2; 0x050 from ecu2 and ecu3 30 times each.
    assert!((180..290).contains(&count("100#")), "{}", count("100#"));
    assert_eq!((count("200#"), count("300#"), count("301#"), count("050#")), (30, 3, 6, 60));
    assert!(first.lines().next().unwrap().starts_with("(0.000"), "bus time starts at 0: {first:.80}");
}

#[test]
fn replaying_a_recording_into_a_fresh_virtual_time_hub_records_the_same_bytes() {
    let (original, _) = three_ecu_run(300);
    let dir =
        std::env::temp_dir().join(format!("fieldhub-vt-replay-{}-{}", std::process::id(), fieldhub_testkit::unique()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("original.log");
    std::fs::write(&log, &original).unwrap();
    let config = r#"
        [hub]
        time = "virtual"
        [[channel]]
        name = "can0"
        timing = "timed"
        bitrate = 500000
    "#;
    let hub = FIELDHUB.start_with(Some(config), &["--recordings-dir", dir.to_str().unwrap()]);
    let recording = ok(&hub, "POST", "/api/v1/recordings", Some(json!({"path": "replayed.log"})));
    let out = FIELDHUB
        .command()
        .args(["replay", "--hub", &hub.url, "--synchronized", "--recorded-bus-time", log.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains(&format!("replayed {} frames", original.lines().count())), "{stdout}");
    ok(&hub, "DELETE", &format!("/api/v1/recordings/{}", recording["id"]), None);
    let replayed = std::fs::read_to_string(dir.join("replayed.log")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(replayed, original, "the replay is stamped as recorded, frame for frame");
}

#[test]
fn a_synchronized_replay_refuses_a_hub_in_real_time_and_a_file_whose_time_has_passed() {
    let dir =
        std::env::temp_dir().join(format!("fieldhub-vt-refuse-{}-{}", std::process::id(), fieldhub_testkit::unique()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("short.log");
    std::fs::write(&log, "(0.001000) can0 123#01\n(0.002000) can0 123#02\n").unwrap();
    let replay = |hub: &HubProcess, extra: &[&str]| {
        FIELDHUB.command().args(["replay", "--hub", &hub.url, "--synchronized"]).args(extra).arg(&log).output().unwrap()
    };
    let real = FIELDHUB.start();
    let out = replay(&real, &[]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("virtual"), "{stderr}");

    let hub = FIELDHUB.start_with(Some("[hub]\ntime = \"virtual\"\n[[channel]]\nname = \"can0\"\n"), &[]);
    let out = replay(&hub, &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("replayed 2 frames"));
    // The first replay moved bus time to 1 ms past where it joined.
    let out = replay(&hub, &["--recorded-bus-time"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("later than the file's first frame is due"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_minute_of_bus_time_with_ten_senders_completes_identically() {
    let config = r#"
        [hub]
        time = "virtual"
        time_participants = ["s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9"]
        [[channel]]
        name = "can0"
        timing = "timed"
        bitrate = 500000
    "#;
    let run = || {
        let hub = FIELDHUB.start_with(Some(config), &[]);
        let observer = hub.client("observer");
        observer.open_port("can0").unwrap();
        let senders: Vec<_> = (0..10u32)
            .map(|n| {
                let name = format!("s{n}");
                let client = participant(&hub, &name);
                thread::spawn(move || {
                    let port = client.open_port_with("can0", &port_named(&name)).unwrap();
                    // 10 ms periods, each sender's frame in its own 10 ms step.
                    for k in 0..6000u32 {
                        client.send(&port, &Frame::can(0x100 + n, false, &k.to_le_bytes()).unwrap()).unwrap();
                        client.step(u64::from(k + 1) * 10 * MS).unwrap();
                        while client.try_recv().unwrap().is_some() {}
                    }
                    client.now().unwrap()
                })
            })
            .collect();
        let ends: Vec<u64> = senders.into_iter().map(|t| t.join().unwrap()).collect();
        assert!(ends.iter().all(|&end| end == 60_000 * MS), "every sender reached 60 s: {ends:?}");
        observer.flush().unwrap();
        let mut digest = Vec::new();
        while let Some(rx) = observer.try_recv().unwrap() {
            digest.push((rx.meta.seq, rx.meta.timestamp_ns, rx.frame.id(), rx.frame.data()[0]));
        }
        digest
    };
    let first = run();
    assert_eq!(first.len(), 60_000, "every frame of every sender");
    assert_eq!(first, run());
}

/// Five participants, each sending an 8-byte frame (identifier 0x100 +
/// its number: 0 wins arbitration) in every 1 ms step for 2 s of bus time on
/// a 500 kbit/s timed channel — 125 % load. Returns what an observer got as
/// (seq, end of frame, identifier, step sent in).
fn overloaded_run() -> Vec<(u64, u64, u32, u32)> {
    let config = r#"
        [hub]
        time = "virtual"
        time_participants = ["p0", "p1", "p2", "p3", "p4"]
        [[channel]]
        name = "can0"
        timing = "timed"
        bitrate = 500000
    "#;
    let hub = FIELDHUB.start_with(Some(config), &[]);
    let observer = hub.client("observer");
    observer.open_port("can0").unwrap();
    let senders: Vec<_> = (0..5u32)
        .map(|n| {
            let name = format!("p{n}");
            let client = participant(&hub, &name);
            thread::spawn(move || {
                let port = client.open_port_with("can0", &port_named(&name)).unwrap();
                for k in 0..2000u32 {
                    let data = [k.to_le_bytes(), n.to_le_bytes()].concat();
                    client.send(&port, &Frame::can(0x100 + n, false, &data).unwrap()).unwrap();
                    client.step(u64::from(k + 1) * MS).unwrap();
                    while client.try_recv().unwrap().is_some() {}
                }
                // The lowest priority starved: more of its frames wait than a
                // real-time queue holds, and a send that must not wait says so.
                let full = client.tx_queue_full();
                let refused =
                    client.send_timeout(&port, &Frame::can(0x100 + n, false, &[]).unwrap(), Some(Duration::ZERO));
                (client.now().unwrap(), full, matches!(refused, Err(ClientError::SendQueueFull(_))))
            })
        })
        .collect();
    let ends: Vec<(u64, bool, bool)> = senders.into_iter().map(|t| t.join().unwrap()).collect();
    assert!(ends.iter().all(|&(end, ..)| end == 2000 * MS), "every participant reached 2 s: {ends:?}");
    assert_eq!(ends[4].1..=ends[4].2, true..=true, "the starving participant was told its queue is full");
    assert!(!ends[0].1 && !ends[0].2, "the winner's queue never filled");
    observer.flush().unwrap();
    let mut digest = Vec::new();
    while let Some(rx) = observer.try_recv().unwrap() {
        let step = u32::from_le_bytes(rx.frame.data()[..4].try_into().unwrap());
        digest.push((rx.meta.seq, rx.meta.timestamp_ns, rx.frame.id(), step));
    }
    digest
}

#[test]
fn five_participants_overloading_a_500_kbit_channel_at_1_ms_steps_finish_in_arbitration_order_identically() {
    let first = overloaded_run();
    // No frame queued before another started, with a lower identifier,
    // went after it (one queued at the very bit time it started came too
    // late: the bus chose as the intermission before it ended).
    for (n, &(_, end, id, step)) in first.iter().enumerate() {
        let data = [step.to_le_bytes(), (id - 0x100).to_le_bytes()].concat();
        let start = end - FrameBits::of(&Frame::can(id, false, &data).unwrap()).duration_ns(500_000, 500_000);
        let overtaken = first[n + 1..].iter().find(|&&(_, _, other, sent)| other < id && u64::from(sent) * MS < start);
        assert!(overtaken.is_none(), "{:?} went before {overtaken:?}", first[n]);
    }
    let from = |id: u32| first.iter().filter(|f| f.2 == id).count();
    assert_eq!(from(0x100), 2000, "the highest priority loses nothing");
    assert!(from(0x104) < 400, "the lowest priority starves: {} of 2000", from(0x104));
    assert_eq!(first, overloaded_run(), "the same bus on the second run");
}

#[test]
fn a_stalled_participant_is_reported_within_its_timeout_and_the_others_go_on() {
    let config = r#"
        [hub]
        time = "virtual"
        time_participants = ["ecu", "stuck"]
        step_timeout_ms = 300
        on_stall = "drop"
        [[channel]]
        name = "can0"
    "#;
    let hub = FIELDHUB.start_with(Some(config), &[]);
    let observer = hub.client("observer");
    observer.open_port("can0").unwrap();
    let stuck = participant(&hub, "stuck");
    let ecu = participant(&hub, "ecu");
    let port = ecu.open_port_with("can0", &port_named("ecu")).unwrap();
    for k in 0..100u32 {
        ecu.send(&port, &Frame::can(0x10, false, &k.to_le_bytes()).unwrap()).unwrap();
        // The first step waits for the stalled participant's timeout.
        ecu.step(u64::from(k + 1) * MS).unwrap();
    }
    hub.wait_for_log("participant stalled");
    match stuck.flush() {
        Err(ClientError::Rejected { code, text }) => {
            assert_eq!(ErrorCode::from_wire(code), Some(ErrorCode::StepTimeout), "{text}")
        }
        other => panic!("the stalled participant was not told: {other:?}"),
    }
    assert!(matches!(stuck.step(MS), Err(ClientError::Rejected { .. })), "a dropped participant no longer steps");
    observer.flush().unwrap();
    let mut counters = Vec::new();
    while let Some(rx) = observer.recv(Some(Duration::ZERO)).unwrap() {
        counters.push(u32::from_le_bytes(rx.frame.data()[..4].try_into().unwrap()));
        assert!(rx.meta.timestamp_ns < 100 * MS);
    }
    assert_eq!(counters, (0..100).collect::<Vec<_>>(), "every frame of the ECU, in order");
}

/// `fieldhub COMMAND --hub URL ARGS…`: its output.
fn fieldhub(hub: &HubProcess, args: &[&str]) -> std::process::Output {
    FIELDHUB.command().arg(args[0]).args(["--hub", &hub.url]).args(&args[1..]).output().unwrap()
}

fn time_status(hub: &HubProcess) -> serde_json::Value {
    let out = fieldhub(hub, &["ctl", "time"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Poll the time status until `done` holds for it.
fn wait_for_time(hub: &HubProcess, done: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let reached = poll(deadline(), || Some(time_status(hub)).filter(|status| done(status)));
    reached.unwrap_or_else(|| panic!("time never got there: {}", time_status(hub)))
}

#[test]
fn ctl_time_pauses_single_steps_runs_until_and_resumes_virtual_time() {
    let config = "[hub]\ntime = \"virtual\"\n[[channel]]\nname = \"can0\"\n";
    let hub = FIELDHUB.start_with(Some(config), &[]);
    assert!(fieldhub(&hub, &["ctl", "time", "pause"]).status.success());
    let ecu = participant(&hub, "ecu");
    let stepper = thread::spawn(move || {
        while ecu.now().unwrap() < 50 * MS {
            ecu.step(ecu.now().unwrap() + MS).unwrap();
        }
        ecu.now().unwrap()
    });
    let paused = wait_for_time(&hub, |s| s["participants"][0]["done_until_ns"] == json!(MS));
    assert_eq!((paused["now_ns"].as_u64(), paused["limit"]["state"].as_str()), (Some(0), Some("paused")));

    assert!(fieldhub(&hub, &["ctl", "time", "step"]).status.success());
    let stepped =
        wait_for_time(&hub, |s| s["now_ns"] == json!(MS) && s["participants"][0]["done_until_ns"] == json!(2 * MS));
    assert_eq!(stepped["limit"]["state"], "paused", "one step, then held again");

    assert!(fieldhub(&hub, &["ctl", "time", "run-until", "20ms"]).status.success());
    wait_for_time(&hub, |s| s["now_ns"] == json!(20 * MS) && s["limit"]["state"] == "paused");
    let stats = String::from_utf8(fieldhub(&hub, &["stats"]).stdout).unwrap();
    assert!(stats.contains("virtual time 0.020000 s") && stats.contains("1 participants, paused"), "{stats}");

    assert!(fieldhub(&hub, &["ctl", "time", "resume"]).status.success());
    assert_eq!(stepper.join().unwrap(), 50 * MS);
    let refused = fieldhub(&hub, &["ctl", "time", "run-until", "10ms"]);
    assert!(String::from_utf8_lossy(&refused.stderr).contains("422"), "bus time has passed 10 ms");
}

#[test]
fn a_hub_in_real_time_refuses_participants_and_time_control() {
    let hub = FIELDHUB.start();
    let options = ClientOptions { name: "ecu".into(), synchronized: true, ..Default::default() };
    match Client::connect_with(&hub.url, &options) {
        Err(error @ ClientError::Refused { .. }) => assert_eq!(error.code(), Some(ErrorCode::TimeMode)),
        other => panic!("a synchronised participant on a real-time hub: {:?}", other.map(|_| ())),
    }
    let out = fieldhub(&hub, &["ctl", "time", "pause"]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("real time"));
    assert_eq!(time_status(&hub)["mode"], "real");
    assert!(matches!(hub.client("observer").step(MS), Err(ClientError::NotSynchronized)));
}
