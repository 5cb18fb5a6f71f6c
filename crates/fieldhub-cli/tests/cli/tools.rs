//! The command-line tools against a real hub.

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use crate::FIELDHUB;
use fieldhub_client::PortConfig;
use fieldhub_proto::text::{parse_cansend, parse_log_line};
use fieldhub_testkit::*;

fn fieldhub(hub: &HubProcess, args: &[&str]) -> std::process::Output {
    let (tool, rest) = args.split_first().expect("a subcommand");
    FIELDHUB.command().arg(tool).args(["--hub", &hub.url]).args(rest).output().expect("run fieldhub")
}

#[test]
fn dump_sees_what_send_sent_in_log_format() {
    let hub = FIELDHUB.start();
    let mut dump = FIELDHUB
        .command()
        .args(["dump", "--hub", &hub.url, "-L", "-n", "4", "can0"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start dump");
    hub.wait_for_log("name=dump");
    hub.wait_for_log("port opened");
    let frames = ["123#11223344", "1ABCDEF0#R", "7FF#", "123#1122334455667788_C"];
    for frame in frames {
        let out = fieldhub(&hub, &["send", "can0", frame]);
        assert!(out.status.success(), "send {frame}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let lines: Vec<String> = BufReader::new(dump.stdout.take().unwrap()).lines().map(Result::unwrap).collect();
    assert!(dump.wait().unwrap().success());
    assert_eq!(lines.len(), frames.len());
    for (line, sent) in lines.iter().zip(frames) {
        let parsed = parse_log_line(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        assert_eq!(parsed.channel, "can0");
        assert_eq!(parsed.frame, parse_cansend(sent).unwrap(), "{line}");
        assert!(line.ends_with(sent), "{line}");
    }
}

#[test]
fn dump_prints_candump_lines_and_applies_filters() {
    let hub = FIELDHUB.start();
    let dump = FIELDHUB
        .command()
        .args(["dump", "--hub", &hub.url, "-n", "2", "can0,100:700"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start dump");
    hub.wait_for_log("port opened");
    for frame in ["123#01", "200#02", "1FF#03"] {
        assert!(fieldhub(&hub, &["send", "can0", frame]).status.success());
    }
    let out = dump.wait_with_output().unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "  can0  123   [1]  01\n  can0  1FF   [1]  03\n");
}

#[test]
fn gen_sends_the_requested_count_with_an_incrementing_payload() {
    let hub = FIELDHUB.start();
    let watcher = hub.client("watcher");
    watcher.open_port_with("can1", &lossless()).unwrap();
    let out = fieldhub(&hub, &["gen", "-g", "0", "-n", "1000", "-I", "42", "-L", "8", "-D", "i", "-e", "can1"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let got = recv_n(&watcher, 1000);
    for (i, r) in got.iter().enumerate() {
        assert_eq!(r.frame.id(), 0x42);
        assert!(r.frame.is_extended());
        assert_eq!(r.frame.data(), (i as u64).to_le_bytes());
    }
    assert_nothing_pending(&watcher);
}

#[test]
fn send_reports_bad_frames_and_unknown_channels_clearly() {
    let hub = FIELDHUB.start();
    let out = fieldhub(&hub, &["send", "can0", "123#123"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("pairs of hex digits"));
    // Said once, not once more as the error's cause.
    let out = fieldhub(&hub, &["send", "can0", "123#112233445566778899"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.matches("at most 8 data bytes").count(), 1, "{stderr}");
    let out = fieldhub(&hub, &["send", "nope", "123#12"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown channel 'nope'; this hub has: can0, can1"));
    let out = fieldhub(&hub, &["send", "can0", "123##1DEAD"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("channel 'can0'") && stderr.contains("classic CAN and cannot carry CAN FD frames"),
        "{stderr}"
    );
}

#[test]
fn send_on_a_channel_where_nobody_acknowledges_stops_and_says_why() {
    let hub = FIELDHUB.start_with(Some("[[channel]]\nname = \"body\"\nno_ack = true\n"), &[]);
    let out = fieldhub(&hub, &["send", "body", "123#00"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    for needle in
        ["123#00 is queued on 'body' but not on the bus", "error-passive", "no other port is on 'body'", "no_ack"]
    {
        assert!(stderr.contains(needle), "{needle:?} missing from: {stderr}");
    }
}

#[test]
fn dump_shows_fd_details_and_explains_error_frames_like_candump_x_and_e() {
    let hub = FIELDHUB.start_with(Some("[[channel]]\nname = \"fd0\"\nprotocol = \"canfd\"\n"), &[]);
    let dump = FIELDHUB
        .command()
        .args(["dump", "--hub", &hub.url, "-x", "-e", "-n", "2", "fd0"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start dump");
    hub.wait_for_log("port opened");
    // A CAN FD frame with BRS, then the controller report of an error-passive transmitter.
    for frame in ["123##1DEAD", "20000204#0020000000008800"] {
        let out = fieldhub(&hub, &["send", "fd0", frame]);
        assert!(out.status.success(), "send {frame}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let out = dump.wait_with_output().unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "  fd0  RX B -  123  [02]  DE AD\n\
         \x20 fd0  RX - -  20000204   [8]  00 20 00 00 00 00 88 00   ERRORFRAME\n\
         \tcontroller-problem{tx-error-passive}\n\
         \terror-counter-tx-rx{{136}{0}}\n"
    );
}

#[test]
fn fd_frames_travel_on_an_fd_channel() {
    let hub = FIELDHUB.start_with(Some("[[channel]]\nname = \"fd0\"\nprotocol = \"canfd\"\n"), &[]);
    let watcher = hub.client("watcher");
    watcher.open_port_with("fd0", &PortConfig { fd: true, ..Default::default() }).unwrap();
    let frame = "1ABCDEF0##3000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F202122232425262728292A2B2C2D2E2F303132333435363738393A3B3C3D3E3F";
    assert!(fieldhub(&hub, &["send", "fd0", frame]).status.success());
    let got = recv_n(&watcher, 1);
    assert_eq!(got[0].frame, parse_cansend(frame).unwrap());
    assert_eq!(got[0].frame.len(), 64);
}

#[test]
fn tools_explain_a_missing_hub() {
    let out = FIELDHUB.command().args(["send", "--hub", "tcp://127.0.0.1:1", "can0", "123#00"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot reach the hub at tcp://127.0.0.1:1") && stderr.contains("refused"), "{stderr}");
}

#[test]
fn invalid_config_file_is_rejected_naming_file_line_and_field() {
    let path = std::env::temp_dir().join(format!("fieldhub-bad-{}.toml", std::process::id()));
    std::fs::write(&path, "[[channel]]\nname = \"a\"\nprotocl = \"can\"\n").unwrap();
    let out = FIELDHUB.command().args(["hub", "--config"]).arg(&path).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    std::fs::remove_file(&path).unwrap();
    assert!(!out.status.success());
    assert!(
        stderr.contains(&path.display().to_string()) && stderr.contains("line 3") && stderr.contains("protocl"),
        "{stderr}"
    );
}

/// A second hub on a taken address stops at once and says why, once.
#[test]
fn a_hub_on_a_taken_address_says_so_once() {
    let hub = FIELDHUB.start();
    let addr = hub.url.strip_prefix("tcp://").unwrap();
    let out = FIELDHUB.command().args(["hub", "--no-shm", "--listen", addr]).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("cannot listen on tcp://{addr}")), "{stderr}");
    assert_eq!(stderr.matches("Address already in use").count(), 1, "{stderr}");
}

#[test]
fn tools_open_named_ports_that_the_control_api_and_the_configuration_know() {
    // `abs` is a configured port with a rate limit; `logger` is named by
    // the tool alone.
    let config = "[[channel]]\nname = \"can0\"\n[[port]]\nname = \"abs\"\nchannel = \"can0\"\nrate = 1000\n";
    let hub = FIELDHUB.start_with(Some(config), &[]);
    let spawn = |args: &[&str]| {
        let (tool, rest) = args.split_first().unwrap();
        FIELDHUB
            .command()
            .arg(tool)
            .args(["--hub", &hub.url])
            .args(rest)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let names = || -> Vec<String> {
        let ports = ok(&hub, "GET", "/api/v1/ports", None);
        ports.as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap().to_owned()).collect()
    };
    let wait_for = |name: &str| {
        wait_until(deadline(), format_args!("a port named '{name}' opens"), || names().iter().any(|n| n == name))
    };
    let logger = spawn(&["dump", "--port", "logger", "-n", "20", "can0"]);
    wait_for("logger");
    let mut abs = spawn(&["gen", "--port", "abs", "-g", "50", "-I", "123", "-n", "20", "can0"]);
    wait_for("abs");
    assert!(abs.wait().unwrap().success());
    let out = logger.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 20);

    // A named port is one port: one channel only, and a wired port's channel.
    let out = fieldhub(&hub, &["dump", "--port", "two", "can0", "can1"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--port names one port"), "{out:?}");
    let out = fieldhub(&hub, &["send", "--port", "abs", "can1", "123#00"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("port 'abs' is wired to channel 'can0'"), "{out:?}");
}

#[test]
fn dump_any_listens_on_every_channel() {
    let hub = FIELDHUB.start();
    let dump =
        FIELDHUB.command().args(["dump", "--hub", &hub.url, "-n", "2", "any"]).stdout(Stdio::piped()).spawn().unwrap();
    let ports = || ok(&hub, "GET", "/api/v1/ports", None).as_array().unwrap().len();
    wait_until(deadline(), "dump opens a port on each channel", || ports() >= 2);
    assert!(fieldhub(&hub, &["send", "can0", "100#01"]).status.success());
    assert!(fieldhub(&hub, &["send", "can1", "101#02"]).status.success());
    let out = dump.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("can0  100   [1]  01") && text.contains("can1  101   [1]  02"), "{text}");
}

#[test]
fn a_quiet_hub_leaves_out_per_client_lines_but_keeps_warnings() {
    use std::io::Write;
    let hub = FIELDHUB.start_with(None, &["--quiet"]);
    let out = fieldhub(&hub, &["send", "can0", "123#00"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // A client that is not one: its warning is logged after where the
    // sender's lines would be, so waiting for it proves they were left out.
    let mut stranger = std::net::TcpStream::connect(hub.url.trim_start_matches("tcp://")).unwrap();
    stranger.write_all(b"CAN!\x01\x00\x00\x00").unwrap();
    hub.wait_for_log("(is this a fieldhub client?)");
    let per_client = ["client connected", "port opened", "client disconnected"];
    let log = hub.log();
    assert!(!log.iter().any(|line| per_client.iter().any(|p| line.contains(p))), "{log:#?}");
}

/// A private file holding `token`, named for the test.
fn token_file(test: &str, token: &str, mode: u32) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::temp_dir().join(format!("fieldhub-{test}-{}.token", std::process::id()));
    std::fs::write(&path, format!("{token}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

#[test]
fn hub_and_tools_take_the_token_from_a_private_file() {
    let path = token_file("token-file", "sesame", 0o600);
    let hub = FIELDHUB.start_with(None, &["--token-file", path.to_str().unwrap()]);
    let send = |env: &[(&str, &str)]| {
        FIELDHUB
            .command()
            .args(["send", "--hub", &hub.url, "can0", "123#00"])
            .env_remove("FIELDHUB_TOKEN")
            .env_remove("FIELDHUB_TOKEN_FILE")
            .envs(env.iter().copied())
            .output()
            .unwrap()
    };
    let refused = send(&[]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("FIELDHUB_TOKEN_FILE"), "{refused:?}");
    let out = send(&[("FIELDHUB_TOKEN_FILE", path.to_str().unwrap())]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = send(&[("FIELDHUB_TOKEN", "sesame")]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let _ = std::fs::remove_file(path);
}

#[test]
fn a_token_file_other_users_can_read_is_refused_before_the_hub_starts() {
    let path = token_file("exposed-token", "sesame", 0o644);
    let out = FIELDHUB
        .command()
        .args(["hub", "--listen", "127.0.0.1:0", "--no-shm", "--token-file", path.to_str().unwrap()])
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&path);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("chmod 600 {}", path.display())), "{stderr}");
}

#[test]
fn a_confirmation_that_does_not_come_within_timeout_is_reported_as_queued_not_refused() {
    let hub = FIELDHUB.start_with(Some("[[channel]]\nname = \"body\"\nno_ack = true\n"), &[]);
    let log = std::env::temp_dir().join(format!("fieldhub-timeout-{}.log", std::process::id()));
    std::fs::write(&log, "(0.000000) body 123#01\n(0.001000) body 124#02\n").unwrap();
    let out = fieldhub(&hub, &["replay", "--timeout", "0.5", log.to_str().unwrap()]);
    std::fs::remove_file(&log).unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    for needle in ["did not confirm the replayed frames within 0.5 s", "queued, not refused", "--timeout"] {
        assert!(stderr.contains(needle), "{needle:?} missing from: {stderr}");
    }
    assert!(!stderr.contains("refused a replayed frame"), "{stderr}");

    let out = fieldhub(&hub, &["send", "--timeout", "0.25", "body", "123#00"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("not on the bus after 0.25 s"));
}

#[test]
fn a_timeout_that_is_not_a_positive_number_of_seconds_is_refused_by_name() {
    let hub = FIELDHUB.start();
    for (given, needle) in [("0", "more than 0"), ("1e9", "at most 86400"), ("soon", "not a number of seconds")] {
        let out = fieldhub(&hub, &["send", "--timeout", given, "can0", "123#00"]);
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("--timeout") && stderr.contains(needle), "{given}: {stderr}");
    }
}

#[test]
fn send_to_a_bus_off_controller_exits_non_zero_naming_bus_off() {
    let hub = FIELDHUB.start();
    let out = fieldhub(&hub, &["ctl", "short", "can0"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = fieldhub(&hub, &["send", "--port", "s1", "can0", "123#01"]);
    assert!(!out.status.success(), "a frame that never reached the bus was confirmed");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("123#01 is not on 'can0'") && stderr.contains("bus-off"), "{stderr}");
    let stats = fieldhub(&hub, &["stats"]);
    assert!(String::from_utf8_lossy(&stats.stdout).contains("bus_off"), "counted by reason");
}

#[test]
fn send_on_a_hub_in_virtual_time_says_the_frame_waits_for_bus_time() {
    let hub = FIELDHUB.start_with(None, &["--time", "virtual"]);
    let out = fieldhub(&hub, &["send", "can0", "123#01"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("123#01 is queued on 'can0' for bus time") && stderr.contains("run-until"), "{stderr}");
}

/// cangen -E: "generate CAN FD CAN frames with error state (ESI)"; -8:
/// "allow DLC values greater then 8 for Classic CAN frames".
#[test]
fn gen_capital_e_sets_esi_and_8_sends_classic_dlcs_above_8() {
    let hub = FIELDHUB.start_with(Some("[[channel]]\nname = \"fd0\"\nprotocol = \"canfd\"\n"), &[]);
    let watcher = hub.client("watcher");
    watcher.open_port_with("fd0", &PortConfig { fd: true, ..lossless() }).unwrap();
    let out = fieldhub(&hub, &["gen", "-g", "0", "-n", "2", "-E", "-L", "12", "fd0"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = fieldhub(&hub, &["gen", "-g", "0", "-n", "2", "-8", "-L", "13", "fd0"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let got = recv_n(&watcher, 4);
    for r in &got[..2] {
        assert!(r.frame.is_fd() && r.frame.flags().contains(fieldhub_proto::FrameFlags::ESI), "{:?}", r.frame);
        assert_eq!(r.frame.len(), 12);
    }
    for r in &got[2..] {
        assert!(!r.frame.is_fd(), "{:?}", r.frame);
        assert_eq!((r.frame.len(), r.frame.len8_dlc()), (8, 13));
    }
}

/// cangen -m: "mix CC [-e -R] FD [-f -b -E] ... on capable devices".
#[test]
fn gen_m_mixes_classic_fd_extended_and_remote_frames() {
    let hub = FIELDHUB.start_with(Some("[[channel]]\nname = \"fd0\"\nprotocol = \"canfd\"\n"), &[]);
    let watcher = hub.client("watcher");
    watcher.open_port_with("fd0", &PortConfig { fd: true, ..lossless() }).unwrap();
    let out = fieldhub(&hub, &["gen", "-g", "0", "-n", "300", "-m", "--seed", "7", "fd0"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let got = recv_n(&watcher, 300);
    let any = |test: &dyn Fn(&fieldhub_proto::Frame) -> bool| got.iter().any(|r| test(&r.frame));
    assert!(any(&|f| f.is_fd()) && any(&|f| !f.is_fd()), "CAN FD and classic");
    assert!(any(&|f| f.is_extended()) && any(&|f| !f.is_extended()), "29- and 11-bit");
    assert!(any(&|f| f.is_remote()), "remote frames among the classic ones");
    assert!(any(&|f| f.flags().contains(fieldhub_proto::FrameFlags::BRS)), "BRS on some CAN FD frames");
}

/// cangen -c: "number of messages to send in burst" — the gap comes between
/// bursts, so one burst of three ends without waiting the (ten-minute) gap.
#[test]
fn gen_c_sends_a_burst_without_the_gap_inside_it() {
    let hub = FIELDHUB.start();
    let watcher = hub.client("watcher");
    watcher.open_port_with("can1", &lossless()).unwrap();
    let out = fieldhub(&hub, &["gen", "-c", "3", "-g", "600000", "-n", "3", "-I", "42", "can1"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(recv_n(&watcher, 3).len(), 3);
    assert_nothing_pending(&watcher);
}

/// `gen -X` sends CAN XL frames as cangen -X does, `gen --raw` raw frames; `dump`
/// prints them in can-utils' XL layout and fieldhub's raw one.
#[test]
fn gen_sends_can_xl_and_raw_frames_and_dump_prints_them() {
    let config =
        "[[channel]]\nname = \"xl0\"\nprotocol = \"canxl\"\n[[channel]]\nname = \"field\"\nprotocol = \"raw\"\n";
    let hub = FIELDHUB.start_with(Some(config), &[]);
    let dump = FIELDHUB
        .command()
        .args(["dump", "--hub", &hub.url, "-n", "3", "xl0"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start dump");
    hub.wait_for_log("port opened");
    let watcher = hub.client("watcher");
    watcher.open_port_with("field", &lossless()).unwrap();
    // -V, -S, -F and -A as cangen's: fixed hex, or incremented before each frame.
    let args = ["-I", "123", "-L", "i", "-D", "i", "-V", "2A", "-S", "i", "-F", "i", "-A", "DEADBEEF"];
    let out = fieldhub(&hub, &[&["gen", "-X", "-g", "0", "-n", "3"][..], &args, &["xl0"]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = dump.wait_with_output().unwrap();
    let lines = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        lines,
        "  xl0  123 [0001] (2A|81:01:DEADBEEF) 00\n  xl0  123 [0002] (2A|82:02:DEADBEEF) 01 00\n  \
         xl0  123 [0003] (2A|83:03:DEADBEEF) 02 00 00\n"
    );
    let out = fieldhub(&hub, &["gen", "--raw", "-g", "0", "-n", "2", "-I", "DEADBEEF", "-L", "2048", "field"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for received in recv_n(&watcher, 2) {
        assert!(received.frame.is_raw());
        assert_eq!((received.frame.id(), received.frame.len()), (0xDEAD_BEEF, 2048));
    }
    let out = fieldhub(&hub, &["gen", "-X", "-R", "-n", "1", "xl0"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("-X (CAN XL) takes none of -R"));
    let out = fieldhub(&hub, &["gen", "-V", "1", "-A", "2", "-n", "1", "xl0"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("-V -A are fields of CAN XL frames: add -X"));
    let out = fieldhub(&hub, &["gen", "-X", "-F", "10", "-n", "1", "xl0"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("-F 10: expected r (random), i (incrementing) or hex flags"));
}
