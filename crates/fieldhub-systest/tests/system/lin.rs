//! LIN channels through a real hub process in virtual time: two slave
//! clients publish responses, the hub runs the master's schedule table, and
//! an observer sees every frame at its exact end-of-frame time — and the
//! header nobody answered before a slave had published; an event-triggered
//! collision between two clients and its resolution.

use std::thread;
use std::time::Duration;

use crate::FIELDHUB;
use fieldhub_client::{Client, ClientOptions, Frame};
use fieldhub_proto::lin::Checksum;
use fieldhub_proto::FrameFlags;
use fieldhub_testkit::*;

const MS: u64 = 1_000_000;

/// 0x10 (slave1) 10 ms, 0x11 (slave2) 10 ms, 0x20 (slave2) 15 ms.
const CONFIG: &str = r#"
[hub]
time = "virtual"
time_participants = ["slave1", "slave2"]

[[channel]]
name = "body"
protocol = "lin"
bitrate = 19200
timing = "timed"

[channel.lin]
schedule = [{ id = 0x10, delay_ms = 10 }, { id = 0x11, delay_ms = 10 }, { id = 0x20, delay_ms = 15 }]
"#;

fn response(id: u8, len: usize, n: u8) -> Frame {
    Frame::lin(id, Checksum::Enhanced, &[n; 8][..len]).unwrap()
}

#[test]
fn lin_schedule_in_virtual_time_carries_each_slaves_responses_at_exact_times_then_reports_no_response() {
    let hub = FIELDHUB.start_with(Some(CONFIG), &[]);
    let observer = hub.client("observer");
    observer.open_port("body").unwrap();
    let slaves: Vec<_> = [("slave1", vec![(0x10, 2)]), ("slave2", vec![(0x11, 4), (0x20, 8)])]
        .into_iter()
        .map(|(name, published)| {
            let options = ClientOptions { name: name.into(), synchronized: true, ..Default::default() };
            let client = Client::connect_with(&hub.url, &options).unwrap();
            thread::spawn(move || {
                let port = client.open_port("body").unwrap();
                for n in 0..3 {
                    for &(id, len) in &published {
                        client.send(&port, &response(id, len, n)).unwrap();
                    }
                }
                // Three 35 ms cycles, and the start of a fourth.
                client.step(110 * MS).unwrap();
            })
        })
        .collect();
    for slave in slaves {
        slave.join().expect("slave thread");
    }
    let mut seen = Vec::new();
    while seen.len() < 10 {
        let rx = observer.recv(Some(Duration::from_secs(10))).unwrap().expect("every frame reaches the observer");
        let no_response = rx.frame.flags().contains(FrameFlags::LIN_NO_RESPONSE);
        seen.push((rx.frame.id(), rx.frame.data().first().copied(), no_response, rx.meta.timestamp_ns));
    }
    // Nominal frames at 19.2 kbit/s: 64, 84 and 124 bits; a header 34. The
    // schedule started as the observer's port opened, before slave1 had
    // published: its first slot went unanswered, and each of its responses
    // goes one cycle later.
    let mut expected = vec![(0x10, None, true, 1_770_833)];
    for k in 0..3u8 {
        let start = u64::from(k) * 35 * MS;
        expected.push((0x11, Some(k), false, start + 10 * MS + 4_375_000));
        expected.push((0x20, Some(k), false, start + 20 * MS + 6_458_333));
        expected.push((0x10, Some(k), false, start + 35 * MS + 3_333_333));
    }
    assert_eq!(seen, expected);
    let channels = ok(&hub, "GET", "/api/v1/channels", None);
    let body = channels.as_array().unwrap().iter().find(|c| c["name"] == "body").unwrap().clone();
    // The fourth cycle's 0x11 and 0x20 slots (at 115 and 125 ms) have not come.
    assert_eq!((body["protocol"].as_str(), body["no_responses"].as_u64()), (Some("lin"), Some(1)));
}

