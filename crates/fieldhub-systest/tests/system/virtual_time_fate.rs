//! A frame's fate on a hub in virtual time, through real processes: an
//! observer — `fieldhub dump`, `send`, `gen` — never holds bus time and
//! loses nothing it sent; a stalled participant is the one named, and a
//! dropped one hears why; `ctl time`'s real-time factor is the run's pace.

use std::fs::File;
use std::process::{Child, Output, Stdio};
use std::thread;
use std::time::Instant;

use crate::FIELDHUB;
use fieldhub_client::{Client, ClientOptions, Frame, Port, PortConfig};
use fieldhub_testkit::{deadline, drain_delivered, lossless, ok, wait_for, wait_until, HubProcess, PATIENCE};
use serde_json::Value;

const MS: u64 = 1_000_000;

const IDEAL: &str = "[hub]\ntime = \"virtual\"\n[[channel]]\nname = \"can0\"\n";

const TIMED: &str = "[hub]\ntime = \"virtual\"\n[[channel]]\nname = \"can0\"\ntiming = \"timed\"\nbitrate = 500000\n";

fn participant(hub: &HubProcess, name: &str) -> Client {
    let options = ClientOptions { name: name.into(), synchronized: true, ..Default::default() };
    Client::connect_with(&hub.url, &options).expect("connect as a synchronised participant")
}

/// `fieldhub COMMAND --hub URL ARGS…`, run to its end.
fn fieldhub(hub: &HubProcess, args: &[&str]) -> Output {
    FIELDHUB.command().arg(args[0]).args(["--hub", &hub.url]).args(&args[1..]).output().unwrap()
}

