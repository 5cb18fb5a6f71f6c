//! The soak run (`fieldhub bench soak`, `bench/soak.sh`): many shared-memory
//! and TCP clients on one channel while numbered traffic flows, some of
//! them killed (SIGKILL) at random moments and replaced — before, during
//! and after their handshake, in the middle of writing a ring. Afterwards
//! every surviving receiver must have seen one gap-free order, identical
//! for all, and the hub's descriptors and threads must be back where they
//! were before the first client came; its memory is reported.
//!
//! Not a test: it runs for minutes and prints what it saw. The killed
//! clients are `fieldhub gen` processes (unnumbered traffic, as fast as the
//! bus takes it); the numbered senders and the receivers are clients of
//! this process, half over shared memory, half over TCP, receivers
//! lossless so that nothing may be missing.

use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use fieldhub_client::{Client, ClientOptions, Frame};
use serde::Serialize;

use crate::hub_process::HubProcess;
use crate::{BenchError, Launcher, Progress, Transport, CHANNEL, PATIENCE};

/// What to run.
#[derive(Clone, Debug)]
pub struct SoakRun {
    /// Numbered frames, spread over the senders.
    pub frames: u64,
    /// Clients on the channel at any time: receivers, senders and the
    /// killable rest.
    pub clients: usize,
    /// Killable clients killed (and replaced) during the run.
    pub kills: usize,
    /// Seed of the kill schedule.
    pub seed: u64,
    /// Attackers run all along (`soak_hostile`): a client damaging the
    /// shared pages it is given, silent connections, the control API held,
    /// garbage.
    pub hostile: bool,
}

/// The hub's resources at one moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Resources {
    pub descriptors: usize,
    pub threads: usize,
    pub rss_kib: u64,
}

/// What the run saw.
#[derive(Debug, Serialize)]
pub struct SoakReport {
    pub frames: u64,
    pub receivers: usize,
    pub senders: usize,
    pub killable: usize,
    pub kills: usize,
    pub seconds: f64,
    /// Sessions the hostile client attached and damaged (`--hostile`).
    pub hostile_attacks: u64,
    /// What the stream attackers did (`--hostile`).
    pub attacks: crate::soak_hostile::Attacks,
    /// Frames every receiver took, numbered and unnumbered.
    pub frames_per_receiver: u64,
    /// Problems found; empty when the run was clean.
    pub problems: Vec<String>,
    pub before: Resources,
    pub after: Resources,
}

/// Receivers and numbered senders for `clients` clients in all.
fn roles(clients: usize) -> (usize, usize) {
    let receivers = (clients / 4).max(2);
    let senders = (clients / 16).max(2);
    (receivers, senders)
}