/// The body cluster of `crates/fieldhub-ldf/tests/files/body.ldf`: its
/// table `Normal` sends DoorStatus (0x10, 2 bytes, from `door`) 10 ms,
/// SeatStatus (0x11, 4 bytes, from `seat`) 10 ms, BcmCommand (0x20, from
/// `BCM`, nobody here) 15 ms, at its LIN_speed of 19.2 kbit/s.
fn ldf_config() -> String {
    let ldf = concat!(env!("CARGO_MANIFEST_DIR"), "/../fieldhub-ldf/tests/files/body.ldf");
    format!(
        "[hub]\ntime = \"virtual\"\ntime_participants = [\"door\", \"seat\"]\n\n[[channel]]\nname = \"body\"\n\
         protocol = \"lin\"\ntiming = \"timed\"\n\n[channel.lin]\nldf = \"{ldf}\"\n"
    )
}

fn port_counter(hub: &HubProcess, name: &str, counter: &str) -> Option<u64> {
    let ports = ok(hub, "GET", "/api/v1/ports", None);
    ports.as_array()?.iter().find(|p| p["name"] == name)?[counter].as_u64()
}

#[test]
fn an_ldf_channel_runs_its_schedule_at_the_ldfs_delays_and_refuses_a_frame_from_the_wrong_node() {
    let hub = FIELDHUB.start_with(Some(&ldf_config()), &[]);
    let dump = FIELDHUB
        .command()
        .args(["dump", "--hub", &hub.url, "--port", "dump", "-t", "a", "-n", "7", "body"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_until(deadline(), "the dump's port opens", || port_counter(&hub, "dump", "rx_frames").is_some());
    let published = |node: &'static str, frames: Vec<Frame>| {
        let options = ClientOptions { name: node.into(), synchronized: true, ..Default::default() };
        let client = Client::connect_with(&hub.url, &options).unwrap();
        thread::spawn(move || {
            let config = fieldhub_client::PortConfig { name: Some(node.into()), ..Default::default() };
            let port = client.open_port_with("body", &config).unwrap();
            for frame in &frames {
                client.send(&port, frame).unwrap();
            }
            client.step(75 * MS).unwrap();
            // The first refusal the hub reported, if any; the client stays
            // connected, so its port's counters can be read.
            (client.flush().err().map(|e| e.to_string()), client)
        })
    };
    let door = published("door", vec![response(0x10, 2, 1), response(0x10, 2, 2)]);
    let seat = published(
        "seat",
        vec![
            response(0x11, 4, 3),
            // DoorStatus is door's, and SeatStatus carries the enhanced checksum.
            response(0x10, 2, 4),
            Frame::lin(0x11, Checksum::Classic, &[5; 4]).unwrap(),
        ],
    );
    let (door, _door) = door.join().unwrap();
    assert_eq!(door, None);
    let (seat, _seat) = seat.join().unwrap();
    let refusal = seat.expect("the hub tells seat why its DoorStatus was not sent");
    assert!(refusal.contains("port 'seat' publishes frame DoorStatus (0x10), which node door publishes"), "{refusal}");
    let output = dump.wait_with_output().unwrap();
    let lines: Vec<String> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    // Slots start at the sums of the LDF's delays (0, 10, 20 ms, then every
    // 35 ms); each frame ends its nominal time later: 34 bits for a header
    // alone, 64 for 2 bytes, 84 for 4. The schedule started as the dump's
    // port opened, before anyone had published.
    let header = "[0] LIN no response";
    let expected = [
        format!("(0000000000.001770) body 10 {header}"),
        "(0000000000.014375) body 11 [4] 03 03 03 03 LIN enhanced checksum".to_owned(),
        format!("(0000000000.021770) body 20 {header}"),
        "(0000000000.038333) body 10 [2] 01 01 LIN enhanced checksum".to_owned(),
        format!("(0000000000.046770) body 11 {header}"),
        format!("(0000000000.056770) body 20 {header}"),
        "(0000000000.073333) body 10 [2] 02 02 LIN enhanced checksum".to_owned(),
    ];
    assert_eq!(lines.len(), expected.len(), "{lines:#?}");
    for (line, expected) in lines.iter().zip(&expected) {
        assert!(line.starts_with(expected.as_str()), "{line} is not {expected}");
    }
    let channels = ok(&hub, "GET", "/api/v1/channels", None);
    let body = channels.as_array().unwrap().iter().find(|c| c["name"] == "body").unwrap().clone();
    assert_eq!((body["bitrate"].as_u64(), body["no_responses"].as_u64()), (Some(19_200), Some(4)));
    assert_eq!(port_counter(&hub, "seat", "tx_refused"), Some(2));
}

/// The cluster of `crates/fieldhub-ldf/tests/files/events.ldf`: table
/// `Normal` sends event-triggered DoorEvents (0x30: LeftDoor 0x11 from
/// `door_left`, RightDoor 0x12 from `door_right`, resolved by table
/// DoorCollision) 10 ms, SeatState (0x20) 10 ms and sporadic SeatCommands
/// 10 ms.
fn events_config() -> String {
    let ldf = concat!(env!("CARGO_MANIFEST_DIR"), "/../fieldhub-ldf/tests/files/events.ldf");
    format!(
        "[hub]\ntime = \"virtual\"\ntime_participants = [\"door_left\", \"door_right\"]\n\n[[channel]]\n\
         name = \"doors\"\nprotocol = \"lin\"\ntiming = \"timed\"\n\n[channel.lin]\nldf = \"{ldf}\"\n"
    )
}

#[test]
fn an_event_triggered_collision_between_two_clients_is_resolved_by_the_ldfs_collision_table() {
    let hub = FIELDHUB.start_with(Some(&events_config()), &[]);
    let observer = hub.client("observer");
    observer.open_port("doors").unwrap();
    let door = |node: &'static str, id: u8, pid: u8| {
        let options = ClientOptions { name: node.into(), synchronized: true, ..Default::default() };
        let client = Client::connect_with(&hub.url, &options).unwrap();
        thread::spawn(move || {
            let config = fieldhub_client::PortConfig { name: Some(node.into()), ..Default::default() };
            let port = client.open_port_with("doors", &config).unwrap();
            client.send(&port, &Frame::lin(id, Checksum::Enhanced, &[pid, 1]).unwrap()).unwrap();
            client.step(60 * MS).unwrap();
            client.flush().map(drop).map_err(|e| e.to_string())
        })
    };
    let (left, right) = (door("door_left", 0x11, 0x11), door("door_right", 0x12, 0x92));
    assert_eq!(left.join().unwrap(), Ok(()), "door_left's response is confirmed sent");
    assert_eq!(right.join().unwrap(), Ok(()), "door_right's response is confirmed sent");
    let mut seen = Vec::new();
    while seen.len() < 5 {
        let rx = observer.recv(Some(Duration::from_secs(10))).unwrap().expect("every frame reaches the observer");
        seen.push((rx.frame.id(), rx.frame.flags(), rx.frame.data().to_vec(), rx.meta.timestamp_ns));
    }
    // The schedule started as the observer's port opened, before the doors
    // had published: 0x30 and SeatState go out alone, the sporadic slot at
    // 20 ms is silent. At 30 ms both doors answer 0x30 and collide — the
    // bus reads 11 01 AND 92 01 with their checksums — and DoorCollision
    // polls 0x11 and 0x12 at 40 and 50 ms.
    let (none, collision) = (FrameFlags::LIN_NO_RESPONSE, FrameFlags::LIN_COLLISION);
    let read = Frame::lin_collision(
        0x30,
        &[
            Frame::lin(0x30, Checksum::Enhanced, &[0x11, 1]).unwrap(),
            Frame::lin(0x30, Checksum::Enhanced, &[0x92, 1]).unwrap(),
        ],
    )
    .unwrap();
    assert_eq!(
        seen,
        [
            (0x30, none, vec![], 1_770_833),
            (0x20, none, vec![], 10 * MS + 1_770_833),
            (0x30, collision, read.data().to_vec(), 30 * MS + 3_333_333),
            (0x11, FrameFlags::empty(), vec![0x11, 1], 40 * MS + 3_333_333),
            (0x12, FrameFlags::empty(), vec![0x92, 1], 50 * MS + 3_333_333),
        ]
    );
    let channels = ok(&hub, "GET", "/api/v1/channels", None);
    let doors = channels.as_array().unwrap().iter().find(|c| c["name"] == "doors").unwrap().clone();
    // SeatState went unanswered at 10 ms and at 60 ms, where bus time
    // stopped as its header started; 0x30 alone is no missing response.
    assert_eq!((doors["collisions"].as_u64(), doors["no_responses"].as_u64()), (Some(1), Some(2)));
}
