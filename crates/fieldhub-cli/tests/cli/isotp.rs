//! `fieldhub isotp send|recv|dump` against a real hub: payloads of 4,095
//! and 60,000 bytes (the 2016 escape) from `send` to `recv`, classic and
//! CAN FD, under flow control with a block size and STmin; extended
//! addressing and padding on the wire; the errors a missing receiver or
//! a bad option give; `dump`'s explained frames and `--sniff`'s payloads.
//! Against another ISO-TP implementation (python's can-isotp):
//! python/tests/test_isotp_tools.py.

use std::io::Write;
use std::process::{Child, Output, Stdio};

use crate::FIELDHUB;
use fieldhub_client::Received;
use fieldhub_testkit::*;

const CHANNELS: &str = r#"
[[channel]]
name = "can0"

[[channel]]
name = "fd0"
protocol = "canfd"
"#;

/// What `send -D LEN` sends, as isotpsend -D: 01 02 … FF 01 02 …
fn numbered(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 0xFF) as u8 + 1).collect()
}

/// A payload as `recv` prints it.
fn printed(payload: &[u8]) -> String {
    payload.iter().map(|b| format!("{b:02X} ")).collect::<String>() + "\n"
}

/// Start `fieldhub isotp TOOL --port PORT ARGS…` and wait until its port is open.
fn start(hub: &HubProcess, tool: &str, port: &str, args: &[&str]) -> Child {
    let child = FIELDHUB
        .command()
        .args(["isotp", tool, "--hub", &hub.url, "--port", port])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start fieldhub isotp");
    let watcher = hub.client("watcher");
    wait_until(deadline(), format!("isotp {tool}'s port {port}"), || {
        watcher.stats().is_ok_and(|s| s.ports.iter().any(|p| p.name == port))
    });
    child
}

fn send(hub: &HubProcess, args: &[&str], stdin: &str) -> Output {
    let mut child = FIELDHUB
        .command()
        .args(["isotp", "send", "--hub", &hub.url])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start fieldhub isotp send");
    // A sender that refuses its options exits without reading stdin: the
    // pipe it closed is no failure here, its exit status and stderr tell.
    match child.stdin.take().unwrap().write_all(stdin.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        written => written.unwrap(),
    }
    child.wait_with_output().unwrap()
}

fn finished(child: Child) -> (String, String) {
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (String::from_utf8(out.stdout).unwrap(), String::from_utf8_lossy(&out.stderr).into_owned());
    assert!(out.status.success(), "{stderr}");
    (stdout, stderr)
}

#[test]
fn isotp_send_and_recv_carry_4095_and_60000_bytes_under_flow_control_classic_and_fd() {
    let hub = FIELDHUB.start_with(Some(CHANNELS), &[]);
    let cases: [(&str, &[&str], usize, &[&str]); 3] = [
        ("can0", &[], 4095, &["-b", "8", "-m", "1"]),
        // 8,571 consecutive frames: STmin 0, so it takes no 8.6 s.
        ("can0", &[], 60_000, &["-b", "8"]),
        ("fd0", &["-L", "72:64:1"], 60_000, &["-b", "8", "-m", "1"]),
    ];
    for (n, (channel, link, size, flow)) in cases.into_iter().enumerate() {
        let port = format!("ecu{n}");
        let recv_args = [&["-s", "7E8", "-d", "7E0"], link, flow, &[channel]].concat();
        let recv = start(&hub, "recv", &port, &recv_args);
        let length = size.to_string();
        let sent = send(&hub, &[&["-s", "7E0", "-d", "7E8", "-D", &length], link, &[channel]].concat(), "");
        assert!(sent.status.success(), "{size} bytes on {channel}: {}", String::from_utf8_lossy(&sent.stderr));
        let (stdout, _) = finished(recv);
        assert!(stdout == printed(&numbered(size)), "{size} bytes on {channel}: {} characters printed", stdout.len());
    }
}

#[test]
fn isotp_extended_addressing_and_padding_are_on_the_wire_and_checked() {
    let hub = FIELDHUB.start();
    let watcher = hub.client("watcher");
    let watch = watcher.open_port("can0").unwrap();
    let recv = start(&hub, "recv", "ecu", &["-s", "7E8", "-d", "7E0", "-x", "10:F1", "-p", "55:AA", "can0"]);
    let payload: Vec<u8> = (0x30..0x30 + 20).collect();
    let stdin: String = payload.iter().map(|b| format!("{b:02x} ")).collect();
    let sent = send(&hub, &["-s", "7E0", "-d", "7E8", "-x", "F1:10", "-p", "AA:55", "can0"], &stdin);
    assert!(sent.status.success(), "{}", String::from_utf8_lossy(&sent.stderr));
    assert_eq!(finished(recv).0, printed(&payload));
    // FF (5 bytes after the address and N_PCI), the ECU's FC, three CFs (6, 6, 3 bytes).
    let frames: Vec<Received> =
        std::iter::from_fn(|| watcher.recv(Some(std::time::Duration::from_secs(5))).unwrap()).take(5).collect();
    assert!(frames.iter().all(|r| r.port == watch.handle && r.frame.len() == 8), "{frames:?}");
    let tester: Vec<&[u8]> = frames.iter().filter(|r| r.frame.id() == 0x7E0).map(|r| r.frame.data()).collect();
    assert_eq!(tester[0], [0xF1, 0x10, 20, 0x30, 0x31, 0x32, 0x33, 0x34]);
    assert_eq!(tester[3], [0xF1, 0x23, 0x41, 0x42, 0x43, 0xAA, 0xAA, 0xAA]);
    let ecu = frames.iter().find(|r| r.frame.id() == 0x7E8).unwrap();
    assert_eq!(ecu.frame.data(), [0x10, 0x30, 0x00, 0x00, 0x55, 0x55, 0x55, 0x55]);
}

