//! Rest-bus simulations the hub runs (`[[rbs]]`, `docs/rest-bus.md`): each
//! simulated node of a DBC is one hub-internal client with one port on the
//! simulation's channel, named as the node, whose messages are cyclic jobs
//! the bus runs on bus time (`fieldhub_rbs::engine` builds the frames).
//! The control API reads and changes the messages through [`RestBus`], and
//! adds simulations while the hub runs (`fieldhub rbs`) and removes them.
//!
//! Invariants:
//! - A DBC that does not load, a node it does not define or a rule that
//!   does not fit stops the hub's start with an error naming `rbs[i]`; a
//!   simulation added while the hub runs is refused with the same error,
//!   or when a node's port does not open, and leaves nothing behind.
//! - One thread per node: it opens the port, adds its jobs, then only
//!   takes what the bus reports to the port (dropped frames are logged)
//!   until the hub stops or its simulation is removed; its port closes
//!   then, and the bus drops the port's jobs with it. The frames
//!   themselves never pass through it.
//! - A simulation keeps its number (its place in the list, `sim` in the
//!   control API) while it runs; a removed one's number is not reused.
//! - A message without a cycle is a job of [`EVENT_PERIOD`] that sends only
//!   on change; setting one of its signals runs it at once (the job is
//!   restarted with no delay), so it goes on the bus at the next bus step.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use fieldhub_bus::cyclic::{FrameProducer, JobError, JobId, JobOrigin};
use fieldhub_bus::inbox::{ClientId, CyclicRequest, Inbound};
use fieldhub_bus::outbox::Outbound;
use fieldhub_dbc::can_dbc::Dbc;
use fieldhub_proto::wire::PortOptions;
use fieldhub_rbs::engine::{EngineError, MessageJob, MessageState, Setup, Simulation};
use fieldhub_rbs::protect::Algorithm;
use tracing::{error, info, warn};

use crate::config::RbsConfig;
use crate::session::peer_user::PeerOrigin;
use crate::session::Sessions;
use crate::transport::internal_port::{self, JobNotRun, NotOpened, PortRequest, LOOK};

/// The period of a message sent on change only: its job runs when a
/// signal changes, and this long after otherwise (sending nothing then).
pub const EVENT_PERIOD: Duration = Duration::from_secs(3600);

/// How long adding a simulation waits for its nodes to attach: the bus
/// answers a port and its jobs at once, unless it is stopping.
const ATTACH: Duration = Duration::from_secs(10);

/// Why a simulation cannot start.
#[derive(Debug, thiserror::Error)]
pub enum RbsError {
    #[error("rbs[{index}]: cannot read the DBC file {}: {source}", path.display())]
    Read {
        index: usize,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("rbs[{index}]: {}: {source}", path.display())]
    Load {
        index: usize,
        path: PathBuf,
        #[source]
        source: fieldhub_rbs::load::LoadError,
    },
    #[error("rbs[{index}]: {}: {source}", path.display())]
    Engine {
        index: usize,
        path: PathBuf,
        #[source]
        source: EngineError,
    },
    #[error("rbs[{0}]: {1}")]
    Setup(usize, String),
    #[error("cannot start a simulated node's thread: {0}")]
    Thread(#[source] std::io::Error),
}

/// One simulated message as the control plane sees it.
pub struct SimMessage {
    pub state: Arc<MessageState>,
    /// Its node's client and job, once the bus added it.
    job: OnceLock<(ClientId, JobId)>,
}

/// One running simulation.
pub struct RunningSim {
    pub channel: String,
    /// The DBC file (for one added through the API, the name it was given).
    pub dbc: PathBuf,
    pub messages: Vec<SimMessage>,
    /// Its alive counters and checksums, as the control API describes them.
    pub protections: Vec<Protection>,
    /// Set when it is removed: its nodes' threads close their ports.
    stop: AtomicBool,
    /// The bus time its first message was added: every message's start
    /// delay counts from it, so the DBC's offsets between messages hold
    /// whichever node thread the bus served first.
    origin: JobOrigin,
}

impl RunningSim {
    /// A message by name.
    pub fn message(&self, name: &str) -> Option<&SimMessage> {
        self.messages.iter().find(|m| m.state.name == name)
    }

