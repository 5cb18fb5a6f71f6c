//! Steps granted ahead through real hub processes (`spec/protocol.md`
//! 3.11a, 6.8): a rest-bus node that sends its numbered frames stamped for
//! their steps and steps to the end at once (over shared memory), and a
//! responder woken only by its request's identifier (over TCP), leave the
//! same candump log as the same participants stepping every 1 ms.

use std::thread;

use crate::FIELDHUB;
use fieldhub_client::{Client, ClientOptions, Frame, PortConfig, WakeFilter};
use fieldhub_proto::text::format_log_line;
use fieldhub_testkit::HubProcess;

const MS: u64 = 1_000_000;
/// Bus time each run ends at.
const END: u64 = 200 * MS;
const REQUEST: u32 = 0x7E0;
const ANSWER: u32 = 0x7E8;

fn connect(url: &str, name: &str, ahead: bool) -> Client {
    let options = ClientOptions { name: name.into(), synchronized: true, ahead, ..Default::default() };
    Client::connect_with(url, &options).expect("connect as a participant")
}

fn port_named(name: &str) -> PortConfig {
    PortConfig { name: Some(name.into()), ..Default::default() }
}

/// Frame `n` of the rest-bus node, due at `n` ms.
fn numbered(n: u64) -> Frame {
    Frame::can(0x200, false, &(n as u16).to_le_bytes()).unwrap()
}

fn rest_bus_node(client: Client, ahead: bool) {
    let port = client.open_port_with("can0", &PortConfig { transmit_only: true, ..port_named("rbs") }).unwrap();
    if ahead {
        for n in 0..END / MS {
            client.send_at(&port, &numbered(n), n * MS).unwrap();
        }
        assert_eq!(client.step_ahead(END, MS, &[]).unwrap(), END, "nothing reaches a transmit-only port");
        return;
    }
    for n in 0..END / MS {
        client.send(&port, &numbered(n)).unwrap();
        client.step((n + 1) * MS).unwrap();
    }
}

/// Answers each request with its first byte; returns the bus times it answered at.
fn responder(client: Client, ahead: bool) -> Vec<u64> {
    let port = client.open_port_with("can0", &port_named("responder")).unwrap();
    let wake = [WakeFilter { can_id: REQUEST, mask: 0x7FF }];
    let mut answered = Vec::new();
    let mut now = client.now().unwrap();
    while now < END {
        now = match ahead {
            true => client.step_ahead(END, MS, &wake).unwrap(),
            false => client.step(now + MS).unwrap(),
        };
        while let Some(rx) = client.try_recv().unwrap() {
            if rx.frame.id() == REQUEST && now < END {
                client.send(&port, &Frame::can(ANSWER, false, &rx.frame.data()[..1]).unwrap()).unwrap();
                answered.push(now);
            }
        }
    }
    answered
}

/// A tester stepping 1 ms sends a request every 7 ms and a frame of another
/// identifier every 2 ms.
fn tester(client: Client) {
    let port = client.open_port_with("can0", &port_named("tester")).unwrap();
    for k in 0..END / MS {
        if k % 7 == 3 {
            client.send(&port, &Frame::can(REQUEST, false, &[k as u8]).unwrap()).unwrap();
        }
        if k % 2 == 0 {
            client.send(&port, &Frame::can(0x123, false, &[k as u8]).unwrap()).unwrap();
        }
        client.step((k + 1) * MS).unwrap();
    }
}

/// One run: the observer's candump log and the responder's answer times.
fn run(ahead: bool) -> (String, Vec<u64>) {
    let config = r#"
        [hub]
        time = "virtual"
        time_participants = ["rbs", "responder", "tester"]
        [[channel]]
        name = "can0"
        timing = "timed"
        bitrate = 500000
    "#;
    let hub: HubProcess = FIELDHUB.start_shm_with(Some(config), &[]);
    let observer = hub.client("observer");
    observer.open_port("can0").unwrap();
    let shm = hub.shm_url.clone().expect("the hub serves shared memory");
    let rbs = connect(&shm, "rbs", ahead);
    let (answering, testing) = (connect(&hub.url, "responder", ahead), connect(&hub.url, "tester", false));
    let rbs = thread::spawn(move || rest_bus_node(rbs, ahead));
    let answering = thread::spawn(move || responder(answering, ahead));
    let testing = thread::spawn(move || tester(testing));
    rbs.join().expect("rest-bus node");
    testing.join().expect("tester");
    let answered = answering.join().expect("responder");
    observer.flush().unwrap();
    let mut log = String::new();
    while let Some(rx) = observer.try_recv().unwrap() {
        log.push_str(&format_log_line(rx.meta.timestamp_ns, "can0", &rx.frame));
        log.push('\n');
    }
    (log, answered)
}

#[test]
fn stepping_ahead_through_a_hub_gives_the_candump_log_of_stepping_every_period() {
    let (every_period, answered_every_period) = run(false);
    let (ahead, answered_ahead) = run(true);
    let numbers: Vec<u16> = ahead
        .lines()
        .filter(|l| l.contains(" 200#"))
        .map(|l| {
            let data = l.rsplit('#').next().unwrap();
            u16::from_str_radix(&format!("{}{}", &data[2..4], &data[0..2]), 16).unwrap()
        })
        .collect();
    assert_eq!(numbers, (0..200).collect::<Vec<u16>>(), "every numbered frame, in order");
    assert_eq!(answered_ahead.len(), 28, "a request every 7 ms, each answered: {answered_ahead:?}");
    assert_eq!(answered_ahead, answered_every_period, "woken by each request at the step it arrived in");
    assert_eq!(ahead.lines().filter(|l| l.contains(" 7E8#")).count(), 28);
    assert_eq!(ahead, every_period, "the same frames at the same bus times");
}
