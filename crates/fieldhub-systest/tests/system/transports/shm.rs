//! The shared-memory transport through a real hub process: one order with
//! TCP clients, overflow per port, clients killed mid-write, a dead hub, and
//! an idle hub that sleeps.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::FIELDHUB;
use fieldhub_client::{Client, ClientError, ClientOptions, ErrorCode, PortConfig, Received};
use fieldhub_proto::limits::{MAX_MESSAGE_LEN, PROTOCOL_VERSION};
use fieldhub_proto::wire::{self, Hello, Message};
use fieldhub_shm::{socket, BellSegment, ClientSegment, Consumer, Producer};
use fieldhub_testkit::*;
use rand::Rng;

/// Check one receiver's view: ascending sequence numbers and time, and each
/// sender's counters in the order sent, without a gap.
fn check_stream(name: &str, frames: &[Received]) {
    for pair in frames.windows(2) {
        assert!(pair[1].meta.seq > pair[0].meta.seq, "{name}: sequence went backwards");
        assert!(pair[1].meta.timestamp_ns >= pair[0].meta.timestamp_ns, "{name}: time went backwards");
    }
    let mut next_counter: HashMap<u8, u32> = HashMap::new();
    for r in frames {
        let (sender, counter) = number_of(&r.frame);
        let expected = next_counter.entry(sender).or_insert(0);
        assert_eq!(counter, *expected, "{name}: sender {sender} out of order");
        *expected += 1;
    }
}

/// CPU time (utime + stime, in clock ticks) a process has used.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap().split_whitespace().collect();
    // utime and stime: fields 14 and 15 of /proc/PID/stat, 12 and 13 after the ')'.
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// What a process's open descriptors name (sorted), and how many client
/// segments it maps.
fn resources(pid: u32) -> (Vec<String>, usize) {
    let mut fds: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .map(|target| target.to_string_lossy().into_owned())
        .collect();
    fds.sort();
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    (fds, maps.lines().filter(|l| l.contains("memfd:fieldhub-client")).count())
}

/// Descriptors of client segments a process holds open. The hub holds one
/// only while a handshake is in flight: it closes it just after `WELCOME`
/// went out, so a client may already be connected while the hub's
/// descriptor still exists for a moment.
fn segment_descriptors(pid: u32) -> usize {
    resources(pid).0.iter().filter(|target| target.contains("memfd:fieldhub-client")).count()
}

