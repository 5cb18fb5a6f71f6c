//! `fieldhub record` and `fieldhub replay` against a real hub: what is
//! recorded is what was sent, and what is replayed is what was recorded.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::FIELDHUB;
use fieldhub_client::{Client, Frame, FrameFlags, PortConfig};
use fieldhub_log::{open, Direction, Format, ReadOptions, Record, Recorder, RecorderOptions};
use fieldhub_proto::frame::FD_LENGTHS;
use fieldhub_testkit::*;

const CHANNELS: &str = r#"
[[channel]]
name = "can0"
protocol = "can"

[[channel]]
name = "fd0"
protocol = "canfd"

[[channel]]
name = "can1"
protocol = "can"

[[channel]]
name = "fd1"
protocol = "canfd"
"#;

/// A scratch directory removed when the test ends.
pub(crate) struct Scratch(PathBuf);

impl Scratch {
    pub(crate) fn new(test: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("fieldhub-record-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create scratch dir");
        Self(dir)
    }
    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn fieldhub(hub: &HubProcess, args: &[&str]) -> std::process::Output {
    let (tool, rest) = args.split_first().expect("a subcommand");
    FIELDHUB.command().arg(tool).args(["--hub", &hub.url]).args(rest).output().expect("run fieldhub")
}

/// Start `fieldhub record` and wait until its ports are open.
fn start_recording(hub: &HubProcess, args: &[&str]) -> Child {
    let mut child = FIELDHUB
        .command()
        .args(["record", "--hub", &hub.url])
        .args(args)
        .stderr(Stdio::piped())
        .spawn()
        .expect("start fieldhub record");
    let mut first = String::new();
    BufReader::new(child.stderr.as_mut().expect("stderr")).read_line(&mut first).expect("read record's stderr");
    assert!(first.starts_with("recording "), "record did not start: {first}");
    child
}

/// Wait for a child to exit, failing (not hanging) if it does not.
fn wait_exit(mut child: Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("fieldhub record did not finish");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn read_log(path: &Path) -> Vec<Record> {
    open(path, None, &ReadOptions::default())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .collect::<Result<Vec<_>, _>>()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The classic frame number `i`: data, extended, remote, raw-DLC and error
/// frames in turn, each carrying or encoding `i`.
fn classic(i: u32) -> Frame {
    let n = i.to_le_bytes();
    match i % 6 {
        0 => Frame::can(0x100 + i % 0x100, false, &[n[0], n[1], n[2], n[3], (i % 7) as u8]).unwrap(),
        1 => Frame::can(0x1000_0000 | i, true, &n[..(i % 5) as usize]).unwrap(),
        2 => Frame::remote(i % 0x800, false, (i % 9) as usize).unwrap(),
        3 => {
            let mut frame = Frame::can(0x7FF, false, &[n[0], n[1], n[2], n[3], 0, 0, 0, 0]).unwrap();
            frame.set_len8_dlc(9 + (i % 7) as u8).unwrap();
            frame
        }
        4 if i % 60 == 4 => Frame::error(0x04, [n[0], n[1], n[2], n[3], 0, 0, 0, 0]).unwrap(),
        _ => Frame::can(i % 0x800, false, &[]).unwrap(),
    }
}

/// The CAN FD frame number `i`: every FD length, BRS/ESI combinations,
/// standard and extended ids, the counter in the first bytes.
fn fd(i: u32) -> Frame {
    let len = FD_LENGTHS[(i % 16) as usize] as usize;
    let mut data = [0u8; 64];
    for (k, byte) in data.iter_mut().enumerate().take(len) {
        *byte = (i as usize * 7 + k) as u8;
    }
    data[..len.min(4)].copy_from_slice(&i.to_le_bytes()[..len.min(4)]);
    let mut flags = FrameFlags::empty();
    if i % 2 == 0 {
        flags = flags.union(FrameFlags::BRS);
    }
    if i % 3 == 0 {
        flags = flags.union(FrameFlags::ESI);
    }
    let id = if i % 5 == 0 {
        flags = flags.union(FrameFlags::EXTENDED);
        0x1800_0000 | i
    } else {
        i % 0x800
    };
    Frame::can_fd(id, flags, &data[..len]).unwrap()
}

/// Frames per channel, in the order received.
fn per_channel(records: &[Record]) -> HashMap<String, Vec<Frame>> {
    let mut out: HashMap<String, Vec<Frame>> = HashMap::new();
    for r in records {
        out.entry(r.channel.clone()).or_default().push(r.frame.clone());
    }
    out
}

fn receive_per_channel(client: &Client, n: usize) -> HashMap<String, Vec<Frame>> {
    let names: HashMap<u16, String> = client.ports().into_iter().map(|p| (p.handle, p.channel)).collect();
    let mut out: HashMap<String, Vec<Frame>> = HashMap::new();
    for r in recv_n(client, n) {
        out.entry(names[&r.port].clone()).or_default().push(r.frame.clone());
    }
    out
}

#[test]
fn recorded_traffic_replays_identically_from_candump_asc_and_blf() {
    const CLASSIC: u32 = 3000;
    const FD: u32 = 1500;
    let hub = FIELDHUB.start_with(Some(CHANNELS), &[]);
    let scratch = Scratch::new("round-trip");
    let (log, asc, blf) = (scratch.path("traffic.log"), scratch.path("traffic.asc"), scratch.path("traffic.blf"));
    let total = (CLASSIC + FD).to_string();
    let recorders = [
        start_recording(&hub, &["-n", &total, "-o", log.to_str().unwrap(), "can0", "fd0"]),
        start_recording(&hub, &["-n", &total, "-o", asc.to_str().unwrap(), "can0", "fd0"]),
        start_recording(&hub, &["-n", &total, "-o", blf.to_str().unwrap(), "can0", "fd0"]),
    ];

    let sender = hub.client("sender");
    let fd_port = PortConfig { fd: true, ..Default::default() };
    let (can0, fd0) = (sender.open_port("can0").unwrap(), sender.open_port_with("fd0", &fd_port).unwrap());
    let sent_classic: Vec<Frame> = (0..CLASSIC).map(classic).collect();
    let sent_fd: Vec<Frame> = (0..FD).map(fd).collect();
    for i in 0..CLASSIC as usize {
        sender.send(&can0, &sent_classic[i]).unwrap();
        if i % 2 == 1 {
            sender.send(&fd0, &sent_fd[i / 2]).unwrap();
        }
    }
    sender.flush().unwrap();
    for recorder in recorders {
        assert!(wait_exit(recorder).success());
    }

    let from_log = read_log(&log);
    let from_asc = read_log(&asc);
    let from_blf = read_log(&blf);
    for (name, records) in [("candump", &from_log), ("asc", &from_asc), ("blf", &from_blf)] {
        let channels = per_channel(records);
        assert_eq!(channels["can0"], sent_classic, "{name}: can0 differs from what was sent");
        assert_eq!(channels["fd0"], sent_fd, "{name}: fd0 differs from what was sent");
        for channel in ["can0", "fd0"] {
            let stamps: Vec<u64> = records.iter().filter(|r| r.channel == channel).map(|r| r.timestamp_ns).collect();
            assert!(stamps.windows(2).all(|w| w[0] <= w[1]), "{name}: {channel} timestamps go backwards");
        }
    }
    // The recorders saw the hub's timestamps; the files agree to the microsecond (BLF keeps ns).
    let strip = |rs: &[Record]| {
        let mut rs: Vec<_> = rs.iter().map(|r| (r.timestamp_ns / 1_000, r.channel.clone(), r.frame.clone())).collect();
        rs.sort_by_key(|(ts, ch, _)| (ch.clone(), *ts));
        rs
    };
    assert_eq!(strip(&from_log), strip(&from_asc));
    assert_eq!(strip(&from_log), strip(&from_blf));

    let watcher = hub.client("watcher");
    watcher.open_port_with("can1", &lossless()).unwrap();
    watcher.open_port_with("fd1", &lossless()).unwrap();
    for (file, recorded) in [(&log, &from_log), (&asc, &from_asc), (&blf, &from_blf)] {
        let out =
            fieldhub(&hub, &["replay", "--fast", "--map", "can0=can1", "--map", "fd0=fd1", file.to_str().unwrap()]);
        assert!(out.status.success(), "replay {}: {}", file.display(), String::from_utf8_lossy(&out.stderr));
        let report = String::from_utf8(out.stdout).unwrap();
        assert!(report.contains(&format!("can0 -> can1: {CLASSIC} frames")), "{report}");
        assert!(report.contains(&format!("fd0 -> fd1: {FD} frames")), "{report}");
        let replayed = receive_per_channel(&watcher, (CLASSIC + FD) as usize);
        let recorded = per_channel(recorded);
        assert_eq!(replayed["can1"], recorded["can0"], "{}: can1 differs from the recording", file.display());
        assert_eq!(replayed["fd1"], recorded["fd0"], "{}: fd1 differs from the recording", file.display());
        assert_nothing_pending(&watcher);
    }
}

/// A recording with irregular gaps (0 to 40 ms), written by the library.
fn paced_recording(path: &Path, format: Format) -> Vec<Record> {
    let gaps_ms = [0u64, 12, 0, 25, 3, 40, 7, 0, 18, 30, 5, 22, 0, 9, 35, 14];
    let mut t = 1_700_000_000_000_000_000u64;
    let mut records = Vec::new();
    for (i, gap) in gaps_ms.iter().enumerate() {
        t += gap * 1_000_000;
        let frame = Frame::can(0x200 + i as u32, false, &[i as u8]).unwrap();
        records.push(Record { timestamp_ns: t, channel: "can0".into(), frame, direction: Some(Direction::Rx) });
    }
    let file = std::fs::File::create(path).unwrap();
    let mut recorder =
        Recorder::new(file, format, &RecorderOptions { channels: vec!["can0".into()], ..Default::default() });
    for r in &records {
        recorder.record(r.timestamp_ns, &r.channel, &r.frame, Direction::Rx).unwrap();
    }
    recorder.finish().unwrap();
    records
}

#[test]
fn replay_with_recorded_timing_keeps_the_recorded_span() {
    // Scheduling can only make a frame late, never early; the span may grow
    // on a loaded machine but must not shrink by more than clock granularity.
    const TOLERANCE_NS: u64 = 2_000_000;
    let hub = FIELDHUB.start();
    let scratch = Scratch::new("timing");
    let watcher = hub.client("watcher");
    watcher.open_port_with("can1", &lossless()).unwrap();
    for (name, format) in [("paced.log", Format::Candump), ("paced.asc", Format::Asc)] {
        let path = scratch.path(name);
        let recorded = paced_recording(&path, format);
        let out = fieldhub(&hub, &["replay", "--map", "can0=can1", path.to_str().unwrap()]);
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let got = recv_n(&watcher, recorded.len());
        let frames: Vec<Frame> = got.iter().map(|r| r.frame.clone()).collect();
        assert_eq!(frames, recorded.iter().map(|r| r.frame.clone()).collect::<Vec<_>>(), "{name}: order");
        let stamps: Vec<u64> = got.iter().map(|r| r.meta.timestamp_ns).collect();
        assert!(stamps.windows(2).all(|w| w[0] <= w[1]), "{name}: hub timestamps go backwards");
        let recorded_span = recorded.last().unwrap().timestamp_ns - recorded[0].timestamp_ns;
        let replayed_span = stamps.last().unwrap() - stamps[0];
        assert!(
            replayed_span + TOLERANCE_NS >= recorded_span,
            "{name}: replay took {replayed_span} ns for a recording spanning {recorded_span} ns"
        );
        assert_nothing_pending(&watcher);
    }
}

#[test]
fn replay_loops_the_file_the_given_number_of_times() {
    let hub = FIELDHUB.start();
    let scratch = Scratch::new("loop");
    let path = scratch.path("loop.log");
    let recorded = paced_recording(&path, Format::Candump);
    let watcher = hub.client("watcher");
    watcher.open_port_with("can0", &lossless()).unwrap();
    let out = fieldhub(&hub, &["replay", "--fast", "--loop", "3", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("can0: {} frames", 3 * recorded.len())));
    let got: Vec<Frame> = recv_n(&watcher, 3 * recorded.len()).iter().map(|r| r.frame.clone()).collect();
    let once: Vec<Frame> = recorded.iter().map(|r| r.frame.clone()).collect();
    assert_eq!(got, [once.clone(), once.clone(), once].concat());
    assert_nothing_pending(&watcher);
}

#[test]
fn record_stops_on_sigint_with_a_complete_file() {
    let hub = FIELDHUB.start();
    let scratch = Scratch::new("sigint");
    let path = scratch.path("stopped.asc");
    let recorder = start_recording(&hub, &["-o", path.to_str().unwrap(), "can0"]);
    let sender = hub.client("sender");
    let port = sender.open_port("can0").unwrap();
    let sent: Vec<Frame> = (0..500).map(|i| numbered(0x123, 1, i)).collect();
    for frame in &sent {
        sender.send(&port, frame).unwrap();
    }
    sender.flush().unwrap();
    // An idle recorder flushes its file: wait until every frame is in it.
    wait_until(deadline(), "the recording holds every frame", || read_log(&path).len() >= sent.len());
    // SAFETY: kill(2) takes plain integers; signalling our own child cannot
    // affect this process's memory.
    unsafe { libc::kill(recorder.id() as libc::pid_t, libc::SIGINT) };
    assert!(wait_exit(recorder).success());
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.ends_with("End TriggerBlock\n"), "the ASC trailer is missing");
    let frames: Vec<Frame> = read_log(&path).iter().map(|r| r.frame.clone()).collect();
    assert_eq!(frames, sent);
}

#[test]
fn bad_files_channels_and_options_are_reported_clearly() {
    let hub = FIELDHUB.start();
    let scratch = Scratch::new("errors");
    let cases: [(&str, &str, &[&str], &str); 6] = [
        ("malformed.log", "(1.000000) can0 123#00\n(1.000001) can0 123#0\n", &[], "line 2:"),
        ("empty.log", "", &[], "holds no frames to replay"),
        ("notes.asc", "hello\nthis is not a trace\n", &[], "holds no frames to replay"),
        ("unknown.log", "(1.000000) nope 123#00\n", &[], "cannot replay 'nope' onto hub channel 'nope'"),
        ("mapped.log", "(1.000000) can0 123#00\n", &["--map", "can7=can1"], "has no channel 'can7'"),
        ("fd-on-classic.log", "(1.000000) can0 123##1DEADBEEF\n", &[], "classic CAN"),
    ];
    for (name, text, options, expected) in cases {
        let path = scratch.path(name);
        std::fs::write(&path, text).unwrap();
        let mut args = vec!["replay", "--fast"];
        args.extend_from_slice(options);
        args.push(path.to_str().unwrap());
        let out = fieldhub(&hub, &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name} was accepted");
        assert!(stderr.contains(expected), "{name}: {stderr}");
    }
    let out = fieldhub(&hub, &["record", "-o", scratch.path("trace.txt").to_str().unwrap(), "can0"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("pass -f candump|asc"));
    let out = fieldhub(&hub, &["record", "-n", "1", "-o", scratch.path("x.log").to_str().unwrap(), "nope"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot record 'nope'"));
}

#[test]
fn record_writes_candump_lines_to_stdout_by_default() {
    let hub = FIELDHUB.start();
    let mut recorder = FIELDHUB
        .command()
        .args(["record", "--hub", &hub.url, "--direction", "-n", "3", "can1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start fieldhub record");
    let mut first = String::new();
    BufReader::new(recorder.stderr.as_mut().unwrap()).read_line(&mut first).unwrap();
    assert_eq!(first, "recording can1 to stdout (candump)\n");
    for frame in ["123#DEADBEEF", "1ABCDEF0#R", "7FF#"] {
        assert!(fieldhub(&hub, &["send", "can1", frame]).status.success());
    }
    let out = recorder.wait_with_output().unwrap();
    assert!(out.status.success());
    let lines: Vec<String> = String::from_utf8(out.stdout).unwrap().lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), 3);
    for (line, frame) in lines.iter().zip(["123#DEADBEEF", "1ABCDEF0#R", "7FF#"]) {
        assert!(line.starts_with('(') && line.ends_with(&format!(" can1 {frame} R")), "{line}");
    }
}

/// canplayer's interface assignment `<write-if>=<log-if>`: `can1=can0`
/// sends the log's can0 frames on can1, and with an assignment given only
/// the assigned channels are played; `-I FILE` names the file as canplayer's.
#[test]
fn replay_takes_canplayers_out_equals_in_assignments_and_plays_only_those() {
    let hub = FIELDHUB.start();
    let scratch = Scratch::new("assign");
    let path = scratch.path("two.log");
    std::fs::write(&path, "(1.000000) can0 123#01\n(1.000100) can1 456#02\n(1.000200) can0 124#03\n").unwrap();
    let watcher = hub.client("watcher");
    watcher.open_port_with("can0", &lossless()).unwrap();
    watcher.open_port_with("can1", &lossless()).unwrap();
    let out = fieldhub(&hub, &["replay", "--fast", path.to_str().unwrap(), "can1=can0"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("can0 -> can1: 2 frames"));
    let got = receive_per_channel(&watcher, 2);
    assert_eq!(got.keys().collect::<Vec<_>>(), ["can1"], "{got:?}");
    assert_eq!(got["can1"].iter().map(Frame::id).collect::<Vec<_>>(), [0x123, 0x124]);
    assert_nothing_pending(&watcher);
    // canplayer's own order: -I FILE, then the assignments.
    let out = fieldhub(&hub, &["replay", "--fast", "-I", path.to_str().unwrap(), "can1=can0"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let got = receive_per_channel(&watcher, 2);
    assert_eq!(got["can1"].iter().map(Frame::id).collect::<Vec<_>>(), [0x123, 0x124]);
    assert_nothing_pending(&watcher);
    let out = fieldhub(&hub, &["replay", "--fast", path.to_str().unwrap(), "can1"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("can1: expected --map OLD=NEW (file channel = hub channel) or canplayer's OUT=IN"),
        "{stderr}"
    );
}

/// canplayer's -s (skip gaps longer than S seconds), -l i (loop for ever),
/// -n (stop after N frames), -v (print what is sent) and -t -g (no timing,
/// a fixed gap): an hour's gap is skipped, and the endless loop ends at -n.
#[test]
fn replay_skips_long_gaps_loops_for_ever_until_n_and_prints_with_v() {
    let hub = FIELDHUB.start();
    let scratch = Scratch::new("canplayer");
    let path = scratch.path("hour.log");
    std::fs::write(&path, "(1.000000) can0 123#01\n(3601.000000) can0 124#02\n").unwrap();
    let watcher = hub.client("watcher");
    watcher.open_port_with("can0", &lossless()).unwrap();
    let out = fieldhub(&hub, &["replay", "-s", "1", "-l", "i", "-n", "5", "-v", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let printed: Vec<&str> = stdout.lines().filter(|l| l.starts_with("can0 (can0) ")).collect();
    assert_eq!(printed[..2], ["can0 (can0) 123   [1]  01", "can0 (can0) 124   [1]  02"], "{stdout}");
    assert_eq!(printed.len(), 5, "{stdout}");
    let ids: Vec<u32> = recv_n(&watcher, 5).iter().map(|r| r.frame.id()).collect();
    assert_eq!(ids, [0x123, 0x124, 0x123, 0x124, 0x123]);
    let out = fieldhub(&hub, &["replay", "-t", "-g", "1", "-n", "3", "-l", "2", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(recv_n(&watcher, 3).len(), 3);
    assert_nothing_pending(&watcher);
}