/// Run it.
pub fn run(launcher: &Launcher, spec: &SoakRun, progress: Progress<'_>) -> Result<SoakReport, BenchError> {
    let (receivers_n, senders_n) = roles(spec.clients);
    if spec.clients < receivers_n + senders_n + 1 {
        return Err(BenchError::Invalid(format!(
            "--clients {}: at least {} are needed",
            spec.clients,
            receivers_n + senders_n + 1
        )));
    }
    let killable_n = spec.clients - receivers_n - senders_n;
    let hub = HubProcess::start(launcher, false)?;
    let target = match spec.hostile {
        true => Some(stream_target(&hub)?),
        false => None,
    };
    let before = match &target {
        Some(target) => baseline_after_first_request(hub.pid(), target)?,
        None => resources(hub.pid())?,
    };
    let connect = |i: usize, role: &str| {
        let transport = if i % 2 == 0 { Transport::Shm } else { Transport::Tcp };
        let options = ClientOptions { name: format!("soak-{role}-{i}"), ..ClientOptions::default() };
        Client::connect_with(&hub.url(transport, false), &options)
    };
    let lossless = crate::lossless_port();
    let receivers: Vec<Client> = (0..receivers_n).map(|i| connect(i, "receiver")).collect::<Result<_, _>>()?;
    for r in &receivers {
        r.open_port_with(CHANNEL, &lossless)?;
    }
    let senders: Vec<Client> = (0..senders_n).map(|i| connect(i, "sender")).collect::<Result<_, _>>()?;
    let ports = senders.iter().map(|s| s.open_port(CHANNEL)).collect::<Result<Vec<_>, _>>()?;
    let sender_ids: Vec<u32> = ports.iter().map(|p| p.port_id).collect();

    let mut killable = Killable::new(launcher, &hub, spec.seed);
    for i in 0..killable_n {
        killable.spawn(i)?;
    }
    let (vandal, stream_attacks) = match target {
        Some(target) => (
            Some(crate::soak_hostile::Vandal::start(shm_socket(&hub.url(Transport::Shm, false))?)),
            Some(crate::soak_hostile::StreamAttacks::start(target)),
        ),
        None => (None, None),
    };
    let started = Instant::now();
    let done = AtomicBool::new(false);
    let per_sender = spec.frames.div_ceil(senders_n as u64);
    let (views, sent) = std::thread::scope(|s| -> Result<_, BenchError> {
        let receiving: Vec<_> = receivers.iter().map(|r| s.spawn(|| receive(r, &done, &sender_ids))).collect();
        let sending: Vec<_> = senders
            .iter()
            .zip(&ports)
            .map(|(client, port)| {
                s.spawn(move || -> Result<u64, BenchError> {
                    for n in 0..per_sender {
                        client.send(port, &numbered(n))?;
                    }
                    client.flush()?;
                    Ok(per_sender)
                })
            })
            .collect();
        let driven = (|| -> Result<u64, BenchError> {
            let mut kills = 0;
            while kills < spec.kills || sending.iter().any(|t| !t.is_finished()) {
                if kills < spec.kills {
                    killable.kill_one()?;
                    kills += 1;
                    if kills % 50 == 0 {
                        progress(&format!("soak: {kills} of {} clients killed", spec.kills));
                    }
                }
                std::thread::sleep(Duration::from_micros(killable.pause_micros()));
            }
            let mut sent = 0;
            for t in sending {
                sent += t.join().expect("sender thread")?;
            }
            Ok(sent)
        })();
        // However the run ended — all sent, or a kill or a sender failed —
        // the killable clients stop and the receivers are told to drain:
        // the scope waits for the receivers, which would otherwise hear the
        // killable clients' traffic for ever.
        killable.stop_all();
        // Senders flushed: everything sent is sequenced. The receivers stop
        // once the channel is quiet.
        done.store(true, Ordering::Release);
        let views: Vec<View> =
            receiving.into_iter().map(|t| t.join().expect("receiver thread")).collect::<Result<_, _>>()?;
        Ok((views, driven?))
    })?;
    let seconds = started.elapsed().as_secs_f64();

    let mut problems = Vec::new();
    let hostile_attacks = match vandal.map(crate::soak_hostile::Vandal::finish).transpose() {
        Ok(attacks) => attacks.unwrap_or(0),
        Err(e) => {
            problems.push(format!("the hostile client: {e}"));
            0
        }
    };
    let attacks = match stream_attacks.map(crate::soak_hostile::StreamAttacks::finish) {
        Some((attacks, found)) => {
            problems.extend(found);
            attacks
        }
        None => Default::default(),
    };
    for (i, view) in views.iter().enumerate() {
        if let Some(gap) = &view.gap {
            problems.push(format!("receiver {i}: {gap}"));
        }
        for (k, id) in sender_ids.iter().enumerate() {
            let got = view.numbered.iter().filter(|(sender, _)| sender == id).count() as u64;
            if got != per_sender {
                problems.push(format!("receiver {i}: {got} of sender {k}'s {per_sender} numbered frames"));
            }
        }
        if view.digest != views[0].digest || view.count != views[0].count {
            problems.push(format!("receiver {i} saw another order than receiver 0"));
        }
    }
    for view in &views {
        check_numbering(view, &sender_ids, &mut problems);
    }

    drop(receivers);
    drop(senders);
    let after = settle(hub.pid(), before)?;
    if after.descriptors != before.descriptors {
        problems.push(format!("hub descriptors: {} before, {} after", before.descriptors, after.descriptors));
    }
    if after.threads != before.threads {
        problems.push(format!("hub threads: {} before, {} after", before.threads, after.threads));
    }
    Ok(SoakReport {
        frames: sent,
        receivers: receivers_n,
        senders: senders_n,
        killable: killable_n,
        kills: spec.kills,
        seconds,
        hostile_attacks,
        attacks,
        frames_per_receiver: views.first().map_or(0, |v| v.count),
        problems,
        before,
        after,
    })
}