/// A scratch directory for one test's files.
fn scratch(what: &str) -> std::path::PathBuf {
    let dir =
        std::env::temp_dir().join(format!("fieldhub-{what}-{}-{}", std::process::id(), fieldhub_testkit::unique()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A CLI tool running as a child process; killed when the test ends.
struct Tool(Child);

impl Tool {
    /// `fieldhub COMMAND --hub URL ARGS…` with its standard output in `out`.
    fn start(hub: &HubProcess, args: &[&str], out: &std::path::Path) -> Self {
        let child = FIELDHUB
            .command()
            .arg(args[0])
            .args(["--hub", &hub.url])
            .args(&args[1..])
            .stdout(File::create(out).unwrap())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Self(child)
    }

    /// Send it `signal` (SIGSTOP as Ctrl-Z does, SIGCONT as `fg`).
    fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on the pid of a child this test started and has
        // not reaped yet (it is reaped only by `Drop` or `finish`), so the
        // pid cannot belong to another process.
        let sent = unsafe { libc::kill(self.0.id() as libc::pid_t, signal) };
        assert_eq!(sent, 0, "kill: {}", std::io::Error::last_os_error());
    }

    /// Wait for it to exit on its own: its status and standard error.
    fn finish(mut self) -> (std::process::ExitStatus, String) {
        let status = self.0.wait().unwrap();
        let mut stderr = String::new();
        std::io::Read::read_to_string(self.0.stderr.as_mut().unwrap(), &mut stderr).unwrap();
        (status, stderr)
    }
}

impl Drop for Tool {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The hub's view of the port named `name` (`GET /api/v1/ports`).
fn port_named(hub: &HubProcess, name: &str) -> Option<Value> {
    ok(hub, "GET", "/api/v1/ports", None).as_array().unwrap().iter().find(|p| p["name"] == name).cloned()
}

fn counter(port: &Value, key: &str) -> u64 {
    port[key].as_u64().unwrap_or_else(|| panic!("no {key} in {port}"))
}

fn time_status(hub: &HubProcess) -> Value {
    let out = fieldhub(hub, &["ctl", "time"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn lines(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(str::to_owned).collect()
}

/// One 1 ms step of `ecu`: 200 numbered frames (within its transmit
/// credit), then the step's end. `sent` counts the frames. A participant
/// whose frames are held back would wait for ever; it fails instead.
fn flood_step(ecu: &Client, port: &Port, sent: &mut u32) {
    for _ in 0..200 {
        let frame = fieldhub_testkit::numbered(0x100, 1, *sent);
        ecu.send_timeout(port, &frame, Some(PATIENCE)).expect("the hub takes the participant's frame");
        *sent += 1;
    }
    let until = ecu.now().unwrap() + MS;
    ecu.begin_step(until).unwrap();
    let now = ecu.await_time(until, Some(PATIENCE)).unwrap();
    assert_eq!(now, Some(until), "bus time moves on with the participant");
}

#[test]
fn a_paused_lossless_dump_never_holds_virtual_time_and_its_drops_are_counted() {
    let hub = FIELDHUB.start_with(Some(IDEAL), &[]);
    let dir = scratch("vt-paused-dump");
    let printed = dir.join("dump.log");
    let dump = Tool::start(&hub, &["dump", "--lossless", "--port", "dump", "-L", "can0"], &printed);
    wait_until(deadline(), "the dump's port opens", || port_named(&hub, "dump").is_some());
    dump.signal(libc::SIGSTOP);
    // An observer in this process that does not read either: it shows what
    // the client is told.
    let observer = hub.client("observer");
    let watched = observer.open_port_with("can0", &PortConfig { name: Some("observer".into()), ..lossless() }).unwrap();
    let ecu = participant(&hub, "ecu");
    let port = ecu.open_port_with("can0", &PortConfig { name: Some("ecu".into()), ..Default::default() }).unwrap();

    // The participant floods can0 step after step until both readers have
    // missed frames (the observer here after its client's receive queue is
    // full too), and goes on: nothing holds its frames back.
    let mut sent = 0u32;
    let missing = |name: &str| port_named(&hub, name).is_some_and(|p| counter(&p, "rx_dropped") > 0);
    wait_until(deadline(), "both paused readers' ports drop frames", || {
        (0..10).for_each(|_| flood_step(&ecu, &port, &mut sent));
        missing("dump") && missing("observer")
    });
    for _ in 0..20 {
        flood_step(&ecu, &port, &mut sent);
    }
    assert_eq!(counter(&port_named(&hub, "ecu").unwrap(), "tx_frames"), u64::from(sent), "all of it is on the bus");
    let channel = &ok(&hub, "GET", "/api/v1/channels", None)[0];
    assert!(channel["held_by"].is_null(), "no observer holds can0: {channel}");
    let log = hub.log();
    assert!(!log.iter().any(|l| l.contains("participant stalled")), "no participant was reported: {log:#?}");
    let told = log.iter().filter(|l| l.contains("cannot hold virtual time")).count();
    assert_eq!(told, 1, "the hub says once that lossless observers are lossy here: {log:#?}");

    // Resumed, the dump prints every frame it was delivered; the others
    // were counted as its drops.
    dump.signal(libc::SIGCONT);
    let dumped = port_named(&hub, "dump").unwrap();
    let (delivered, dropped) = (counter(&dumped, "rx_frames"), counter(&dumped, "rx_dropped"));
    assert_eq!(delivered + dropped, u64::from(sent), "{dumped}");
    wait_until(deadline(), format_args!("the dump prints its {delivered} frames"), || {
        lines(&printed).len() as u64 == delivered
    });
    // The observer that did not read is told how many it missed (RX_OVERFLOW).
    let received = drain_delivered(&observer).len() as u64;
    let missed = observer.rx_dropped(&watched);
    assert!(missed > 0, "the observer missed frames");
    assert_eq!(received + missed, u64::from(sent));
    assert_eq!(missed, counter(&port_named(&hub, "observer").unwrap(), "rx_dropped"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The frames `dump -L` printed for identifier `id`: their first data byte
/// (`gen -D i`'s counter, little-endian).
fn counters_of(printed: &[String], id: &str) -> Vec<u8> {
    printed
        .iter()
        .filter_map(|l| l.split(' ').nth(2)?.strip_prefix(id)?.strip_prefix('#').map(str::to_owned))
        .map(|data| u8::from_str_radix(&data[..2], 16).unwrap())
        .collect()
}

#[test]
fn send_and_gen_on_a_virtual_time_hub_lose_no_frame_when_they_exit_before_it_is_on_the_bus() {
    let hub = FIELDHUB.start_with(Some(TIMED), &[]);
    let dir = scratch("vt-observer-sends");
    let printed = dir.join("dump.log");
    let _dump = Tool::start(&hub, &["dump", "--port", "dump", "-L", "can0"], &printed);
    wait_until(deadline(), "the dump's port opens", || port_named(&hub, "dump").is_some());

    // Nobody moves bus time: both tools have their frames placed at bus
    // time 0, confirmed, and exit.
    let sent = fieldhub(&hub, &["send", "can0", "123#01"]);
    assert!(sent.status.success(), "{}", String::from_utf8_lossy(&sent.stderr));
    let generated = fieldhub(&hub, &["gen", "-n", "30", "-g", "0", "-I", "321", "-L", "4", "-D", "i", "can0"]);
    assert!(generated.status.success(), "{}", String::from_utf8_lossy(&generated.stderr));
    assert_eq!(ok(&hub, "GET", "/api/v1/channels", None)[0]["frames"], 0, "not on the bus before time moves");

    let until = fieldhub(&hub, &["ctl", "time", "run-until", "1s"]);
    assert!(until.status.success(), "{}", String::from_utf8_lossy(&until.stderr));
    let first =
        wait_for(deadline(), "the dump prints the 31 frames", || Some(lines(&printed)).filter(|l| l.len() >= 31));
    assert!(first[0].ends_with(" can0 123#01"), "the lowest identifier wins at bus time 0: {first:?}");
    assert_eq!(counters_of(&first, "321"), (0..30).collect::<Vec<_>>(), "gen's frames, in order: {first:?}");

    // Now a participant moves bus time 1 ms at a time while gen sends: a
    // window carries only some of gen's frames, gen exits with the rest
    // still waiting, and they follow.
    let resumed = fieldhub(&hub, &["ctl", "time", "resume"]);
    assert!(resumed.status.success(), "{}", String::from_utf8_lossy(&resumed.stderr));
    let ecu = participant(&hub, "ecu");
    let stepping = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let stepper = thread::spawn({
        let stepping = stepping.clone();
        move || {
            while stepping.load(std::sync::atomic::Ordering::Relaxed) {
                ecu.step(ecu.now().unwrap() + MS).unwrap();
            }
        }
    });
    let generated = fieldhub(&hub, &["gen", "-n", "30", "-g", "0", "-I", "322", "-L", "4", "-D", "i", "can0"]);
    assert!(generated.status.success(), "{}", String::from_utf8_lossy(&generated.stderr));
    let all = wait_for(deadline(), "the dump prints gen's second 30 frames", || {
        Some(lines(&printed)).filter(|l| counters_of(l, "322").len() >= 30)
    });
    stepping.store(false, std::sync::atomic::Ordering::Relaxed);
    stepper.join().unwrap();
    assert_eq!(counters_of(&all, "322"), (0..30).collect::<Vec<_>>(), "{all:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_paused_participant_is_the_one_reported_and_once_dropped_hears_why_when_it_resumes() {
    let config = r#"
        [hub]
        time = "virtual"
        time_participants = ["ecu", "replay"]
        step_timeout_ms = 10000
        on_stall = "drop"
        [[channel]]
        name = "can0"
    "#;
    let hub = FIELDHUB.start_with(Some(config), &[]);
    let dir = scratch("vt-dropped");
    let drive = dir.join("drive.log");
    // A frame every millisecond for 20 s of bus time: the replay steps 1 ms
    // at a time, far from done when it is stopped.
    let frames: String =
        (0..20_000u32).map(|n| format!("({}.{:06}) can0 123#{n:08X}\n", n / 1000, n % 1000 * 1000)).collect();
    std::fs::write(&drive, frames).unwrap();
    let replay = Tool::start(&hub, &["replay", "--synchronized", drive.to_str().unwrap()], &dir.join("replay.out"));
    let ecu = participant(&hub, "ecu");
    // Done up to 100 s at once: from here on only the replay computes.
    let boundary = 100_000 * MS;
    ecu.begin_step(boundary).unwrap();
    wait_until(deadline(), "bus time moves with the replay", || time_status(&hub)["now_ns"].as_u64() > Some(0));
    replay.signal(libc::SIGSTOP);
    hub.wait_for_log("participant stalled");
    let stalls: Vec<String> = hub.log().into_iter().filter(|l| l.contains("participant stalled")).collect();
    assert!(stalls.iter().all(|l| l.contains("name=replay")), "only the replay holds bus time: {stalls:#?}");
    // Bus time goes on without it, to the boundary ecu announced.
    assert_eq!(ecu.await_time(boundary, Some(PATIENCE)).unwrap(), Some(boundary));

    replay.signal(libc::SIGCONT);
    let (status, stderr) = replay.finish();
    assert!(!status.success(), "its next step is refused");
    assert!(stderr.contains("dropped for stalling"), "{stderr}");
    assert!(!stderr.contains("not a synchronised participant"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ctl_time_gives_the_pace_of_the_run_however_long_the_hub_idles_after_it() {
    let hub = FIELDHUB.start_with(Some(IDEAL), &[]);
    let began = Instant::now();
    let ecu = participant(&hub, "ecu");
    let port = ecu.open_port("can0").unwrap();
    for k in 0..200u32 {
        ecu.send(&port, &Frame::can(0x100, false, &k.to_le_bytes()).unwrap()).unwrap();
        ecu.step(u64::from(k + 1) * 10 * MS).unwrap();
    }
    let run = began.elapsed();
    drop(ecu);
    // Bus time advanced 2 s within `run` of wall-clock time: at least that pace.
    let pace = 2.0 / run.as_secs_f64();
    // The hub idles as long as the run took (the run's own length, not an
    // assumption about speed): counted, it would halve the figure or worse.
    thread::sleep(run);
    let factor = time_status(&hub)["real_time_factor"].as_f64().unwrap();
    assert!(factor >= pace, "{factor}x for a run that went at {pace}x or faster");
    let stats = String::from_utf8(fieldhub(&hub, &["stats"]).stdout).unwrap();
    assert!(stats.contains(&format!("{factor:.1}x real time")), "{stats}");
}

/// A participant over shared memory does not ring the hub for each frame
/// (the hub holds a step's frames until the step ends) but for its step's
/// end: 10,000 frames in one step, more than its to-hub ring's 4,096
/// slots, so it waits for room — after ringing, as only the hub makes
/// room — are all on the bus in the step's window, in the order sent.
#[test]
fn a_participant_over_shm_has_a_step_of_more_frames_than_its_ring_holds_on_the_bus_in_order() {
    let hub = FIELDHUB.start_shm_with(Some(IDEAL), &[]);
    let options = ClientOptions { name: "ecu".into(), synchronized: true, ..Default::default() };
    let ecu = Client::connect_with(hub.shm_url.as_deref().unwrap(), &options).expect("connect over shm");
    let config = PortConfig { name: Some("ecu".into()), receive_own: true, ..Default::default() };
    let port = ecu.open_port_with("can0", &config).unwrap();
    for n in 0..10_000 {
        ecu.send_timeout(&port, &fieldhub_testkit::numbered(0x100, 1, n), Some(PATIENCE)).unwrap();
    }
    ecu.begin_step(MS).unwrap();
    assert_eq!(ecu.await_time(MS, Some(PATIENCE)).unwrap(), Some(MS), "the step ends");
    let mut numbers = Vec::new();
    while let Some(rx) = ecu.try_recv().unwrap() {
        assert!(rx.meta.timestamp_ns < MS, "in the step's window: {rx:?}");
        numbers.push(fieldhub_testkit::number_of(&rx.frame).1);
    }
    assert_eq!(numbers, (0..10_000).collect::<Vec<_>>(), "every frame, in the order sent");
    let port = port_named(&hub, "ecu").unwrap();
    assert_eq!((counter(&port, "tx_frames"), counter(&port, "tx_dropped")), (10_000, 0), "{port}");
}