/// Wait until `probe` returns `want`, failing with the last value on a stall.
fn wait_until<T: PartialEq + std::fmt::Debug>(what: &str, want: T, mut probe: impl FnMut() -> T) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let got = probe();
        if got == want {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: still {got:?}, expected {want:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn shm_and_tcp_clients_see_one_identical_order_without_loss() {
    const PER_SENDER: u32 = 34_000;
    let hub = FIELDHUB.start_shm();
    let senders = [hub.shm_client("shm-a"), hub.shm_client("shm-b"), hub.client("tcp-c")];
    let ports: Vec<_> = senders.iter().map(|c| c.open_port("can0").unwrap()).collect();
    let receivers = [hub.shm_client("shm-listener"), hub.client("tcp-listener")];
    for r in &receivers {
        r.open_port_with("can0", &lossless()).unwrap();
    }
    let total = 3 * PER_SENDER as usize;
    let seen: Vec<Vec<Received>> = std::thread::scope(|s| {
        let receiving: Vec<_> = receivers.iter().map(|r| s.spawn(move || recv_n(r, total))).collect();
        let sending: Vec<_> = senders
            .iter()
            .zip(&ports)
            .enumerate()
            .map(|(i, (c, port))| {
                s.spawn(move || (0..PER_SENDER).for_each(|n| c.send(port, &numbered(0x100, i as u8, n)).unwrap()))
            })
            .collect();
        sending.into_iter().for_each(|t| t.join().unwrap());
        receiving.into_iter().map(|t| t.join().unwrap()).collect()
    });
    for (name, frames) in ["shm-listener", "tcp-listener"].iter().zip(&seen) {
        let seqs: Vec<u64> = frames.iter().map(|r| r.meta.seq).collect();
        assert_eq!(seqs, (1..=total as u64).collect::<Vec<_>>(), "{name}: sequence numbers with a gap");
        check_stream(name, frames);
    }
    let view = |frames: &[Received]| -> Vec<(u64, u64, u32, [u8; 5])> {
        frames
            .iter()
            .map(|r| (r.meta.seq, r.meta.timestamp_ns, r.meta.sender, r.frame.data().try_into().unwrap()))
            .collect()
    };
    assert!(view(&seen[0]) == view(&seen[1]), "the shm and the TCP receiver saw different orders");
    for (client, port) in receivers.iter().zip(receivers.iter().map(|r| r.ports()[0].clone())) {
        assert_eq!(client.rx_dropped(&port), 0);
    }
}

/// 64 shared-memory clients on one channel, each sending and each
/// receiving everything: one order for all, nothing lost.
#[test]
fn sixty_four_shm_clients_share_one_order_without_loss() {
    const CLIENTS: usize = 64;
    const PER_SENDER: u32 = 1_000;
    let hub = FIELDHUB.start_shm();
    let clients: Vec<_> = (0..CLIENTS).map(|i| hub.shm_client(&format!("ecu{i}"))).collect();
    // Each also receives its own frames (as TX confirmations), so every
    // client's view is the whole channel.
    let config = PortConfig { receive_own: true, ..lossless() };
    let ports: Vec<_> = clients.iter().map(|c| c.open_port_with("can0", &config).unwrap()).collect();
    let total = CLIENTS * PER_SENDER as usize;
    let seen: Vec<Vec<(u64, u32, u8, u32)>> = std::thread::scope(|s| {
        let receiving: Vec<_> = clients
            .iter()
            .map(|c| {
                s.spawn(move || {
                    recv_n(c, total)
                        .iter()
                        .map(|r| {
                            let (sender, n) = number_of(&r.frame);
                            (r.meta.seq, r.meta.sender, sender, n)
                        })
                        .collect()
                })
            })
            .collect();
        let sending: Vec<_> = clients
            .iter()
            .zip(&ports)
            .enumerate()
            .map(|(i, (c, port))| {
                s.spawn(move || (0..PER_SENDER).for_each(|n| c.send(port, &numbered(0x200, i as u8, n)).unwrap()))
            })
            .collect();
        sending.into_iter().for_each(|t| t.join().unwrap());
        receiving.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let first = &seen[0];
    assert_eq!(first.iter().map(|f| f.0).collect::<Vec<_>>(), (1..=total as u64).collect::<Vec<_>>());
    for (i, view) in seen.iter().enumerate() {
        assert!(view == first, "client {i} saw another order");
    }
    for sender in 0..CLIENTS as u8 {
        let counters: Vec<u32> = first.iter().filter(|f| f.2 == sender).map(|f| f.3).collect();
        assert_eq!(counters, (0..PER_SENDER).collect::<Vec<_>>(), "sender {sender} out of order or lossy");
    }
}

/// Request and answer, one at a time: every wait in `recv` sleeps and is
/// woken (by the hub, or by the client's reader thread when it took the
/// frame first). A lost wake-up stalls the exchange.
#[test]
fn request_answer_exchanges_over_shm_never_lose_a_wake_up() {
    const EXCHANGES: u32 = 20_000;
    let hub = FIELDHUB.start_shm();
    let (asker, answerer) = (hub.shm_client("asker"), hub.shm_client("answerer"));
    let ask = asker.open_port("can0").unwrap();
    let answer = answerer.open_port("can0").unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..EXCHANGES {
                let request = answerer.recv(Some(PATIENCE)).unwrap().expect("the request was not delivered");
                assert_eq!(number_of(&request.frame), (1, i));
                answerer.send(&answer, &numbered(0x101, 2, i)).unwrap();
            }
        });
        for i in 0..EXCHANGES {
            asker.send(&ask, &numbered(0x100, 1, i)).unwrap();
            let reply = asker.recv(Some(PATIENCE)).unwrap().expect("the answer was not delivered");
            assert_eq!(number_of(&reply.frame), (2, i));
        }
    });
}

