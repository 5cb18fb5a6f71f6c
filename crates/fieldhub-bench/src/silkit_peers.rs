//! Vector SIL Kit as the peer a path is compared with, in the same run:
//! real `sil-kit-registry` and `silkit_rtt` processes (the peers'
//! `silkit_rtt.c`, built by their `setup.sh` next to the silkit-py wheel's
//! `libSilKit.so`).
//!
//! - [`round_trip`]: SIL Kit's CAN round trip between two participants
//!   (`chain`: the pinger sleeps until the answer, as fieldhub's clients do)
//!   with `participants - 2` more (`sink`s) receiving every frame.
//! - [`round_trip_via_hub`]: the same two participants with a hub as the
//!   network's simulator (`mode = "simulator"`, an ideal channel) between
//!   them; a fieldhub client on the channel counts the frames, so a run
//!   whose frames went SIL Kit's own way (the simulator not yet known) is
//!   an error, not a figure.
//! - [`cpu`]: CPU of the registry and every participant (`/proc/PID/schedstat`)
//!   while one participant sends at a fixed rate (`pace`) to `receivers` sinks.
//!
//! Every process ends with the run, however it ends (`Processes`).

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use fieldhub_client::{Client, ClientOptions};
use serde::Serialize;

use crate::hub_process::{HubExtras, HubProcess};
use crate::{BenchError, Launcher, Transport, CHANNEL};

/// How long SIL Kit's registry may take to listen.
const REGISTRY_START: Duration = Duration::from_secs(10);
/// Time a simulator hub gets to register with SIL Kit before participants join.
const SIMULATOR_JOIN: Duration = Duration::from_secs(2);
/// Time `pace` waits for discovery, plus settling, before a CPU window.
const PACE_SETTLE: Duration = Duration::from_secs(5);

/// The programs of a folder the peers' `setup.sh` filled.
#[derive(Clone, Debug)]
pub struct SilKitDir {
    registry: PathBuf,
    rtt: PathBuf,
    library: PathBuf,
}

impl SilKitDir {
    /// The programs in `dir`, or what is missing and how to get it.
    pub fn find(dir: &Path) -> Result<Self, String> {
        let wheel = dir.join("wheel/SilKit_py");
        let found = Self {
            registry: wheel.join("bin/sil-kit-registry"),
            rtt: dir.join("silkit_rtt"),
            library: wheel.join("libSilKit.so"),
        };
        if let Some(program) = first_missing(&[&found.registry, &found.rtt, &found.library]) {
            return Err(format!(
                "needs Vector SIL Kit: {} is missing; run `sh ../shared/peers/silkit/setup.sh {}` (or set \
                 SILKIT_DIR to the folder it filled)",
                program.display(),
                dir.display()
            ));
        }
        Ok(found)
    }
}

/// The first of `files` that is not there.
pub(crate) fn first_missing<'a>(files: &[&'a Path]) -> Option<&'a Path> {
    files.iter().copied().find(|f| !f.is_file())
}

/// Processes that end with the run, however it ends.
#[derive(Default)]
pub(crate) struct Processes(pub(crate) Vec<Child>);

impl Drop for Processes {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `command` with no input and its output discarded.
pub(crate) fn quiet(command: &mut Command) -> &mut Command {
    command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null())
}

