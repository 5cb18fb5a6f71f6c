//! A federated channel across a veth pair, as `bench/federation.sh`
//! measures it, each figure next to its baselines of the same run:
//!
//! - round trip: a probe on the relay hub, the echo on the owner hub (relay
//!   → owner → echo → owner → relay → probe) against the raw TCP_NODELAY
//!   ping-pong across the same veth pair and the same two clients on one
//!   hub's local channel;
//! - throughput: one sender on the relay, one lossless receiver on the
//!   owner, against the same on one hub, and the bound of the same run: the
//!   same flood through two hubs chained without Zenoh (a client of this
//!   process forwards every frame from the first hub's channel to the
//!   second's), the two bus passes a relayed frame takes at the least; over
//!   each flood the CPU of every
//!   thread of the hubs and of this process, where the clients run
//!   ([`crate::thread_cpu`]), and the machine's idle cores: what a frame
//!   costs where, and whether the cores were full.
//!
//! The owner hub and the raw baseline's peer run in a network namespace of
//! their own (`ip netns exec`), the relay hub and the clients in this one;
//! the veth pair joins them with addresses of a /30 that this process's id
//! picks. Making them needs root (`CAP_NET_ADMIN`) and `ip`: [`needs`] says
//! what is missing. The namespace and the pair are removed when the run
//! ends, however it ends.

use std::net::{IpAddr, Ipv4Addr};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fieldhub_client::{Client, ClientOptions};
use serde::Serialize;

use crate::hub_process::{HubExtras, HubProcess};
use crate::latency::measure_calls_between;
use crate::remote::{CallTime, HubChannel};
use crate::sleeps::{SleepWindow, Sleeps};
use crate::stats::Distribution;
use crate::thread_cpu::{CpuWindow, ThreadCpu};
use crate::throughput::{measure_between, HubRate};
use crate::{raw, BenchError, FrameSize, Launcher, Progress, Transport, CHANNEL, WARM_UP};

/// Time the relay gets to find the owner before the first round trip.
const FEDERATION_SETTLE: Duration = Duration::from_secs(2);
/// The federation's Zenoh port on each side.
const ZENOH_PORT: u16 = 7447;
/// How often the chain's forwarder, with nothing to forward, looks whether
/// the flood is over.
const FORWARD_SLICE: Duration = Duration::from_millis(100);

/// What to measure.
#[derive(Clone, Debug)]
pub struct FederationRun {
    pub samples: usize,
    /// How long the sender floods.
    pub seconds: f64,
}

/// The figures, with their baselines.
#[derive(Debug, Serialize)]
pub struct FederationFigures {
    pub raw_tcp: Distribution,
    pub one_hub: Distribution,
    pub relay_owner_relay: Distribution,
    /// The sleeps of both hubs' threads and the clients' over those round
    /// trips (warm-up included): the hand-offs a relayed round trip took.
    pub relayed_sleeps: Sleeps,
    pub one_hub_rate: HubRate,
    pub relay_to_owner_rate: HubRate,
    /// The CPU of both hubs' threads and of the clients' process over the
    /// relayed flood (the sender is the calling thread).
    pub relayed_flood_cpu: ThreadCpu,
    /// The same over one hub's flood.
    pub one_hub_flood_cpu: ThreadCpu,
    /// The sleeps of both hubs' threads and the clients' over the relayed
    /// flood, per frame: how often a hop waited for the next.
    pub relayed_flood_sleeps: Sleeps,
    /// The same flood through two hubs chained without Zenoh: sender on the
    /// first, a client forwarding every frame to the second, the receiver
    /// there (`measure_chained`).
    pub chained_rate: HubRate,
    /// The CPU of both chained hubs and of this process over it.
    pub chained_flood_cpu: ThreadCpu,
}

/// Why this process cannot build the namespaces, if it cannot.
pub fn needs() -> Option<String> {
    if !rustix::process::geteuid().is_root() {
        return Some("needs root (it makes a network namespace and a veth pair: run the report as root)".into());
    }
    match Command::new("ip").arg("-V").stdout(Stdio::null()).stderr(Stdio::null()).status() {
        Ok(status) if status.success() => None,
        _ => Some("needs the `ip` command (iproute2) to make a network namespace and a veth pair".into()),
    }
}