#[test]
fn a_stalled_shm_receiver_loses_frames_only_on_its_own_port_and_counts_them() {
    let hub = FIELDHUB.start_shm();
    let sender = hub.shm_client("sender");
    let tx = sender.open_port("can0").unwrap();
    let watchers = [hub.shm_client("shm-watcher"), hub.client("tcp-watcher")];
    for w in &watchers {
        w.open_port_with("can0", &lossless()).unwrap();
    }
    let sleeper = hub.shm_client("sleeper");
    let sleepy_port = sleeper.open_port("can0").unwrap();

    // Enough frames to overrun the sleeper's ring and its client queue.
    let total = 150_000u32;
    let watched: Vec<Vec<Received>> = std::thread::scope(|s| {
        let watching: Vec<_> = watchers.iter().map(|w| s.spawn(move || recv_n(w, total as usize))).collect();
        (0..total).for_each(|i| sender.send(&tx, &numbered(0x10, 1, i)).unwrap());
        watching.into_iter().map(|t| t.join().unwrap()).collect()
    });
    sender.flush().unwrap();
    for (name, frames) in ["shm-watcher", "tcp-watcher"].iter().zip(&watched) {
        assert_eq!(frames.len(), total as usize, "{name} lost frames");
        check_stream(name, frames);
    }

    let got = drain_delivered(&sleeper);
    let dropped = sleeper.rx_dropped(&sleepy_port);
    assert!(dropped > 0, "the sleeper should have overrun");
    assert_eq!(got.len() as u64 + dropped, u64::from(total), "drops are counted exactly");
    for pair in got.windows(2) {
        assert!(pair[1].meta.seq > pair[0].meta.seq);
        assert!(number_of(&pair[1].frame).1 > number_of(&pair[0].frame).1);
    }
    let stats = sender.stats().unwrap();
    // The hub drops only for the sleeper's port (the rest of its overrun was
    // counted by its own receive queue).
    for port in &stats.ports {
        assert!(port.name.starts_with("sleeper") || port.rx_dropped == 0, "{port:?} lost frames");
    }
}