    /// The bus time its messages' start delays count from, once the bus
    /// added the first.
    pub fn origin_ns(&self) -> Option<u64> {
        self.origin.get()
    }
}

/// A message's alive counter or checksum, which the simulation computes:
/// the control API names the signal and its rule.
#[derive(Clone, Debug)]
pub enum Protection {
    /// The counter's signal and the raw values it counts through (a range
    /// the rule leaves open is the signal's every value).
    Counter { message: String, signal: String, min: u64, max: u64 },
    /// The checksum's signal and how it is computed.
    Checksum { message: String, signal: String, algorithm: Algorithm, data_id: Option<u16> },
}

impl Protection {
    /// The rules of `setup` on `dbc`, their ranges resolved as the engine
    /// resolves them.
    fn of(dbc: &Dbc, setup: &Setup) -> Vec<Self> {
        let bits = |message: &str, signal: &str| {
            let m = dbc.messages.iter().find(|m| m.name == message)?;
            m.signals.iter().find(|s| s.name == signal).map(|s| s.size)
        };
        let counters = setup.counters.iter().map(|c| {
            let (min, max) = c.range(bits(&c.message, &c.signal).unwrap_or(64));
            Self::Counter { message: c.message.clone(), signal: c.signal.clone(), min, max }
        });
        let checksums = setup.checksums.iter().map(|c| Self::Checksum {
            message: c.message.clone(),
            signal: c.signal.clone(),
            algorithm: c.algorithm,
            data_id: c.data_id,
        });
        counters.chain(checksums).collect()
    }

