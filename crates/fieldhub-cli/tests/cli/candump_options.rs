//! `fieldhub dump`'s candump options against a real hub, as candump's usage
//! text documents them (`-T`, `-a`, `-c`, `-l`, `-s`, `-t A`, `-N`, `-D`,
//! `-d`, `any`; the line layouts themselves are the unit tests' of
//! `candump_text.rs`).

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use crate::FIELDHUB;

/// candump -T MS: "terminate after MS if no frames were received" — with
/// status 0, whatever it printed before.
#[test]
fn dump_t_ends_after_the_idle_time_with_status_0() {
    let hub = FIELDHUB.start();
    let out = FIELDHUB.command().args(["dump", "--hub", &hub.url, "-T", "100", "can0"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stdout.is_empty());
}

#[test]
fn dump_a_and_c_print_the_ascii_column_and_the_channels_colour() {
    let hub = FIELDHUB.start();
    let dump = FIELDHUB
        .command()
        .args(["dump", "--hub", &hub.url, "-n", "1", "-a", "-c", "can0"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    hub.wait_for_log("port opened");
    let sent = FIELDHUB.command().args(["send", "--hub", &hub.url, "can0", "123#48690A"]).output().unwrap();
    assert!(sent.status.success());
    let out = dump.wait_with_output().unwrap();
    let line = String::from_utf8(out.stdout).unwrap();
    assert!(line.starts_with("  \x1b[34mcan0\x1b[0m  123   [3]  48 69 0A"), "{line:?}");
    assert!(line.ends_with("  'Hi.'\n"), "{line:?}");
}

/// candump -l: "log CAN-frames into file. Sets '-s 2' by default" — a file
/// named candump-YYYY-MM-DD_HHMMSS.log in the current directory, announced
/// on stderr, nothing on stdout.
#[test]
fn dump_l_logs_to_a_file_named_like_candumps_and_keeps_stdout_silent() {
    let hub = FIELDHUB.start();
    let dir = TempDir::new("dump-l");
    let dump = FIELDHUB
        .command()
        .args(["dump", "--hub", &hub.url, "-l", "-x", "-n", "2", "can0"])
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    hub.wait_for_log("port opened");
    send(&hub, "can0", "123#DEADBEEF");
    send(&hub, "can0", "1ABCDEF0#R");
    let out = dump.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && out.stdout.is_empty(), "{stderr}");
    let names: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    let [name] = names.as_slice() else { panic!("one log file: {names:?}") };
    assert!(is_candump_log_name(name), "{name}");
    assert!(stderr.contains("Disabled standard output while logging."), "{stderr}");
    assert!(stderr.contains(&format!("Enabling Logfile '{name}'")), "{stderr}");
    let log = std::fs::read_to_string(dir.path().join(name)).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 2, "{log}");
    for (line, sent) in lines.iter().zip(["123#DEADBEEF", "1ABCDEF0#R"]) {
        // -x marks a received frame R, as candump's log does.
        assert!(line.starts_with('(') && line.ends_with(&format!(" can0 {sent} R")), "{line}");
    }
}

/// candump-2026-11-27_135103.log
fn is_candump_log_name(name: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let Some(stamp) = name.strip_prefix("candump-").and_then(|s| s.strip_suffix(".log")) else { return false };
    let parts: Vec<&str> = stamp.split(['-', '_']).collect();
    parts.len() == 4 && parts.iter().all(|p| digits(p)) && parts.iter().map(|p| p.len()).eq([4, 2, 2, 6])
}

/// candump -s: "silent mode - 0: off (default) 1: animation 2: silent".
#[test]
fn dump_s_1_turns_an_animation_and_s_2_prints_nothing() {
    let hub = FIELDHUB.start();
    let animated = dump_of(&hub, &["-s", "1", "-n", "3", "can0"]);
    let silent = dump_of(&hub, &["-s", "2", "-n", "3", "can0"]);
    hub.wait_for_log_times("port opened", 2);
    for frame in ["123#01", "123#02", "123#03"] {
        send(&hub, "can0", frame);
    }
    let animated = animated.wait_with_output().unwrap();
    assert_eq!(String::from_utf8(animated.stdout).unwrap(), "|\x08/\x08-\x08");
    let silent = silent.wait_with_output().unwrap();
    assert!(silent.status.success() && silent.stdout.is_empty());
}

/// candump -t A: "(a)bsolute w date", and -N: "log nanosecond timestamps".
#[test]
fn dump_t_capital_a_prints_the_date_and_n_nanoseconds() {
    let hub = FIELDHUB.start();
    let mut command = FIELDHUB.command();
    command.env("TZ", "UTC").args(["dump", "--hub", &hub.url, "-t", "A", "-N", "-n", "1", "can0"]);
    let dump = command.stdout(Stdio::piped()).spawn().unwrap();
    hub.wait_for_log("port opened");
    send(&hub, "can0", "123#01");
    let line = String::from_utf8(dump.wait_with_output().unwrap().stdout).unwrap();
    // " (2026-11-27 13:51:03.123456789)  can0  123   [1]  01"
    let (stamp, rest) = line.split_once(')').unwrap();
    assert_eq!(rest, "  can0  123   [1]  01\n", "{line:?}");
    let stamp = stamp.strip_prefix(" (").unwrap();
    assert_eq!(stamp.len(), "2026-11-27 13:51:03.123456789".len(), "{line:?}");
    let today = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() / 86_400;
    let (year, _) = stamp.split_once('-').unwrap();
    assert_eq!(year.parse::<u64>().unwrap(), 1970 + today * 400 / 146_097, "{line:?}");
}

/// candump any "receives from all CAN interfaces" — also one that comes up
/// while it runs.
#[test]
fn dump_any_listens_on_a_channel_added_while_it_runs() {
    let hub = FIELDHUB.start();
    let dump = dump_of(&hub, &["-n", "1", "any"]);
    hub.wait_for_log_times("port opened", 2);
    let added = FIELDHUB.command().args(["ctl", "--hub", &hub.url, "channel", "add", "body"]).output().unwrap();
    assert!(added.status.success(), "{}", String::from_utf8_lossy(&added.stderr));
    hub.wait_for_log_times("port opened", 3);
    send(&hub, "body", "321#BEEF");
    let out = dump.wait_with_output().unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "  body  321   [2]  BE EF\n");
}

