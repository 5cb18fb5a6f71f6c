//! The ivshmem transport through a real hub process, on the host: the
//! client maps the region's backing file as a QEMU guest maps the device's
//! BAR, and both sides poll. Order and loss against a TCP client, a client
//! killed mid-traffic, regions that are not what they claim, an idle hub.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::FIELDHUB;
use fieldhub_client::{Client, ClientError, ClientOptions, Port, Received};
use fieldhub_testkit::*;

/// A region file private to one test, removed afterwards.
struct RegionFile(PathBuf);

impl RegionFile {
    fn new() -> Self {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let dir = if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm".into() } else { std::env::temp_dir() };
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!("fieldhub-test-{}-{n}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        Self(path)
    }

    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }

    fn url(&self) -> String {
        format!("ivshmem://{}", self.path())
    }
}

impl Drop for RegionFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// An error with its causes, as the CLI prints it.
fn chain(err: &ClientError) -> String {
    let mut text = err.to_string();
    let mut cause = std::error::Error::source(err);
    while let Some(e) = cause {
        text += &format!(": {e}");
        cause = e.source();
    }
    text
}

fn ivshmem_client(region: &RegionFile, name: &str) -> Client {
    let options = ClientOptions { name: name.into(), ..Default::default() };
    Client::connect_with(&region.url(), &options).expect("connect over ivshmem")
}

/// Receive until `want` frames from `sender` arrived; check their counters
/// come in order without a gap. Returns the receive times.
fn receive_numbered(client: &Client, sender: u8, want: u32) -> Vec<Instant> {
    let mut next = 0u32;
    let mut times = Vec::with_capacity(want as usize);
    while next < want {
        let received: Received = client.recv(Some(PATIENCE)).unwrap().unwrap_or_else(|| panic!("stalled at {next}"));
        let (from, counter) = number_of(&received.frame);
        if from != sender {
            continue;
        }
        assert_eq!(counter, next, "frames from sender {sender} out of order or lost");
        next += 1;
        times.push(Instant::now());
    }
    times
}

/// CPU time (utime + stime, in clock ticks of 10 ms) a process has used.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap().split_whitespace().collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// `a` sends numbered frames one at a time; `b` answers each; returns the
/// median and 99th percentile round trip in µs.
fn round_trips(a: &Client, a_tx: &Port, b: &Client, b_tx: &Port) -> (f64, f64) {
    const ROUNDS: u32 = 2000;
    let rtts = std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..ROUNDS {
                let got = b.recv(Some(PATIENCE)).unwrap().expect("ping");
                assert_eq!(number_of(&got.frame), (1, i));
                b.send(b_tx, &numbered(0x200, 2, i)).unwrap();
            }
        });
        (0..ROUNDS)
            .map(|i| {
                let sent = Instant::now();
                a.send(a_tx, &numbered(0x100, 1, i)).unwrap();
                let got = a.recv(Some(PATIENCE)).unwrap().expect("pong");
                assert_eq!(number_of(&got.frame), (2, i));
                sent.elapsed()
            })
            .collect()
    });
    median_and_p99(rtts)
}

fn median_and_p99(mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e6;
    (at(0.5), at(0.99))
}