/// Start `registry` on a free loopback port; its URI once it listens.
pub(crate) fn start_registry(registry: &Path, processes: &mut Processes) -> Result<String, BenchError> {
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let uri = format!("silkit://127.0.0.1:{port}");
    processes.0.push(quiet(Command::new(registry).args(["--listen-uri", &uri])).spawn()?);
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = Instant::now() + REGISTRY_START;
    while TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_err() {
        if Instant::now() > deadline {
            return Err(BenchError::Peer(format!(
                "SIL Kit's registry did not listen on {addr} within {REGISTRY_START:?}"
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(uri)
}

/// SIL Kit's round trip, as `silkit_rtt chain` prints it.
#[derive(Clone, Debug, Serialize)]
pub struct SilKitRtt {
    pub participants: usize,
    pub samples: usize,
    pub min_us: f64,
    pub p50_us: f64,
    pub p95_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    pub mean_us: f64,
}

impl SilKitRtt {
    /// The figures of `silkit_rtt`'s line "SIL Kit CAN RTT chain (n=N): min
    /// A p50 B p95 C p99 D max E mean F us".
    fn parse(output: &str, participants: usize) -> Option<Self> {
        let line = output.lines().find(|l| l.starts_with("SIL Kit CAN RTT"))?;
        let samples = line.split("(n=").nth(1)?.split(')').next()?.parse().ok()?;
        let words: Vec<&str> = line.split_once("):")?.1.split_whitespace().collect();
        let at = |key: &str| words.iter().position(|w| *w == key).and_then(|i| words.get(i + 1)?.parse().ok());
        Some(Self {
            participants,
            samples,
            min_us: at("min")?,
            p50_us: at("p50")?,
            p95_us: at("p95")?,
            p99_us: at("p99")?,
            max_us: at("max")?,
            mean_us: at("mean")?,
        })
    }
}

/// Run the pinger (`chain`) against an echo already started at `uri`.
fn chain(dir: &SilKitDir, uri: &str, participants: usize, samples: usize) -> Result<SilKitRtt, BenchError> {
    let out = Command::new(&dir.rtt)
        .args(["chain", uri, &samples.to_string()])
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    SilKitRtt::parse(&text, participants).ok_or_else(|| {
        BenchError::Peer(format!(
            "SIL Kit's pinger printed no round trip ({}): {text}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ))
    })
}

/// SIL Kit's round trip with `participants` on one network: the pinger, the
/// echo and `participants - 2` sinks receiving every frame.
pub fn round_trip(dir: &SilKitDir, participants: usize, samples: usize) -> Result<SilKitRtt, BenchError> {
    if participants < 2 {
        return Err(BenchError::Invalid("a SIL Kit round trip needs the pinger and the echo".into()));
    }
    let mut processes = Processes::default();
    let uri = start_registry(&dir.registry, &mut processes)?;
    processes.0.push(quiet(Command::new(&dir.rtt).args(["echo", &uri])).spawn()?);
    for _ in 2..participants {
        processes.0.push(quiet(Command::new(&dir.rtt).args(["sink", &uri])).spawn()?);
    }
    chain(dir, &uri, participants, samples)
}

/// SIL Kit's pinger and echo with a hub as the network's simulator between
/// them (an ideal channel), and the frames the hub's channel carried.
pub fn round_trip_via_hub(
    dir: &SilKitDir,
    launcher: &Launcher,
    samples: usize,
) -> Result<(SilKitRtt, u64), BenchError> {
    let mut processes = Processes::default();
    let uri = start_registry(&dir.registry, &mut processes)?;
    let extras = HubExtras {
        tables: format!(
            "[[silkit]]\nchannel = \"{CHANNEL}\"\nregistry = \"{uri}\"\nnetwork = \"CAN1\"\nmode = \"simulator\"\n"
        ),
        env: vec![("FIELDHUB_SILKIT_LIB".into(), dir.library.display().to_string())],
        ..HubExtras::default()
    };
    let hub = HubProcess::start_with_extras(launcher, extras)?;
    let counter = Client::connect_with(
        &hub.url(Transport::Shm, false),
        &ClientOptions { name: "bench-silkit-count".into(), ..Default::default() },
    )?;
    counter.open_port_with(CHANNEL, &crate::fd_port())?;
    std::thread::sleep(SIMULATOR_JOIN);
    processes.0.push(quiet(Command::new(&dir.rtt).args(["echo", &uri])).spawn()?);
    let seen = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    let rtt = std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                if let Ok(Some(_)) = counter.recv(Some(Duration::from_millis(100))) {
                    seen.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        let rtt = chain(dir, &uri, 2, samples);
        done.store(true, Ordering::Relaxed);
        rtt
    })?;
    let seen = seen.into_inner();
    if seen < 2 * samples as u64 {
        return Err(BenchError::Stalled(format!(
            "the hub's channel carried {seen} frames of SIL Kit's {} (request and answer of {samples} round trips): \
             the participants did not use the hub as their simulator",
            2 * samples
        )));
    }
    drop(hub);
    Ok((rtt, seen))
}

/// SIL Kit's CPU at a loaded bus.
#[derive(Clone, Debug, Serialize)]
pub struct SilKitCpu {
    pub receivers: usize,
    pub frames_per_s: f64,
    pub seconds: f64,
    /// Percent of one core: registry, the sender, the receivers.
    pub registry_percent: f64,
    pub sender_percent: f64,
    pub receivers_percent: f64,
    pub total_percent: f64,
}

/// ns on CPU of every thread of `pid` (`/proc/PID/task/*/schedstat`).
fn cpu_ns(pid: u32) -> Result<u64, BenchError> {
    let dir = format!("/proc/{pid}/task");
    let tasks = std::fs::read_dir(&dir).map_err(|source| BenchError::Proc { path: dir.clone(), source })?;
    let mut total = 0;
    for task in tasks.flatten() {
        let path = task.path().join("schedstat");
        // A thread that ended between the listing and the read counts nothing.
        if let Ok(text) = std::fs::read_to_string(&path) {
            total += text.split_whitespace().next().and_then(|n| n.parse::<u64>().ok()).unwrap_or(0);
        }
    }
    Ok(total)
}

/// CPU of SIL Kit with one participant sending `rate` frames/s to
/// `receivers` others, over a window of `seconds`.
pub fn cpu(dir: &SilKitDir, receivers: usize, rate: f64, seconds: f64) -> Result<SilKitCpu, BenchError> {
    let mut processes = Processes::default();
    let uri = start_registry(&dir.registry, &mut processes)?;
    for _ in 0..receivers {
        processes.0.push(quiet(Command::new(&dir.rtt).args(["sink", &uri])).spawn()?);
    }
    let sending = (seconds + PACE_SETTLE.as_secs_f64()).ceil();
    let mut pace = quiet(Command::new(&dir.rtt).args(["pace", &uri, &format!("{rate}"), &format!("{sending}")]))
        .stdout(Stdio::piped())
        .spawn()?;
    let pace_pid = pace.id();
    let output = pace.stdout.take().map(BufReader::new);
    processes.0.push(pace);
    std::thread::sleep(PACE_SETTLE);
    let pids: Vec<u32> = processes.0.iter().map(Child::id).collect();
    let before = pids.iter().map(|&p| cpu_ns(p)).collect::<Result<Vec<_>, _>>()?;
    let started = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(seconds));
    let after = pids.iter().map(|&p| cpu_ns(p)).collect::<Result<Vec<_>, _>>()?;
    let window = started.elapsed().as_secs_f64();
    let percent = |i: usize| after[i].saturating_sub(before[i]) as f64 / 1e9 / window * 100.0;
    let registry_percent = percent(0);
    let sender = pids.iter().position(|&p| p == pace_pid).unwrap_or(pids.len() - 1);
    let sender_percent = percent(sender);
    let receivers_percent: f64 = (1..pids.len()).filter(|&i| i != sender).map(percent).sum();
    // The sender's own line says whether it kept its rate.
    let line = output.and_then(|o| o.lines().map_while(Result::ok).find(|l| l.starts_with("pace:")));
    if let Some(line) = &line {
        if line.contains("SendFrame errors") && !line.ends_with(" 0 SendFrame errors") {
            return Err(BenchError::Peer(format!("SIL Kit's sender failed to send: {line}")));
        }
    }
    Ok(SilKitCpu {
        receivers,
        frames_per_s: rate,
        seconds: window,
        registry_percent,
        sender_percent,
        receivers_percent,
        total_percent: registry_percent + sender_percent + receivers_percent,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pingers_result_line_is_read_among_silkits_log_lines() {
        let output = "[2026-11-28 06:50:01.123] [chain-42] [warning] a log line\n\
                      SIL Kit CAN RTT chain (n=2000): min 21.5 p50 36.5 p95 51.0 p99 80.2 max 310.9 mean 38.7 us\n";
        let rtt = SilKitRtt::parse(output, 64).expect("the result line");
        assert_eq!((rtt.participants, rtt.samples), (64, 2000));
        assert_eq!(
            [rtt.min_us, rtt.p50_us, rtt.p95_us, rtt.p99_us, rtt.max_us, rtt.mean_us],
            [21.5, 36.5, 51.0, 80.2, 310.9, 38.7]
        );
    }

    #[test]
    fn a_pinger_that_printed_no_result_has_no_round_trip() {
        assert!(SilKitRtt::parse("no echo peer\n", 2).is_none());
        assert!(SilKitRtt::parse("SIL Kit CAN RTT chain (n=10): min 1.0 p50 2.0 us\n", 2).is_none());
    }

    #[test]
    fn a_missing_silkit_folder_names_the_file_and_the_setup_that_makes_it() {
        let why = SilKitDir::find(Path::new("/nowhere/silkit")).unwrap_err();
        assert!(why.contains("/nowhere/silkit/wheel/SilKit_py/bin/sil-kit-registry is missing"), "{why}");
        assert!(why.contains("setup.sh /nowhere/silkit"), "{why}");
    }
}