/// candump -D: "Don't exit if a detected can device goes down" — a dump
/// whose hub went away waits for it, as --reconnect.
#[test]
fn dump_capital_d_waits_when_the_hub_goes_away() {
    let port = fieldhub_testkit::federation::free_port();
    let hub = FIELDHUB.start_with(None, &["--listen", &format!("127.0.0.1:{port}")]);
    let url = format!("tcp://127.0.0.1:{port}");
    let mut dump =
        FIELDHUB.command().args(["dump", "--hub", &url, "-D", "can0"]).stderr(Stdio::piped()).spawn().unwrap();
    hub.wait_for_log("port opened");
    drop(hub);
    let mut stderr = BufReader::new(dump.stderr.take().unwrap());
    let mut said = String::new();
    stderr.read_line(&mut said).unwrap();
    // The hub logs "port opened" before its answer reaches the dump: gone
    // in between, the dump is told while opening, and waits all the same.
    let waits = ["dump: the hub went away; reconnecting", "dump: waiting for the hub (--reconnect)"];
    assert!(waits.iter().any(|w| said.starts_with(w)), "{said}");
    assert!(dump.try_wait().unwrap().is_none(), "still running");
    dump.kill().unwrap();
    dump.wait().unwrap();
}

/// candump -d: "monitor dropped CAN frames" — a DROPCOUNT line once frames
/// were lost for this reader, stopped while the bus went on.
#[test]
fn dump_d_says_how_many_frames_a_stopped_reader_lost() {
    let hub = FIELDHUB.start();
    let mut dump = dump_of(&hub, &["-d", "--port", "dump", "can0"]);
    hub.wait_for_log("port opened");
    let pid = dump.id() as libc::pid_t;
    // SAFETY: kill(2) with the pid of our own child, which runs until we reap it below.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    let sender = hub.client("sender");
    let port = sender.open_port("can0").unwrap();
    let mut sent = 0u32;
    fieldhub_testkit::wait_until(fieldhub_testkit::deadline(), "the stopped dump's port drops frames", || {
        for _ in 0..2_000 {
            sender.send(&port, &fieldhub_testkit::numbered(0x123, 1, sent)).unwrap();
            sent += 1;
        }
        sender.flush().unwrap();
        let ports = fieldhub_testkit::ok(&hub, "GET", "/api/v1/ports", None);
        ports.as_array().unwrap().iter().any(|p| p["name"] == "dump" && p["rx_dropped"].as_u64() > Some(0))
    });
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
    // The hub reports a port's drops ahead of the next frame it has room
    // for, as the kernel tells candump's socket with the next frame: a
    // frame now and then until the dump has said it, then the dump ends.
    let said = std::sync::atomic::AtomicBool::new(false);
    let lines = BufReader::new(dump.stdout.take().unwrap()).lines().map(Result::unwrap);
    let told = std::thread::scope(|s| {
        s.spawn(|| {
            for more in 0..200 {
                if said.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                sender.send(&port, &fieldhub_testkit::numbered(0x124, 1, more)).unwrap();
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            // SAFETY: as above; the dump is reaped after this scope.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        });
        let told = { lines }.find(|line| line.starts_with("DROPCOUNT: dropped "));
        said.store(true, std::sync::atomic::Ordering::Relaxed);
        told
    });
    dump.wait().unwrap();
    let told = told.expect("a DROPCOUNT line");
    assert!(told.contains(" CAN frames on 'can0' socket (total drops "), "{told}");
}

/// A directory of this test's own, gone with it.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(what: &str) -> Self {
        let path =
            std::env::temp_dir().join(format!("fieldhub-{what}-{}-{}", std::process::id(), fieldhub_testkit::unique()));
        std::fs::create_dir(&path).unwrap();
        Self(path)
    }

    fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn dump_of(hub: &fieldhub_testkit::HubProcess, args: &[&str]) -> std::process::Child {
    FIELDHUB.command().args(["dump", "--hub", &hub.url]).args(args).stdout(Stdio::piped()).spawn().unwrap()
}

fn send(hub: &fieldhub_testkit::HubProcess, channel: &str, frame: &str) {
    let out = FIELDHUB.command().args(["send", "--hub", &hub.url, channel, frame]).output().unwrap();
    assert!(out.status.success(), "send {frame}: {}", String::from_utf8_lossy(&out.stderr));
}