#[test]
fn isotp_send_without_a_receiver_says_no_flow_control_came_within_n_bs() {
    let hub = FIELDHUB.start();
    let sent = send(&hub, &["-s", "7E0", "-d", "7E8", "-D", "100", "--n-bs", "200", "can0"], "");
    assert_eq!(sent.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&sent.stderr);
    assert!(stderr.contains("no flow control from the receiver within N_Bs (200 ms) after 6 of 100 bytes"), "{stderr}");
}

#[test]
fn isotp_options_out_of_range_are_refused_with_what_fits() {
    let hub = FIELDHUB.start();
    let usage = |args: &[&str], stdin: &str, code: i32, says: &str| {
        let out = send(&hub, args, stdin);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    };
    usage(&["-s", "7E0", "-d", "7E8", "-L", "72:63:0", "can0"], "01", 2, "TX_DL 63 is not a frame length ISO-TP uses");
    usage(&["-s", "800", "-d", "7E8", "can0"], "01", 2, "800 is above the largest 11-bit id 7FF");
    usage(&["-s", "7E0", "-d", "7E0", "can0"], "01", 1, "-s and -d are both 7E0");
    usage(&["-s", "7E0", "-d", "7E8", "can0"], "", 1, "no payload: give hex bytes on stdin");
    usage(&["-s", "7E0", "-d", "7E8", "can0"], "01 2G", 1, "word 2 '2G' is not hex bytes");
    // A CAN FD link on a classic channel: the client refuses the first frame, as the hub would.
    usage(&["-s", "7E0", "-d", "7E8", "--fd", "-D", "100", "can0"], "", 1, "can0");
    let out = FIELDHUB
        .command()
        .args(["isotp", "recv", "--hub", &hub.url, "-s", "1", "-d", "2", "-m", "80", "can0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("STmin 80 is reserved"), "{out:?}");
    // can-utils' names get the tool that does their job.
    for (theirs, ours) in [("isotpsend", "isotp send"), ("isotpsniffer", "isotp dump --sniff")] {
        let out = FIELDHUB.command().arg(theirs).output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("did you mean 'fieldhub {ours}'?")), "{out:?}");
    }
}

#[test]
fn isotp_dump_explains_each_frame_and_sniff_prints_the_payload_of_each_direction() {
    let hub = FIELDHUB.start();
    let ids = ["-s", "7E0", "-d", "7E8"];
    let dump = start(&hub, "dump", "dump", &[&ids[..], &["-n", "4", "can0"]].concat());
    let sniff = start(&hub, "dump", "sniff", &[&ids[..], &["--sniff", "-n", "2", "can0"]].concat());
    let recv = start(&hub, "recv", "ecu", &["-s", "7E8", "-d", "7E0", "-b", "1", "-m", "F5", "can0"]);
    let sent = send(&hub, &["-s", "7E0", "-d", "7E8", "can0"], "41 42 43 44 45 46 47 48 49 4A 4B 4C 4D");
    assert!(sent.status.success(), "{}", String::from_utf8_lossy(&sent.stderr));
    finished(recv);
    let answer = send(&hub, &["-s", "7E8", "-d", "7E0", "can0"], "7F 22 31");
    assert!(answer.status.success(), "{}", String::from_utf8_lossy(&answer.stderr));
    let (frames, _) = finished(dump);
    assert_eq!(
        frames.lines().collect::<Vec<_>>(),
        [
            " can0  7E0  [8]  [FF] ln: 13   data: 41 42 43 44 45 46 ",
            " can0  7E8  [3]  [FC] FC: 0 = CTS # BS: 1 # STmin: 0xF5 = 500 us",
            " can0  7E0  [8]  [CF] sn: 1    data: 47 48 49 4A 4B 4C 4D ",
            " can0  7E8  [4]  [SF] ln: 3    data: 7F 22 31 ",
        ]
    );
    let (payloads, _) = finished(sniff);
    assert_eq!(
        payloads.lines().collect::<Vec<_>>(),
        [
            " can0  7E0  [13]  41 42 43 44 45 46 47 48 49 4A 4B 4C 4D  - 'ABCDEFGHIJKLM'",
            " can0  7E8  [3]  7F 22 31  - '.\"1'"
        ]
    );
}