#[test]
fn an_ivshmem_client_and_a_tcp_client_exchange_100000_frames_each_way_in_order_and_round_trips_are_printed() {
    const FRAMES: u32 = 100_000;
    let region = RegionFile::new();
    let hub = FIELDHUB.start_shm_with(None, &["--ivshmem", region.path()]);
    let guest = ivshmem_client(&region, "guest");
    let host = hub.client("host");
    let guest_tx = guest.open_port_with("can0", &lossless()).unwrap();
    let host_tx = host.open_port_with("can0", &lossless()).unwrap();

    let started = Instant::now();
    let (guest_got, host_got) = std::thread::scope(|s| {
        s.spawn(|| (0..FRAMES).for_each(|i| guest.send(&guest_tx, &numbered(0x100, 1, i)).unwrap()));
        s.spawn(|| (0..FRAMES).for_each(|i| host.send(&host_tx, &numbered(0x200, 2, i)).unwrap()));
        let guest_rx = s.spawn(|| receive_numbered(&guest, 2, FRAMES));
        let host_rx = s.spawn(|| receive_numbered(&host, 1, FRAMES));
        (guest_rx.join().unwrap(), host_rx.join().unwrap())
    });
    let elapsed = started.elapsed().as_secs_f64();
    let rate = |times: &[Instant]| FRAMES as f64 / times.last().unwrap().duration_since(started).as_secs_f64();
    println!(
        "ivshmem ↔ tcp, {FRAMES} frames each way in {elapsed:.2} s: to the ivshmem client {:.0} frames/s, from it {:.0} frames/s",
        rate(&guest_got),
        rate(&host_got)
    );

    // Round trips: the ivshmem client pings, a shared-memory client on the
    // host answers; then two host shared-memory clients, for comparison.
    drop(host);
    let host = hub.shm_client("host");
    let host_tx = host.open_port_with("can0", &lossless()).unwrap();
    let (median, p99) = round_trips(&guest, &guest_tx, &host, &host_tx);
    println!(
        "round trip ivshmem client → hub → shm client → hub → ivshmem client: median {median:.0} µs, p99 {p99:.0} µs"
    );
    drop(guest);
    let other = hub.shm_client("other");
    let other_tx = other.open_port_with("can0", &lossless()).unwrap();
    let (median, p99) = round_trips(&other, &other_tx, &host, &host_tx);
    println!("round trip shm client → hub → shm client → hub → shm client (host only): median {median:.0} µs, p99 {p99:.0} µs");
    assert!(hub.log().iter().all(|l| !l.contains("panicked")), "{:#?}", hub.log());
}

/// The guest's threads take from its ring themselves, as over `shm://`:
/// two receiving at once and one asking for flushes meanwhile get every
/// frame once, each thread in order.
#[test]
fn threads_receiving_at_once_over_ivshmem_get_every_frame_exactly_once() {
    const FRAMES: u32 = 20_000;
    let region = RegionFile::new();
    let hub = FIELDHUB.start_shm_with(None, &["--ivshmem", region.path()]);
    let guest = ivshmem_client(&region, "guest");
    let host = hub.client("host");
    let host_tx = host.open_port("can0").unwrap();
    guest.open_port_with("can0", &lossless()).unwrap();
    receive_on_threads_at_once(&host, &host_tx, &guest, 2, FRAMES);
}