#[test]
fn shm_clients_killed_mid_traffic_never_stall_the_bus_nor_leak_segments() {
    const NUMBERED: u32 = 20_000;
    const KILLS: usize = 40;
    let hub = FIELDHUB.start_shm();
    let shm_url = hub.shm_url.clone().unwrap();
    let listener = hub.shm_client("listener");
    listener.open_port_with("can0", &lossless()).unwrap();
    let sender = hub.shm_client("numbered");
    let tx = sender.open_port("can0").unwrap();
    sender.flush().unwrap();
    wait_until("segment descriptors of finished handshakes", 0, || segment_descriptors(hub.pid()));
    let baseline = resources(hub.pid());
    assert_eq!(baseline.1, 2, "one mapped segment per connected shm client");

    let mut rng = rand::thread_rng();
    // The listener's port is lossless: it keeps reading until the sender's
    // flush returned, or it would hold the channel for the generators'
    // last frames.
    let flushed = AtomicBool::new(false);
    let numbered_frames = std::thread::scope(|s| {
        let listening = s.spawn(|| {
            let mut mine = Vec::new();
            let mut last_frame = Instant::now();
            loop {
                match listener.recv(Some(Duration::from_millis(20))).unwrap() {
                    Some(r) => {
                        last_frame = Instant::now();
                        if r.meta.sender == tx.port_id {
                            mine.push(r);
                        }
                    }
                    None if flushed.load(Ordering::Acquire) => break,
                    None => assert!(last_frame.elapsed() < PATIENCE, "the bus stalled"),
                }
            }
            mine
        });
        let sending = s.spawn(|| {
            for i in 0..NUMBERED {
                sender.send(&tx, &numbered(0x7FF, 9, i)).unwrap();
                if i % 64 == 0 {
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
        });
        for _ in 0..KILLS {
            let mut generator = FIELDHUB
                .command()
                .args(["gen", "--hub", &shm_url, "-g", "0", "can0"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start fieldhub gen");
            // At random moments: before, during or after the handshake, and
            // in the middle of writing frames into the ring.
            std::thread::sleep(Duration::from_micros(rng.gen_range(0..40_000)));
            generator.kill().unwrap();
            generator.wait().unwrap();
        }
        sending.join().unwrap();
        sender.flush().unwrap();
        flushed.store(true, Ordering::Release);
        listening.join().unwrap()
    });
    assert_eq!(numbered_frames.len(), NUMBERED as usize, "numbered frames lost");
    check_stream("listener", &numbered_frames);
    let stats = sender.stats().unwrap();
    let numbered_sent = stats.ports.iter().find(|p| p.port_id == tx.port_id).unwrap().tx_frames;
    assert!(
        stats.channels[0].frames > numbered_sent,
        "the killed generators sent no frames: they were not killed mid-traffic"
    );

    // Every killed client's ports are released, its session thread has
    // ended and its segment is unmapped.
    wait_until("ports open on the hub", 2, || sender.stats().unwrap().ports.len());
    wait_until("hub descriptors and mapped client segments", baseline, || resources(hub.pid()));
    assert!(hub.log().iter().all(|l| !l.contains("panicked")), "{:#?}", hub.log());
}

#[test]
fn an_shm_client_writing_garbage_into_its_ring_is_told_why_and_cut_off_alone() {
    use std::io::{Read, Write};
    let hub = FIELDHUB.start_shm();
    let bystander = hub.shm_client("bystander");
    let tx = bystander.open_port("can0").unwrap();
    let watcher = hub.client("watcher");
    watcher.open_port_with("can0", &lossless()).unwrap();

    // A hand-made client: the session handshake, then a message of an
    // unassigned type in its ring.
    let name = hub.shm_url.as_deref().unwrap().strip_prefix("shm://").unwrap();
    let mut session = std::os::unix::net::UnixStream::connect(socket::socket_path(name).unwrap()).unwrap();
    let mut hello = Vec::new();
    wire::encode(
        &mut hello,
        &Message::Hello(Hello { version: PROTOCOL_VERSION, name: "vandal", options: Default::default() }),
    );
    session.write_all(&hello).unwrap();
    session.set_read_timeout(Some(PATIENCE)).unwrap();
    let (mut welcome, mut fds) = (vec![0u8; 128], Vec::new());
    let n = socket::recv_with_fds(&session, &mut welcome, &mut fds).unwrap();
    assert!(matches!(wire::decode(&welcome[4..n]), Ok(Message::Welcome(_))), "{:?}", &welcome[..n]);
    let bell = BellSegment::open(fds.pop().unwrap()).unwrap();
    let segment = ClientSegment::open(fds.pop().unwrap()).unwrap();
    assert!(Producer::starting_at(0).try_push(&segment.to_hub(), &[1, 0, 0, 0, 0x7F]).unwrap());
    bell.bell().ring();

    // The hub closes the session, after the reason in the ring.
    assert_eq!(session.read(&mut [0u8; 16]).unwrap(), 0, "the hub should close the session");
    let mut body = Vec::new();
    assert!(Consumer::starting_at(0).pop(&segment.to_client(), MAX_MESSAGE_LEN as usize, &mut body).unwrap());
    match wire::decode(&body) {
        Ok(Message::Error(report)) => {
            assert!(report.fatal);
            assert_eq!(ErrorCode::from_wire(report.code), Some(ErrorCode::Malformed), "{}", report.text);
        }
        other => panic!("expected a fatal ERROR, got {other:?}"),
    }

    // Everyone else carries on; the vandal's segment is let go.
    bystander.send(&tx, &numbered(0x10, 1, 0)).unwrap();
    bystander.flush().unwrap();
    assert_eq!(number_of(&recv_n(&watcher, 1)[0].frame), (1, 0));
    wait_until("mapped client segments", 1, || resources(hub.pid()).1);
}

#[test]
fn a_killed_hub_gives_shm_clients_a_clear_error_not_a_hang() {
    let mut hub = FIELDHUB.start_shm();
    let client = hub.shm_client("orphan");
    let port = client.open_port("can0").unwrap();
    // SAFETY: kill(2) takes plain integers; signalling our own child
    // cannot affect this process's memory.
    unsafe { libc::kill(hub.pid() as libc::pid_t, libc::SIGKILL) };
    wait_until("hub running", false, || hub.is_running());
    match client.recv(Some(PATIENCE)) {
        Err(ClientError::Closed { reason }) => assert!(reason.contains("hub closed the connection"), "{reason}"),
        other => panic!("expected a closed connection, got {other:?}"),
    }
    assert!(matches!(client.send(&port, &numbered(1, 1, 1)), Err(ClientError::Closed { .. })));
    assert!(matches!(client.flush(), Err(ClientError::Closed { .. })));
}

#[test]
fn a_stopping_hub_says_goodbye_over_shm() {
    let hub = FIELDHUB.start_shm();
    let client = hub.shm_client("polite");
    client.open_port("can0").unwrap();
    assert!(hub.terminate().success());
    match client.recv(Some(PATIENCE)) {
        Err(ClientError::Closed { reason }) => assert!(reason.contains("shutting down"), "{reason}"),
        other => panic!("expected the hub's goodbye, got {other:?}"),
    }
}

#[test]
fn connecting_to_an_unserved_shm_name_says_so() {
    let options = ClientOptions { timeout: Duration::from_secs(5), ..Default::default() };
    let err = Client::connect_with("shm://nobody-serves-this-name", &options).err().expect("no hub there");
    assert!(matches!(err, ClientError::Connect { .. }), "{err}");
    let err = Client::connect("shm://../etc").err().expect("not a name");
    assert!(err.to_string().contains("not a valid shared-memory hub name"), "{err}");
}

#[test]
fn an_idle_hub_with_shm_clients_sleeps() {
    let hub = FIELDHUB.start_shm();
    let clients: Vec<_> = (0..3).map(|i| hub.shm_client(&format!("idle{i}"))).collect();
    for c in &clients {
        c.open_port("can0").unwrap();
        c.flush().unwrap();
    }
    let before = cpu_ticks(hub.pid());
    std::thread::sleep(Duration::from_secs(2));
    let used = cpu_ticks(hub.pid()) - before;
    // 2 s are 200 clock ticks; a sleeping hub uses next to none of them, a
    // polling one all of them.
    assert!(used <= 4, "an idle hub with shm clients used {used} ticks of CPU in 2 s");
}

#[test]
fn a_busy_polling_hub_spins_while_idle() {
    let hub = FIELDHUB.start_shm_with(None, &["--busy-poll"]);
    let client = hub.shm_client("idle");
    client.open_port("can0").unwrap();
    client.flush().unwrap();
    let before = cpu_ticks(hub.pid());
    std::thread::sleep(Duration::from_secs(1));
    let used = cpu_ticks(hub.pid()) - before;
    // Opt-in spinning shows up as CPU time even with nothing to do (bound
    // kept low: the machine is shared with other tests).
    assert!(used >= 10, "a busy-polling hub used only {used} ticks in 1 s");
}
