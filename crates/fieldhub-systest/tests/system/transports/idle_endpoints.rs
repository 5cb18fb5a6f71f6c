//! An idle hub's socketcand server and cannelloni endpoints sleep: with a
//! socketcand session, a cannelloni TCP peer and a UDP peer attached and no
//! traffic, none of their threads wakes (they block on their sockets, their
//! outboxes and a stop bell instead of looking every 100 ms whether the
//! hub stops). Counted as each thread's context switches in
//! `/proc/PID/task/TID/status` over two idle seconds.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::time::Duration;

use fieldhub_testkit::federation::free_port;
use fieldhub_testkit::*;

use crate::FIELDHUB;

/// The threads of the endpoints, by name (what `/proc` shows: at most 15
/// characters).
fn endpoint_thread(name: &str) -> bool {
    name.starts_with("fh-cnl") || name.starts_with("fh-scd") || name == "fh-socketcand"
}

/// Context switches (voluntary and not) of every endpoint thread of `pid`,
/// by `name/tid`.
fn switches(pid: u32) -> BTreeMap<String, u64> {
    let mut found = BTreeMap::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).expect("the hub's threads").flatten() {
        let path = task.path();
        let Ok(name) = std::fs::read_to_string(path.join("comm")) else { continue };
        let name = name.trim();
        if !endpoint_thread(name) {
            continue;
        }
        let Ok(status) = std::fs::read_to_string(path.join("status")) else { continue };
        let count: u64 = status
            .lines()
            .filter(|l| l.starts_with("voluntary_ctxt_switches:") || l.starts_with("nonvoluntary_ctxt_switches:"))
            .map(|l| l.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap())
            .sum();
        found.insert(format!("{name}/{}", task.file_name().to_string_lossy()), count);
    }
    found
}

#[test]
fn idle_socketcand_and_cannelloni_threads_sleep_until_something_comes() {
    let (scd, cnl_tcp, cnl_udp) = (free_port(), free_port(), free_port());
    let udp_peer = UdpSocket::bind("127.0.0.1:0").expect("bind the UDP peer");
    let config = format!(
        "[hub]\nsocketcand = \"127.0.0.1:{scd}\"\n\n[[channel]]\nname = \"can0\"\n\n\
         [[cannelloni]]\nchannel = \"can0\"\nlisten = \"tcp/127.0.0.1:{cnl_tcp}\"\n\n\
         [[cannelloni]]\nchannel = \"can0\"\nlisten = \"udp/127.0.0.1:{cnl_udp}\"\npeers = [\"{}\"]\n",
        udp_peer.local_addr().unwrap()
    );
    let hub = FIELDHUB.start_with(Some(&config), &[]);

    // A socketcand session in RAW mode.
    let mut session = TcpStream::connect(("127.0.0.1", scd)).expect("connect to the socketcand listener");
    session.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut said = Vec::new();
    session.write_all(b"< open can0 >< rawmode >").unwrap();
    while !String::from_utf8_lossy(&said).contains("< ok >< ok >") {
        let mut buf = [0u8; 256];
        let n = session.read(&mut buf).expect("the socketcand answers");
        assert!(n > 0, "the hub closed the socketcand session: {}", String::from_utf8_lossy(&said));
        said.extend_from_slice(&buf[..n]);
    }
    // A cannelloni TCP peer after the banner exchange.
    let mut peer = TcpStream::connect(("127.0.0.1", cnl_tcp)).expect("connect to the cannelloni endpoint");
    peer.set_read_timeout(Some(PATIENCE)).unwrap();
    peer.write_all(b"CANNELLONIv1").unwrap();
    let mut banner = [0u8; 12];
    peer.read_exact(&mut banner).expect("the hub's banner");
    // Every kind of endpoint thread is there: the listeners, the session's
    // reader and writer, each peer's writer (the UDP peer is listed, so
    // attached at start).
    let expected = ["fh-socketcand", "fh-scd", "fh-scd-w", "fh-cnl-udp", "fh-cnl-udp-w", "fh-cnl-tcp-l", "fh-cnl-tcp"];
    wait_until(deadline(), "every endpoint thread started", || {
        let names: Vec<String> = switches(hub.pid()).keys().map(|k| k.split('/').next().unwrap().to_owned()).collect();
        expected.iter().all(|e| names.iter().any(|n| n == e)) && names.iter().any(|n| n == "fh-cnl-tcp-w")
    });
    // Let the start-up settle: the last answers written, threads asleep.
    std::thread::sleep(Duration::from_millis(200));

    let before = switches(hub.pid());
    std::thread::sleep(Duration::from_secs(2));
    let after = switches(hub.pid());
    let woke: Vec<String> = after
        .iter()
        .filter_map(|(thread, n)| {
            let woke = n - before.get(thread).copied().unwrap_or(0);
            // A poll of 100 ms would wake 20 times in these 2 s.
            (woke > 1).then(|| format!("{thread} woke {woke} times"))
        })
        .collect();
    assert!(woke.is_empty(), "idle endpoint threads woke up: {woke:?} (all: {after:?})");

    // Asleep is not dead: a frame still goes from the UDP peer to the TCP peer.
    let packet = [2, 0, 0, 0, 1, 0, 0, 0x04, 0x56, 1, 0xAB];
    udp_peer.send_to(&packet, ("127.0.0.1", cnl_udp)).unwrap();
    let mut record = [0u8; 6];
    peer.read_exact(&mut record).expect("the UDP peer's frame reaches the TCP peer");
    assert_eq!(record, [0, 0, 0x04, 0x56, 1, 0xAB]);
    drop((session, peer));
    assert!(hub.terminate().success());
}