    /// The message it protects.
    pub fn message(&self) -> &str {
        match self {
            Self::Counter { message, .. } | Self::Checksum { message, .. } => message,
        }
    }
}

/// Every simulation of the hub.
pub struct RestBus {
    /// By number; `None`: removed.
    sims: RwLock<Vec<Option<Arc<RunningSim>>>>,
    sessions: Arc<Sessions>,
    /// The node threads of simulations added while the hub runs.
    added_threads: Mutex<Vec<JoinHandle<()>>>,
}

/// One node's messages: (node, [(message index, job)]).
type NodeJobs = (String, Vec<(usize, MessageJob)>);

/// A simulation loaded and built, its nodes not attached yet.
pub struct Prepared {
    channel: String,
    dbc: PathBuf,
    jobs: Vec<MessageJob>,
    protections: Vec<Protection>,
}

/// Why a simulation cannot be built from a DBC's bytes.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("{0}")]
    Setup(String),
    #[error(transparent)]
    Load(#[from] fieldhub_rbs::load::LoadError),
    #[error(transparent)]
    Engine(#[from] EngineError),
}

impl Prepared {
    /// Load and build every `[[rbs]]` table's simulation.
    pub fn all(configs: &[RbsConfig]) -> Result<Vec<Self>, RbsError> {
        configs.iter().enumerate().map(|(index, config)| Self::one(index, config)).collect()
    }

    fn one(index: usize, config: &RbsConfig) -> Result<Self, RbsError> {
        let path = config.dbc.clone();
        let bytes = std::fs::read(&path).map_err(|source| RbsError::Read { index, path: path.clone(), source })?;
        Self::from_bytes(config, &bytes).map_err(|error| match error {
            BuildError::Setup(why) => RbsError::Setup(index, why),
            BuildError::Load(source) => RbsError::Load { index, path, source },
            BuildError::Engine(source) => RbsError::Engine { index, path, source },
        })
    }

    /// The simulation `config` describes of the DBC file `bytes` (its
    /// `dbc` path only names it).
    pub fn from_bytes(config: &RbsConfig, bytes: &[u8]) -> Result<Self, BuildError> {
        let setup = config.setup().map_err(BuildError::Setup)?;
        let dbc = fieldhub_rbs::load::load(bytes)?;
        let sim = Simulation::build(&dbc, &setup)?;
        let protections = Protection::of(&dbc, &setup);
        Ok(Self { channel: config.channel.clone(), dbc: config.dbc.clone(), jobs: sim.jobs, protections })
    }
}

impl RestBus {
    /// Attach every simulation's nodes and start their messages, and
    /// return once all are attached: the hub listens only after this, so
    /// no client sees the bus before the simulation is on it (in virtual
    /// time a participant could otherwise step bus time past the
    /// simulation's first cycles while its nodes were still attaching).
    /// The returned threads end when the hub stops.
    pub fn start(
        prepared: Vec<Prepared>,
        sessions: &Arc<Sessions>,
    ) -> Result<(Arc<Self>, Vec<JoinHandle<()>>), RbsError> {
        let rest_bus = Arc::new(Self {
            sims: RwLock::new(Vec::new()),
            sessions: Arc::clone(sessions),
            added_threads: Mutex::new(Vec::new()),
        });
        let mut threads = Vec::new();
        let mut waiting = Vec::new();
        for p in prepared {
            let (sim, nodes) = rest_bus.running(p);
            rest_bus.sims.write().unwrap_or_else(PoisonError::into_inner).push(Some(Arc::clone(&sim)));
            let (attached, reports) = crossbeam_channel::bounded(nodes.len());
            waiting.push((nodes.len(), reports));
            match rest_bus.spawn_nodes(&sim, nodes, Some(attached)) {
                Ok(started) => threads.extend(started),
                // Dropping `rest_bus` stops the nodes already started.
                Err(error) => return Err(RbsError::Thread(error)),
            }
        }
        let deadline = Instant::now() + ATTACH;
        for (index, (count, reports)) in waiting.into_iter().enumerate() {
            for _ in 0..count {
                let why = match reports.recv_deadline(deadline) {
                    Ok(Ok(())) => continue,
                    Ok(Err(why)) => why,
                    Err(_) => "the bus did not attach the simulated nodes in time".to_owned(),
                };
                return Err(RbsError::Setup(index, why));
            }
        }
        Ok((rest_bus, threads))
    }

    /// A prepared simulation as it runs, and its nodes' jobs.
    fn running(&self, prepared: Prepared) -> (Arc<RunningSim>, Vec<NodeJobs>) {
        let mut messages = Vec::new();
        let mut nodes: Vec<NodeJobs> = Vec::new();
        for (m, job) in prepared.jobs.into_iter().enumerate() {
            messages.push(SimMessage { state: Arc::clone(job.state()), job: OnceLock::new() });
            let node = job.state().node.clone();
            match nodes.iter_mut().find(|(name, _)| *name == node) {
                Some((_, jobs)) => jobs.push((m, job)),
                None => nodes.push((node, vec![(m, job)])),
            }
        }
        let sim = RunningSim {
            channel: prepared.channel,
            dbc: prepared.dbc,
            messages,
            protections: prepared.protections,
            stop: AtomicBool::new(false),
            origin: JobOrigin::new(),
        };
        (Arc::new(sim), nodes)
    }

    fn spawn_nodes(
        &self,
        sim: &Arc<RunningSim>,
        nodes: Vec<NodeJobs>,
        attached: Option<crossbeam_channel::Sender<Result<(), String>>>,
    ) -> std::io::Result<Vec<JoinHandle<()>>> {
        let mut threads = Vec::new();
        for (node, jobs) in nodes {
            let (sim, sessions) = (Arc::clone(sim), Arc::clone(&self.sessions));
            let attached = attached.clone();
            let thread = std::thread::Builder::new().name(format!("fh-rbs-{node}")).spawn(move || {
                run_node(&sim, &node, jobs, &sessions, attached);
            })?;
            threads.push(thread);
        }
        Ok(threads)
    }

    /// Start a simulation while the hub runs: its number once every node
    /// attached and added its messages, or why not (and it is gone again).
    /// Blocks up to [`ATTACH`].
    pub fn add(&self, prepared: Prepared) -> Result<usize, String> {
        let (sim, nodes) = self.running(prepared);
        let count = nodes.len();
        let number = {
            let mut sims = self.sims.write().unwrap_or_else(PoisonError::into_inner);
            sims.push(Some(Arc::clone(&sim)));
            sims.len() - 1
        };
        let (attached, reports) = crossbeam_channel::bounded(count);
        let started = self.spawn_nodes(&sim, nodes, Some(attached));
        let mut failed = started.as_ref().err().map(|e| format!("cannot start a node's thread: {e}"));
        self.added_threads.lock().unwrap_or_else(PoisonError::into_inner).extend(started.into_iter().flatten());
        let deadline = Instant::now() + ATTACH;
        for _ in 0..count {
            if failed.is_some() {
                break;
            }
            match reports.recv_deadline(deadline) {
                Ok(Ok(())) => {}
                Ok(Err(why)) => failed = Some(why),
                Err(_) => failed = Some("the bus did not attach the simulated nodes in time".into()),
            }
        }
        match failed {
            None => Ok(number),
            Some(why) => {
                self.remove(number);
                Err(why)
            }
        }
    }

    /// Stop simulation `number`: its nodes' ports close. False if there is none.
    pub fn remove(&self, number: usize) -> bool {
        let removed = self.sims.write().unwrap_or_else(PoisonError::into_inner).get_mut(number).and_then(Option::take);
        let Some(sim) = removed else { return false };
        sim.stop.store(true, Ordering::Release);
        // Threads of simulations removed before have ended or end now.
        self.added_threads.lock().unwrap_or_else(PoisonError::into_inner).retain(|t| !t.is_finished());
        true
    }

    /// The running simulations with their numbers.
    pub fn sims(&self) -> Vec<(usize, Arc<RunningSim>)> {
        let sims = self.sims.read().unwrap_or_else(PoisonError::into_inner);
        sims.iter().enumerate().filter_map(|(n, sim)| Some((n, Arc::clone(sim.as_ref()?)))).collect()
    }

    /// Simulation `number`, if it runs.
    pub fn sim(&self, number: usize) -> Option<Arc<RunningSim>> {
        self.sims.read().unwrap_or_else(PoisonError::into_inner).get(number)?.clone()
    }

    /// A message sent on change changed: run its job now.
    pub fn trigger(&self, message: &SimMessage) {
        let Some(&(client, id)) = message.job.get() else { return };
        if message.state.cycle_ms.is_some() {
            return;
        }
        let period_ns = EVENT_PERIOD.as_nanos() as u64;
        let reply = Box::new(|_: Result<JobId, JobError>| {});
        let request = CyclicRequest::Update { id, period_ns, start_delay_ns: 0, reply };
        let _ = self.sessions.inbox.send(Inbound::Cyclic { client, request });
    }
}

impl Drop for RestBus {
    /// The control server ends with the hub: the added simulations' node
    /// threads end with it (they look at the hub's stop every [`LOOK`]).
    fn drop(&mut self) {
        for sim in self.sims.get_mut().unwrap_or_else(PoisonError::into_inner).iter().flatten() {
            sim.stop.store(true, Ordering::Release);
        }
        for thread in self.added_threads.get_mut().unwrap_or_else(PoisonError::into_inner).drain(..) {
            let _ = thread.join();
        }
    }
}

/// A node's thread: attach its port, add its jobs, take its reports.
/// `attached` hears whether it attached (for a simulation added at run time).
fn run_node(
    sim: &RunningSim,
    node: &str,
    jobs: Vec<(usize, MessageJob)>,
    sessions: &Arc<Sessions>,
    attached: Option<crossbeam_channel::Sender<Result<(), String>>>,
) {
    let report = |result: Result<(), String>| {
        if let Some(attached) = &attached {
            let _ = attached.try_send(result);
        }
    };
    let channel = &sim.channel;
    let mut slot = match sessions.admit("rest-bus simulation", format!("rbs:{node}"), PeerOrigin::Operator) {
        Ok(slot) => slot,
        Err(violation) => {
            report(Err(format!("the hub cannot attach the simulated node {node}: {}", violation.text)));
            return error!(node, "the hub cannot attach the simulated node: {}", violation.text);
        }
    };
    slot.name_as(format!("rbs-{node}"));
    let (closed, hang_up) = internal_port::closed_flag();
    let request = PortRequest {
        channel,
        port_name: node.to_owned(),
        options: PortOptions::FD | PortOptions::TRANSMIT_ONLY,
        deadline: None,
    };
    let port = match internal_port::open(&mut slot, hang_up, request) {
        Ok(port) => port,
        Err(NotOpened::Stopped) => return report(Err("the hub is stopping".into())),
        Err(not_opened) => {
            report(Err(format!("simulated node {node} not attached: {not_opened}")));
            return error!(node, channel, "simulated node not attached: {not_opened}");
        }
    };
    let count = jobs.len();
    for (index, job) in jobs {
        let state = Arc::clone(job.state());
        let (period_ns, start_delay_ns) = match state.cycle_ms {
            Some(ms) => (ms.saturating_mul(1_000_000), state.start_delay_ms.saturating_mul(1_000_000)),
            None => (EVENT_PERIOD.as_nanos() as u64, 0),
        };
        let producer: Box<dyn FrameProducer> = Box::new(job);
        let origin = Some(sim.origin.clone());
        let add = |reply| CyclicRequest::Add { port: port.port, producer, period_ns, start_delay_ns, origin, reply };
        match internal_port::ask_cyclic(sessions, slot.id(), add) {
            Ok(id) => {
                let _ = sim.messages[index].job.set((slot.id(), id));
            }
            Err(JobNotRun::Refused(e)) => {
                error!(node, message = %sim.messages[index].state.name, "message not simulated: {e}")
            }
            Err(JobNotRun::Stopped) => return report(Err("the hub is stopping".into())),
        }
    }
    info!(node, channel, messages = count, "simulated node attached");
    report(Ok(()));
    // SYNC POINT with RestBus::remove's Release store.
    let stop = || sessions.stopping() || closed.load(Ordering::Acquire) || sim.stop.load(Ordering::Acquire);
    while !stop() {
        let Some(item) = port.outbox.take_timeout(LOOK) else { continue };
        port.outbox.took();
        match item {
            Outbound::TxDropped { reason, dropped, .. } => {
                warn!(node, dropped, "simulated messages {}", reason.describe())
            }
            Outbound::Error { text, fatal, .. } => {
                warn!(node, "the bus reports: {text}");
                if fatal {
                    break;
                }
            }
            Outbound::Goodbye { .. } => break,
            _ => {}
        }
    }
    let why = if sim.stop.load(Ordering::Acquire) { "its simulation was removed" } else { "the hub is stopping" };
    slot.detach(why);
    port.outbox.close();
}

#[cfg(test)]
mod tests {
    use super::*;
    use fieldhub_rbs::engine::{ChecksumSpec, CounterSpec};
    use fieldhub_rbs::plan::NodeSelection;

    #[test]
    fn a_counter_without_a_range_counts_through_every_value_of_its_signal() {
        let dbc = fieldhub_rbs::load::load(
            b"VERSION \"\"\n\nNS_ :\n\nBS_:\n\nBU_: E\n\nBO_ 256 Status: 8 E\n SG_ Crc : 0|8@1+ (1,0) [0|255] \"\" E\n \
              SG_ Alive : 8|4@1+ (1,0) [0|15] \"\" E\n",
        )
        .unwrap();
        let counter = |min, max| CounterSpec { message: "Status".into(), signal: "Alive".into(), min, max };
        let checksum = ChecksumSpec {
            message: "Status".into(),
            signal: "Crc".into(),
            algorithm: Algorithm::SaeJ1850,
            data_id: Some(7),
        };
        let setup = |counters| Setup {
            nodes: NodeSelection::Except(Vec::new()),
            default_cycle_ms: None,
            counters,
            checksums: vec![checksum.clone()],
        };
        let open = Protection::of(&dbc, &setup(vec![counter(None, None)]));
        assert!(matches!(&open[0], Protection::Counter { min: 0, max: 15, .. }), "{open:?}");
        assert!(matches!(&open[1], Protection::Checksum { data_id: Some(7), .. }), "{open:?}");
        let given = Protection::of(&dbc, &setup(vec![counter(Some(1), Some(14))]));
        assert!(matches!(&given[0], Protection::Counter { min: 1, max: 14, .. }), "{given:?}");
        assert_eq!(given[0].message(), "Status");
    }

    #[test]
    fn a_simulation_that_does_not_fit_its_dbc_is_refused_naming_its_place_and_the_reason() {
        let dir = std::env::temp_dir().join(format!("fieldhub-rbs-setup-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let dbc = dir.join("one.dbc");
        std::fs::write(&dbc, "VERSION \"\"\n\nNS_ :\n\nBS_:\n\nBU_: E\n\nBO_ 256 Status: 8 E\n").unwrap();
        let config = |nodes: &[&str], except: &[&str]| -> RbsConfig {
            let table = format!(
                "dbc = {:?}\nchannel = \"can0\"\nnodes = {nodes:?}\nexcept = {except:?}\n",
                dbc.display().to_string()
            );
            toml::from_str(&table).unwrap()
        };
        let refused = Prepared::all(&[config(&["E"], &[]), config(&["E"], &["E"])]).err().expect("refused");
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(refused.to_string(), "rbs[1]: give nodes or except, not both");
    }
}