/// The session socket of the hub serving `url` (`shm://NAME[?dir=DIR]`).
fn shm_socket(url: &str) -> Result<std::path::PathBuf, BenchError> {
    match fieldhub_client::HubUrl::parse(url) {
        Ok(fieldhub_client::HubUrl::Shm { name, dir, .. }) => match dir {
            Some(dir) => fieldhub_shm::socket::socket_path_in(&dir, &name),
            None => fieldhub_shm::socket::socket_path(&name),
        }
        .map_err(BenchError::Invalid),
        _ => Err(BenchError::Invalid(format!("the hub under test serves no shared memory ({url})"))),
    }
}

/// The hub's TCP address and unix socket, for the stream attackers.
fn stream_target(hub: &HubProcess) -> Result<crate::soak_hostile::Target, BenchError> {
    let (tcp, unix) = (hub.url(Transport::Tcp, false), hub.url(Transport::Unix, false));
    let tcp = tcp.strip_prefix("tcp://").and_then(|a| a.parse().ok());
    let unix = unix.strip_prefix("unix:").map(std::path::PathBuf::from);
    match (tcp, unix) {
        (Some(tcp), Some(unix)) => Ok(crate::soak_hostile::Target { tcp, unix }),
        _ => Err(BenchError::Invalid("the hub under test serves no TCP address or unix socket".into())),
    }
}

/// A numbered frame: counter in the first 8 bytes, little-endian.
fn numbered(n: u64) -> Frame {
    Frame::can(0x100, false, &n.to_le_bytes()).expect("a valid classic frame")
}

/// What one receiver saw.
struct View {
    count: u64,
    /// `(sender port id, counter)` of numbered frames, in arrival order.
    numbered: Vec<(u32, u64)>,
    /// The first gap in the channel's sequence numbers, if any.
    gap: Option<String>,
    /// A digest of `(seq, sender, data)` of every frame, in order.
    digest: u64,
}

/// Quiet time after which a receiver of a finished run has everything.
const DRAINED: Duration = Duration::from_millis(500);

fn receive(client: &Client, done: &AtomicBool, sender_ids: &[u32]) -> Result<View, BenchError> {
    let mut view = View { count: 0, numbered: Vec::new(), gap: None, digest: 0xcbf2_9ce4_8422_2325 };
    let mut last_seq = None;
    let mut quiet_since = Instant::now();
    loop {
        match client.recv(Some(Duration::from_millis(50)))? {
            Some(r) => {
                quiet_since = Instant::now();
                view.count += 1;
                if let Some(last) = last_seq {
                    if r.meta.seq != last + 1 && view.gap.is_none() {
                        view.gap = Some(format!("sequence {} followed {last}", r.meta.seq));
                    }
                }
                last_seq = Some(r.meta.seq);
                for byte in r.meta.seq.to_le_bytes().iter().chain(&r.meta.sender.to_le_bytes()).chain(r.frame.data()) {
                    view.digest = (view.digest ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
                }
                if sender_ids.contains(&r.meta.sender) {
                    let n = u64::from_le_bytes(r.frame.data().try_into().expect("8 bytes"));
                    view.numbered.push((r.meta.sender, n));
                }
            }
            None if done.load(Ordering::Acquire) && quiet_since.elapsed() > DRAINED => return Ok(view),
            None if quiet_since.elapsed() > PATIENCE * 6 => {
                return Err(BenchError::Stalled("a receiver heard nothing for a minute".into()))
            }
            None => {}
        }
    }
}

/// Each numbered sender's counters arrive 0, 1, 2, ... in order.
fn check_numbering(view: &View, sender_ids: &[u32], problems: &mut Vec<String>) {
    for (k, id) in sender_ids.iter().enumerate() {
        let from_sender = view.numbered.iter().filter(|(sender, _)| sender == id);
        if let Some((expected, (_, n))) = (0u64..).zip(from_sender).find(|(expected, (_, n))| n != expected) {
            problems.push(format!("sender {k}: counter {n} where {expected} was due"));
        }
    }
}

/// The `fieldhub gen` processes that get killed.
struct Killable<'a> {
    launcher: &'a Launcher,
    hub: &'a HubProcess,
    children: Vec<Child>,
    rng: u64,
    spawned: usize,
}

impl<'a> Killable<'a> {
    fn new(launcher: &'a Launcher, hub: &'a HubProcess, seed: u64) -> Self {
        Self { launcher, hub, children: Vec::new(), rng: seed.max(1), spawned: 0 }
    }

