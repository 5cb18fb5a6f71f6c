//! Rest-bus simulations the hub runs (`[[rbs]]`, `docs/rest-bus.md`): each
//! simulated node of a DBC is one hub-internal client with one port on the
//! simulation's channel, named as the node, whose messages are cyclic jobs
//! the bus runs on bus time (`fieldhub_rbs::engine` builds the frames).
//! The control API reads and changes the messages through [`RestBus`].
//!
//! Invariants:
//! - A DBC that does not load, a node it does not define or a rule that
//!   does not fit stops the hub's start with an error naming `rbs[i]`.
//! - One thread per node: it opens the port, adds its jobs, then only
//!   takes what the bus reports to the port (dropped frames are logged)
//!   until the hub stops. The frames themselves never pass through it.
//! - A message without a cycle is a job of [`EVENT_PERIOD`] that sends only
//!   on change; setting one of its signals runs it at once (the job is
//!   restarted with no delay), so it goes on the bus at the next bus step.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

use fieldhub_bus::cyclic::{FrameProducer, JobError, JobId};
use fieldhub_bus::inbox::{ClientId, CyclicRequest, Inbound, InboxSender};
use fieldhub_bus::outbox::Outbound;
use fieldhub_proto::wire::PortOptions;
use fieldhub_rbs::engine::{EngineError, MessageJob, MessageState, Simulation};
use tracing::{error, info, warn};

use crate::config::RbsConfig;
use crate::session::peer_user::PeerOrigin;
use crate::session::Sessions;
use crate::transport::internal_port::{self, NotOpened, PortRequest, LOOK};

/// The period of a message sent on change only: its job runs when a
/// signal changes, and this long after otherwise (sending nothing then).
pub const EVENT_PERIOD: Duration = Duration::from_secs(3600);

/// How long a node's thread waits for the bus to answer its jobs.
const JOB_ANSWER: Duration = Duration::from_secs(5);

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
    #[error("rbs[{index}]: {0}", index = .0)]
    Setup(usize, String),
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
    pub dbc: PathBuf,
    pub messages: Vec<SimMessage>,
}

/// Every simulation of the hub.
pub struct RestBus {
    pub sims: Vec<RunningSim>,
    inbox: InboxSender,
}

/// One node's messages: (simulation, node, [(message index, job)]).
type NodeJobs = (usize, String, Vec<(usize, MessageJob)>);

/// A simulation loaded and built, its nodes not attached yet.
pub struct Prepared {
    channel: String,
    dbc: PathBuf,
    jobs: Vec<MessageJob>,
}

impl Prepared {
    /// Load and build every `[[rbs]]` table's simulation.
    pub fn all(configs: &[RbsConfig]) -> Result<Vec<Self>, RbsError> {
        configs.iter().enumerate().map(|(index, config)| Self::one(index, config)).collect()
    }

    fn one(index: usize, config: &RbsConfig) -> Result<Self, RbsError> {
        let path = config.dbc.clone();
        let setup = config.setup().map_err(|why| RbsError::Setup(index, why))?;
        let bytes = std::fs::read(&path).map_err(|source| RbsError::Read { index, path: path.clone(), source })?;
        let dbc =
            fieldhub_rbs::load::load(&bytes).map_err(|source| RbsError::Load { index, path: path.clone(), source })?;
        let sim =
            Simulation::build(&dbc, &setup).map_err(|source| RbsError::Engine { index, path: path.clone(), source })?;
        Ok(Self { channel: config.channel.clone(), dbc: path, jobs: sim.jobs })
    }
}

impl RestBus {
    /// Attach every simulation's nodes and start their messages. The
    /// returned threads end when the hub stops.
    pub fn start(
        prepared: Vec<Prepared>,
        sessions: &Arc<Sessions>,
    ) -> std::io::Result<(Arc<Self>, Vec<JoinHandle<()>>)> {
        let mut sims = Vec::new();
        let mut nodes: Vec<NodeJobs> = Vec::new();
        for (s, p) in prepared.into_iter().enumerate() {
            let mut messages = Vec::new();
            for (m, job) in p.jobs.into_iter().enumerate() {
                messages.push(SimMessage { state: Arc::clone(job.state()), job: OnceLock::new() });
                let node = job.state().node.clone();
                match nodes.iter_mut().find(|(sim, name, _)| *sim == s && *name == node) {
                    Some((_, _, jobs)) => jobs.push((m, job)),
                    None => nodes.push((s, node, vec![(m, job)])),
                }
            }
            sims.push(RunningSim { channel: p.channel, dbc: p.dbc, messages });
        }
        let rest_bus = Arc::new(Self { sims, inbox: sessions.inbox.clone() });
        let mut threads = Vec::new();
        for (sim, node, jobs) in nodes {
            let (rest_bus, sessions) = (Arc::clone(&rest_bus), Arc::clone(sessions));
            let thread = std::thread::Builder::new()
                .name(format!("fh-rbs-{node}"))
                .spawn(move || run_node(&rest_bus, sim, &node, jobs, &sessions))?;
            threads.push(thread);
        }
        Ok((rest_bus, threads))
    }

    /// A message of simulation `sim`, by name.
    pub fn message(&self, sim: usize, name: &str) -> Option<&SimMessage> {
        self.sims.get(sim)?.messages.iter().find(|m| m.state.name == name)
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
        let _ = self.inbox.send(Inbound::Cyclic { client, request });
    }
}

/// A node's thread: attach its port, add its jobs, take its reports.
fn run_node(rest_bus: &RestBus, sim: usize, node: &str, jobs: Vec<(usize, MessageJob)>, sessions: &Arc<Sessions>) {
    let channel = &rest_bus.sims[sim].channel;
    let mut slot = match sessions.admit("rest-bus simulation", format!("rbs:{node}"), PeerOrigin::Operator) {
        Ok(slot) => slot,
        Err(violation) => return error!(node, "the hub cannot attach the simulated node: {}", violation.text),
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
        Err(NotOpened::Stopped) => return,
        Err(not_opened) => return error!(node, channel, "simulated node not attached: {not_opened}"),
    };
    let count = jobs.len();
    let (answers, answered) = crossbeam_channel::bounded(count);
    for (index, job) in jobs {
        let state = Arc::clone(job.state());
        let (period_ns, start_delay_ns) = match state.cycle_ms {
            Some(ms) => (ms.saturating_mul(1_000_000), state.start_delay_ms.saturating_mul(1_000_000)),
            None => (EVENT_PERIOD.as_nanos() as u64, 0),
        };
        let answers = answers.clone();
        let reply = Box::new(move |result| {
            let _ = answers.try_send((index, result));
        });
        let producer: Box<dyn FrameProducer> = Box::new(job);
        let request = CyclicRequest::Add { port: port.port, producer, period_ns, start_delay_ns, reply };
        if sessions.inbox.send(Inbound::Cyclic { client: slot.id(), request }).is_err() {
            return;
        }
    }
    for _ in 0..count {
        match answered.recv_timeout(JOB_ANSWER) {
            Ok((index, Ok(id))) => {
                let _ = rest_bus.sims[sim].messages[index].job.set((slot.id(), id));
            }
            Ok((index, Err(e))) => {
                error!(node, message = %rest_bus.sims[sim].messages[index].state.name, "message not simulated: {e}")
            }
            Err(_) => break,
        }
    }
    info!(node, channel, messages = count, "simulated node attached");
    let stop = || sessions.stopping() || closed.load(std::sync::atomic::Ordering::Acquire);
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
    slot.detach("the hub is stopping");
    port.outbox.close();
}