/// A network namespace joined to this one by a veth pair; removed on drop.
struct Namespaces {
    name: String,
    /// The address on this side, and the one inside the namespace.
    here: Ipv4Addr,
    there: Ipv4Addr,
}

fn ip(args: &[&str]) -> Result<(), BenchError> {
    let out = Command::new("ip").args(args).stdin(Stdio::null()).output()?;
    if !out.status.success() {
        return Err(BenchError::Invalid(format!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

impl Namespaces {
    fn make() -> Result<Self, BenchError> {
        let pid = std::process::id();
        // A /30 of 10.78.0.0/16 per process id, so runs side by side differ.
        let base = (pid % 16_384) * 4;
        let octets = |host: u32| Ipv4Addr::new(10, 78, ((base + host) >> 8) as u8, ((base + host) & 0xFF) as u8);
        let made = Self { name: format!("fhbench{pid}"), here: octets(2), there: octets(1) };
        let (outer, inner) = (format!("fhb{pid}o"), format!("fhb{pid}i"));
        ip(&["netns", "add", &made.name])?;
        // From here on, dropping `made` removes the namespace and the pair with it.
        ip(&["link", "add", &outer, "type", "veth", "peer", "name", &inner, "netns", &made.name])?;
        ip(&["addr", "add", &format!("{}/30", made.here), "dev", &outer])?;
        ip(&["link", "set", &outer, "up"])?;
        ip(&["-n", &made.name, "addr", "add", &format!("{}/30", made.there), "dev", &inner])?;
        ip(&["-n", &made.name, "link", "set", &inner, "up"])?;
        ip(&["-n", &made.name, "link", "set", "lo", "up"])?;
        Ok(made)
    }

    /// `launcher`, its commands run inside the namespace.
    fn inside(&self, launcher: &Launcher) -> Launcher {
        let mut prefix: Vec<std::ffi::OsString> = vec!["netns".into(), "exec".into(), self.name.clone().into()];
        prefix.push(launcher.exe.clone().into());
        prefix.extend(launcher.prefix.iter().cloned());
        Launcher { exe: "ip".into(), prefix }
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        // Deleting the namespace deletes its end of the pair, and so the pair.
        let _ = ip(&["netns", "del", &self.name]);
    }
}

/// The federation's shared token, in a file only this user reads.
struct TokenFile(std::path::PathBuf);

impl TokenFile {
    fn write() -> Result<Self, BenchError> {
        use std::os::unix::fs::OpenOptionsExt;
        let path = std::env::temp_dir().join(format!("fieldhub-bench-federation-{}.token", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path)?;
        std::io::Write::write_all(&mut file, format!("bench-federation-{}\n", std::process::id()).as_bytes())?;
        Ok(Self(path))
    }
}

impl Drop for TokenFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn hub_extras(name: &str, listen: Ipv4Addr, owner: Option<Ipv4Addr>, token: &TokenFile) -> HubExtras {
    let connect = owner.map(|o| format!("connect = [\"tcp/{o}:{ZENOH_PORT}\"]\n")).unwrap_or_default();
    let owner_key = if owner.is_some() { "owner = \"owner\"\n" } else { "" };
    HubExtras {
        hub_keys: format!("name = \"{name}\"\n"),
        channel_keys: format!("federated = true\n{owner_key}"),
        tables: format!(
            "[federation]\nlisten = [\"tcp/{listen}:{ZENOH_PORT}\"]\n{connect}token_file = \"{}\"\n",
            token.0.display()
        ),
        env: Vec::new(),
    }
}

/// Measure the federated channel and its baselines.
pub fn run(launcher: &Launcher, spec: &FederationRun, progress: Progress<'_>) -> Result<FederationFigures, BenchError> {
    if let Some(missing) = needs() {
        return Err(BenchError::Invalid(format!("the federation benchmark {missing}")));
    }
    let size = FrameSize::Can8;
    let ns = Namespaces::make()?;
    let token = TokenFile::write()?;
    let inside = ns.inside(launcher);
    progress("federation: raw TCP across the veth pair");
    let mut raw_tcp = raw::tcp_ping_pong_at(&inside, IpAddr::V4(ns.here), size, spec.samples)?;
    let owner = HubProcess::start_with_extras(&inside, hub_extras("owner", ns.there, None, &token))?;
    let relay = HubProcess::start_with_extras(launcher, hub_extras("relay", ns.here, Some(ns.there), &token))?;
    let local = HubProcess::start(launcher, false)?;
    let second = HubProcess::start(launcher, false)?;
    std::thread::sleep(FEDERATION_SETTLE);
    let (owner_url, relay_url, local_url) =
        (owner.url(Transport::Unix, false), relay.url(Transport::Unix, false), local.url(Transport::Unix, false));
    let at = |url| HubChannel { url, token: None, channel: CHANNEL };
    let mut label = |line: &str| progress(&format!("federation: {line}"));
    let window = SleepWindow::open(&[("relay", relay.pid()), ("owner", owner.pid())])?;
    let mut relayed =
        CallTime::round_trips(&measure_calls_between(at(&relay_url), at(&owner_url), size, spec.samples, &mut label)?);
    let relayed_sleeps = window.close((WARM_UP + spec.samples) as u64)?;
    let mut one_hub =
        CallTime::round_trips(&measure_calls_between(at(&local_url), at(&local_url), size, spec.samples, &mut label)?);
    let hubs = [("relay", relay.pid()), ("owner", owner.pid())];
    let (window, sleeps) = (CpuWindow::open(&hubs)?, SleepWindow::open(&hubs)?);
    let relay_to_owner_rate = measure_between(&relay_url, &owner_url, size, 1, spec.seconds, &mut label)?;
    let relayed_flood_cpu = window.close(relay_to_owner_rate.frames)?;
    let relayed_flood_sleeps = sleeps.close(relay_to_owner_rate.frames)?;
    let window = CpuWindow::open(&[("hub", local.pid())])?;
    let one_hub_rate = measure_between(&local_url, &local_url, size, 1, spec.seconds, &mut label)?;
    let one_hub_flood_cpu = window.close(one_hub_rate.frames)?;
    let second_url = second.url(Transport::Unix, false);
    let window = CpuWindow::open(&[("first", local.pid()), ("second", second.pid())])?;
    let chained_rate = measure_chained(&local_url, &second_url, size, spec.seconds, &mut label)?;
    let chained_flood_cpu = window.close(chained_rate.frames)?;
    Ok(FederationFigures {
        raw_tcp: Distribution::of(&mut raw_tcp),
        one_hub: Distribution::of(&mut one_hub),
        relay_owner_relay: Distribution::of(&mut relayed),
        relayed_sleeps,
        one_hub_rate,
        relay_to_owner_rate,
        relayed_flood_cpu,
        one_hub_flood_cpu,
        relayed_flood_sleeps,
        chained_rate,
        chained_flood_cpu,
    })
}

/// The flood of [`measure_between`] from the hub at `first` to the hub at
/// `second`, chained by a client of this process that receives every frame
/// on `first` (a lossless port: it holds that bus rather than lose one) and
/// sends it on `second`: a frame takes two bus passes, as a relayed frame
/// does, and no Zenoh.
fn measure_chained(
    first: &str,
    second: &str,
    size: FrameSize,
    seconds: f64,
    progress: Progress<'_>,
) -> Result<HubRate, BenchError> {
    let options = |name: &str| ClientOptions { name: name.into(), ..Default::default() };
    let from = Client::connect_with(first, &options("bench-chain-in"))?;
    from.open_port_with(size.channel(), &crate::lossless_port())?;
    let to = Client::connect_with(second, &options("bench-chain-out"))?;
    let port = to.open_port_with(size.channel(), &crate::fd_port())?;
    let flooded = AtomicBool::new(false);
    std::thread::scope(|s| {
        let forwarder = s.spawn(|| -> Result<u64, BenchError> {
            let mut forwarded = 0;
            loop {
                match from.recv(Some(FORWARD_SLICE))? {
                    Some(received) => {
                        to.send(&port, &received.frame)?;
                        forwarded += 1;
                    }
                    // SYNC POINT with the Release store after the flood.
                    None if flooded.load(Ordering::Acquire) => return Ok(forwarded),
                    None => {}
                }
            }
        });
        let rate = measure_between(first, second, size, 1, seconds, progress);
        flooded.store(true, Ordering::Release);
        let forwarded =
            forwarder.join().map_err(|_| BenchError::Invalid("the chain's forwarder panicked".into()))??;
        let rate = rate?;
        if forwarded != rate.frames {
            return Err(BenchError::Stalled(format!(
                "the chain's forwarder passed on {forwarded} of the {} frames sent",
                rate.frames
            )));
        }
        Ok(rate)
    })
}