    fn random(&mut self) -> u64 {
        // xorshift64: a reproducible schedule, nothing more.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    fn spawn(&mut self, slot: usize) -> Result<(), BenchError> {
        let transport = if self.spawned % 2 == 0 { Transport::Shm } else { Transport::Tcp };
        self.spawned += 1;
        let child = self
            .launcher
            .command()
            .args(["gen", "--hub", &self.hub.url(transport, false), "-g", "0", CHANNEL])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        if slot < self.children.len() {
            self.children[slot] = child;
        } else {
            self.children.push(child);
        }
        Ok(())
    }

    /// Kill a random one and start its replacement.
    fn kill_one(&mut self) -> Result<(), BenchError> {
        let slot = (self.random() % self.children.len() as u64) as usize;
        let child = &mut self.children[slot];
        let _ = child.kill();
        let _ = child.wait();
        self.spawn(slot)
    }

    /// Up to 20 ms between kills: some land in a handshake, some mid-write.
    fn pause_micros(&mut self) -> u64 {
        self.random() % 20_000
    }

    fn stop_all(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.children.clear();
    }
}

impl Drop for Killable<'_> {
    fn drop(&mut self) {
        self.stop_all();
    }
}

/// The hub's descriptors, threads and resident memory now.
pub fn resources(pid: u32) -> Result<Resources, BenchError> {
    let proc_error = |path: String| move |source| BenchError::Proc { path, source };
    let fd_dir = format!("/proc/{pid}/fd");
    let descriptors = std::fs::read_dir(&fd_dir).map_err(proc_error(fd_dir.clone()))?.count();
    let status_path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&status_path).map_err(proc_error(status_path.clone()))?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Ok(Resources { descriptors, threads: field("Threads:") as usize, rss_kib: field("VmRSS:") })
}

/// The hub's measure with `--hostile`: its descriptors once a first
/// request has been answered and its connection closed (the control API
/// keeps the netlink socket it opened for it, `soak_hostile::first_request`),
/// its threads as before the request (the tokio worker that served it idles
/// out after 10 s, as those of the attacks' requests do before the run's
/// end is measured).
fn baseline_after_first_request(pid: u32, target: &crate::soak_hostile::Target) -> Result<Resources, BenchError> {
    let threads = resources(pid)?.threads;
    crate::soak_hostile::first_request(target)?;
    let (mut last, mut same) = (resources(pid)?, 0);
    while same < 3 {
        std::thread::sleep(Duration::from_millis(50));
        let now = resources(pid)?;
        same = if now.descriptors == last.descriptors { same + 1 } else { 0 };
        last = now;
    }
    Ok(Resources { threads, ..last })
}

/// Wait (at most a minute) for the hub's descriptors and threads to come
/// back to `before`; what they are then.
fn settle(pid: u32, before: Resources) -> Result<Resources, BenchError> {
    let deadline = Instant::now() + PATIENCE * 6;
    loop {
        let now = resources(pid)?;
        if (now.descriptors == before.descriptors && now.threads == before.threads) || Instant::now() > deadline {
            return Ok(now);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The report as lines for people.
pub fn print(report: &SoakReport) {
    println!(
        "soak: {} numbered frames from {} senders to {} lossless receivers, {} killable clients, {} killed, in {:.1} s",
        report.frames, report.senders, report.receivers, report.killable, report.kills, report.seconds
    );
    println!("  every receiver took {} frames (numbered and the killed clients' traffic)", report.frames_per_receiver);
    if report.hostile_attacks > 0 {
        println!(
            "  a hostile client attached {} times, each time damaging the bell page and its segment",
            report.hostile_attacks
        );
        let a = &report.attacks;
        println!(
            "  silent connections: {} opened, never saying HELLO; the hub closed {} of them",
            a.silent_opened, a.silent_closed_by_hub
        );
        println!(
            "  control API held: {} cross-site requests refused on up to {} keep-alive connections, {} of them \
             closed by the hub to make room; {} legitimate requests answered",
            a.http_refused,
            crate::soak_hostile::HTTP_HELD,
            a.http_closed_by_hub,
            a.http_answered
        );
        println!("  garbage: {} connections sent bad input and were closed by the hub", a.garbage_closed);
    }
    println!(
        "  hub before: {} descriptors, {} threads, {} KiB resident; after: {} descriptors, {} threads, {} KiB",
        report.before.descriptors,
        report.before.threads,
        report.before.rss_kib,
        report.after.descriptors,
        report.after.threads,
        report.after.rss_kib
    );
    if report.problems.is_empty() {
        println!(
            "  clean: one gap-free order for every receiver, every numbered frame once and in order, resources back"
        );
    } else {
        for problem in &report.problems {
            println!("  PROBLEM: {problem}");
        }
    }
}
