//! `fieldhub stats`: on a hub larger than one `STATS` message (issue 16: it
//! printed invalid JSON past ~1,900 ports) the document stays valid JSON,
//! says how much it left out, and the control API still has everything.
//! (Into a pipe closed early it ends quietly: `rough_edges`.) A channel's
//! error frames have their own column and key, apart from its frames
//! (issue 39: `FRAMES` counted them though the ids and the load did not).

use crate::FIELDHUB;
use fieldhub_proto::stats::HubStats;
use fieldhub_proto::Frame;
use fieldhub_testkit::{api, ok};

#[test]
fn stats_of_two_thousand_ports_are_valid_json_that_says_what_was_left_out() {
    let hub = FIELDHUB.start();
    let clients: Vec<_> = (0..64).map(|n| hub.client(&format!("ecu-with-a-long-name-{n:03}"))).collect();
    for client in &clients {
        for _ in 0..32 {
            client.open_port("can0").unwrap();
        }
    }
    let out = FIELDHUB.command().args(["stats", "--json", "--hub", &hub.url]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stats: HubStats = serde_json::from_slice(&out.stdout).expect("valid JSON");
    let omitted = stats.omitted.expect("a cut document says so");
    assert!(omitted.ports > 0, "2,048 ports do not fit one message");
    assert_eq!(stats.ports.len() + omitted.ports as usize, 64 * 32, "kept and left out add up");

    let text = FIELDHUB.command().args(["stats", "--hub", &hub.url]).output();
    let text = String::from_utf8(text.unwrap().stdout).unwrap();
    assert!(text.contains(&format!("{} ports", omitted.ports)), "the table says what it lacks: {text}");

    let (status, all) = api(&hub, "GET", "/api/v1/stats", None);
    assert_eq!(status, 200);
    assert_eq!(all["ports"].as_array().unwrap().len(), 64 * 32, "the control API has them all");
    assert!(all.get("omitted").is_none());
}

/// cannelloni's UDP packet: version 2, DATA, `seq`, one classic frame.
fn cannelloni_packet(seq: u8) -> Vec<u8> {
    let mut packet = vec![2, 0, seq, 0, 1];
    packet.extend_from_slice(&0x123u32.to_be_bytes());
    packet.extend_from_slice(&[1, seq]);
    packet
}

#[test]
fn stats_list_each_cannelloni_peers_sequence_gaps_and_malformed_packets() {
    let config = "[[channel]]\nname = \"can0\"\n\n[[cannelloni]]\nchannel = \"can0\"\nlisten = \"udp/127.0.0.1:0\"\nlearn_peers = true\n";
    let hub = FIELDHUB.start_with(Some(config), &[]);
    let (status, endpoints) = api(&hub, "GET", "/api/v1/cannelloni", None);
    assert_eq!(status, 200);
    let endpoint: std::net::SocketAddr = endpoints[0]["listen"].as_str().unwrap()["udp/".len()..].parse().unwrap();
    let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    for seq in [0, 1, 5] {
        peer.send_to(&cannelloni_packet(seq), endpoint).unwrap();
    }
    peer.send_to(b"not cannelloni", endpoint).unwrap();
    let counted = |key: &str| {
        let (_, endpoints) = api(&hub, "GET", "/api/v1/cannelloni", None);
        endpoints[0]["peers"][0][key].as_u64()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while counted("malformed") != Some(1) {
        assert!(std::time::Instant::now() < deadline, "the endpoint took the packets");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = FIELDHUB.command().args(["stats", "--hub", &hub.url]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let row = text.lines().find(|l| l.starts_with("udp/")).unwrap_or_else(|| panic!("a peer row in {text}"));
    let figures: Vec<&str> = row.split_whitespace().collect();
    // peer, channel, packets, frames in, frames out, gaps, late, malformed
    assert_eq!(figures[1..], ["can0", "4", "3", "0", "3", "0", "1"], "{text}");

    let out = FIELDHUB.command().args(["stats", "--json", "--hub", &hub.url]).output().unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["cannelloni"][0]["peers"][0]["seq_gaps"], 3);
}

#[test]
fn error_frames_have_their_own_column_and_key_apart_from_data_frames() {
    let hub = FIELDHUB.start();
    // Two attempts destroyed on the wire: an error frame each, then the
    // frame again.
    let rule = serde_json::json!({"channel": "can0", "at": "bus", "id": 0x200, "mask": 0x7FF, "count": 2,
                                  "action": {"type": "corrupt"}});
    ok(&hub, "POST", "/api/v1/faults", Some(rule));
    let ecu = hub.client("ecu");
    let port = ecu.open_port("can0").unwrap();
    for n in 0..10u8 {
        ecu.send(&port, &Frame::can(0x200, false, &[n]).unwrap()).unwrap();
    }
    ecu.send(&port, &Frame::error(0x4, [0; 8]).unwrap()).unwrap();
    ecu.flush().unwrap();
    let counted = || {
        let out = FIELDHUB.command().args(["stats", "--json", "--hub", &hub.url]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (json["channels"][0]["frames"].as_u64(), json["channels"][0]["error_frames"].as_u64())
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while counted() != (Some(10), Some(3)) {
        assert!(std::time::Instant::now() < deadline, "10 frames and 3 error frames: {:?}", counted());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = FIELDHUB.command().args(["stats", "--hub", &hub.url]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let header: Vec<&str> = text.lines().find(|l| l.starts_with("CHANNEL")).unwrap().split_whitespace().collect();
    let row: Vec<&str> = text.lines().find(|l| l.starts_with("can0 ")).unwrap().split_whitespace().collect();
    let column = |name: &str| row[header.iter().position(|h| *h == name).unwrap()];
    assert_eq!((column("FRAMES"), column("ERRORS")), ("10", "3"), "{text}");
}

#[test]
fn stats_say_how_late_the_bus_thread_served_its_deadlines_in_real_time_and_nothing_in_virtual_time() {
    let dir = std::env::temp_dir().join(format!("fieldhub-cli-stats-timer-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let dbc = dir.join("body.dbc");
    std::fs::write(&dbc, include_str!("../../../fieldhub-rbs/tests/data/body.dbc")).unwrap();
    // A rest-bus simulation's cycles are deadlines the bus thread sleeps toward.
    let channels = format!(
        "[[channel]]\nname = \"can0\"\ntiming = \"timed\"\n\n[[rbs]]\ndbc = \"{}\"\nchannel = \"can0\"\n\
         except = [\"DUT\"]\n",
        dbc.display()
    );
    let hub = FIELDHUB.start_with(Some(&channels), &[]);
    let stats = |hub: &fieldhub_testkit::HubProcess| {
        let out = FIELDHUB.command().args(["stats", "--json", "--hub", &hub.url]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<HubStats>(&out.stdout).expect("valid JSON")
    };
    let first = stats(&hub).timer.expect("a hub in real time has a timer");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let timer = stats(&hub).timer.expect("a hub in real time has a timer");
    assert!(timer.deadlines > first.deadlines, "the cycles of 300 ms served: {first:?} then {timer:?}");
    assert!(timer.worst.len() <= 32 && timer.worst.windows(2).all(|w| w[0].late_ns >= w[1].late_ns), "{timer:?}");
    assert!(timer.worst.iter().all(|w| w.woke_late_ns <= w.late_ns), "{timer:?}");
    let text = FIELDHUB.command().args(["stats", "--hub", &hub.url]).output().unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("bus thread: ") && text.contains(" deadlines served, "), "{text}");
    drop(hub);

    let virtual_time = format!("[hub]\ntime = \"virtual\"\n\n{channels}");
    let hub = FIELDHUB.start_with(Some(&virtual_time), &[]);
    assert_eq!(stats(&hub).timer, None, "virtual time's deadlines are never late");
    let _ = std::fs::remove_dir_all(&dir);
}