#[test]
fn an_ivshmem_client_killed_mid_traffic_leaves_the_hub_and_others_running_and_its_ports_are_released() {
    let region = RegionFile::new();
    let mut hub = FIELDHUB.start_with(None, &["--ivshmem", region.path()]);
    let listener = hub.client("listener");
    listener.open_port("can0").unwrap();
    let sender = hub.client("bystander");
    let tx = sender.open_port("can0").unwrap();

    let mut generator = FIELDHUB
        .command()
        .args(["gen", "--hub", &region.url(), "-g", "0", "can0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start fieldhub gen over ivshmem");
    hub.wait_for_log("client connected over ivshmem");
    // Frames of the killed client arrive at the listener: it was mid-traffic.
    let deadline = Instant::now() + PATIENCE;
    let mut from_generator = 0;
    while from_generator < 1000 {
        assert!(Instant::now() < deadline, "the ivshmem generator's frames never arrived");
        if let Some(r) = listener.recv(Some(PATIENCE)).unwrap() {
            from_generator += usize::from(r.meta.sender != tx.port_id);
        }
    }
    assert_eq!(sender.stats().unwrap().ports.len(), 3);
    generator.kill().unwrap();
    let killed = Instant::now();
    generator.wait().unwrap();

    // The others carry on at once.
    sender.send(&tx, &numbered(0x7FF, 3, 0)).unwrap();
    sender.flush().unwrap();
    // Its port is released once its beat has been still for 3 s.
    wait_until(fieldhub_testkit::deadline(), "the killed client's port is released", || {
        sender.stats().unwrap().ports.len() == 2
    });
    let released = killed.elapsed();
    println!("killed ivshmem client's port released after {:.1} s", released.as_secs_f64());
    assert!(released >= Duration::from_millis(2500), "released after {released:?}, before the beat timeout");
    hub.wait_for_log("no sign of life for 3 s");
    assert!(hub.is_running());

    // The region serves the next client.
    let next = ivshmem_client(&region, "next");
    next.open_port_with("can0", &lossless()).unwrap();
    sender.send(&tx, &numbered(0x7FF, 3, 1)).unwrap();
    let got = next.recv(Some(PATIENCE)).unwrap().expect("frame for the next ivshmem client");
    assert_eq!(number_of(&got.frame), (3, 1));
}

#[test]
fn a_region_that_is_not_a_fieldhub_region_or_not_served_gives_a_clear_error() {
    let region = RegionFile::new();
    std::fs::write(&region.0, vec![0xA5u8; 1 << 20]).unwrap();
    let text = chain(&Client::connect(&region.url()).err().expect("garbage accepted"));
    assert!(text.contains("is not a fieldhub ivshmem region") && text.contains("bad magic"), "{text}");

    std::fs::write(&region.0, b"FHIV").unwrap();
    let text = chain(&Client::connect(&region.url()).err().expect("truncated region accepted"));
    assert!(text.contains("shorter than its header"), "{text}");

    // A real region whose hub stopped: not served, said at once.
    let _ = std::fs::remove_file(&region.0);
    let hub = FIELDHUB.start_with(None, &["--ivshmem", region.path()]);
    let client = ivshmem_client(&region, "early");
    let port = client.open_port("can0").unwrap();
    assert_eq!(hub.terminate().code(), Some(0));
    let err = Client::connect(&region.url()).err().expect("connected to a stopped hub");
    assert!(chain(&err).contains("no hub serves the region"), "{}", chain(&err));
    // A client of the stopped hub is told, not left hanging.
    let deadline = Instant::now() + PATIENCE;
    loop {
        match client.send(&port, &numbered(1, 1, 1)) {
            Err(ClientError::Closed { reason }) => {
                assert!(reason.contains("goodbye") || reason.contains("stopped"), "{reason}");
                break;
            }
            Err(other) => panic!("unexpected error {other}"),
            Ok(()) => assert!(Instant::now() < deadline, "a client of a stopped hub can still send"),
        }
        std::thread::sleep(Duration::from_millis(10));
    }

    let bad = FIELDHUB
        .command()
        .args(["hub", "--no-shm", "--listen", "127.0.0.1:0", "--ivshmem", "relative/vm0"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success() && stderr.contains("hub.ivshmem") && stderr.contains("absolute"), "{stderr}");
}

#[test]
fn an_idle_hub_with_an_ivshmem_client_attached_stays_cheap() {
    let region = RegionFile::new();
    let hub = FIELDHUB.start_with(None, &["--ivshmem", region.path()]);
    let client = ivshmem_client(&region, "idle");
    client.open_port("can0").unwrap();
    client.flush().unwrap();
    // Part of what is measured, not a wait for an event: the hub's polling
    // backs off once nothing has moved for a moment, and the window below
    // measures the idle hub, not that backing off.
    std::thread::sleep(Duration::from_millis(500));
    let window = Duration::from_secs(5);
    let before = cpu_ticks(hub.pid());
    std::thread::sleep(window);
    let used = cpu_ticks(hub.pid()) - before;
    let percent = used as f64 * 10.0 / window.as_millis() as f64 * 100.0;
    println!("idle hub with an ivshmem client attached: {percent:.1} % of a core");
    // Generous for a loaded CI machine; the figure is printed above.
    assert!(percent < 10.0, "an idle hub used {percent:.1} % of a core");
}
