//! Shared-memory clients (`spec/shm.md`): session setup over a unix socket,
//! then rings the bus thread reads and writes itself.
//!
//! - [`ShmListener`]: the session socket `DIR/NAME.sock` in the user's
//!   private directory. Per connection a session thread performs the
//!   `HELLO`/`WELCOME` handshake of `spec/protocol.md`, creates the client's
//!   segment, attaches the client to the bus, and passes the segment and
//!   the hub's bell segment with `WELCOME` (`SCM_RIGHTS`). It then only
//!   watches the socket: its end (a client that closed, crashed or was
//!   killed) is the client's detach, at once.
//! - [`ShmLink`]: the bus's side of one client's segment; behind the
//!   client's [`Outbox`](crate::queues::Outbox) it writes replies and frames
//!   into the to-client ring and rings the client's doorbell.
//! - [`ShmPeer`]: the bus's reader of one client's to-hub ring: it turns
//!   messages into the same [`Inbound`] requests a stream session forwards,
//!   taking transmit credit per frame and leaving frames in the ring while
//!   none is left (the client's ring fills and its sender waits).
//!
//! No thread sits between a shared-memory client and the bus: the bus thread
//! reads every to-hub ring and writes every to-client ring directly, and
//! sleeps on the hub's one doorbell when there is nothing to do.

use std::io::{BufReader, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use fieldhub_proto::limits::{MAX_MESSAGE_LEN, PROTOCOL_VERSION};
use fieldhub_proto::stream::MessageReader;
use fieldhub_proto::wire::{self, ErrorCode, Message, Welcome};
use fieldhub_shm::layout::TO_CLIENT_SLOTS;
use fieldhub_shm::ring::slots_for;
use fieldhub_shm::{socket, ClientSegment, Consumer, Producer, SegmentHeader};
use tracing::{info, warn};

use super::session::{handshake, refuse, SessionContext, Violation, MAX_CLIENTS};
use crate::credit::{TxCredit, TX_CREDITS};
use crate::queues::{ClientId, Inbound, Outbound, Outbox, Refused};

/// Slots of a to-client ring kept free of frames for replies: the largest
/// message (a `STATS` document of `MAX_MESSAGE_LEN`, 2049 slots) plus room
/// for a few hundred small replies.
pub const CONTROL_RESERVE_SLOTS: u32 = 2304;
/// Slots of a to-client ring frames may fill: the receive buffer of a
/// shared-memory port before its overflow policy applies (a CAN or CAN FD
/// frame takes one slot).
pub const FRAME_SHARE_SLOTS: u32 = TO_CLIENT_SLOTS - CONTROL_RESERVE_SLOTS;
/// Messages the bus takes from one client's ring per round, so one busy
/// client cannot starve the others or postpone the channels' service.
pub const PEER_BUDGET: usize = 256;

/// The session socket of a hub serving shared memory.
pub struct ShmListener {
    listener: UnixListener,
    path: PathBuf,
}

impl ShmListener {
    /// Listen as `shm://name`: create the private directory, refuse a name
    /// another live hub serves, replace a dead hub's socket.
    pub fn bind(name: &str) -> std::io::Result<Self> {
        let path =
            socket::socket_path(name).map_err(|why| std::io::Error::new(std::io::ErrorKind::InvalidInput, why))?;
        if let Some(dir) = path.parent() {
            socket::ensure_private_dir(dir)?;
        }
        if std::fs::symlink_metadata(&path).is_ok() {
            if UnixStream::connect(&path).is_ok() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::AddrInUse,
                    format!("another hub already serves shm://{name} ({}); choose another name", path.display()),
                ));
            }
            std::fs::remove_file(&path)?;
        }
        let listener = UnixListener::bind(&path)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        Ok(Self { listener, path })
    }

    /// The session socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Accept until `stopping` is set, serving each client on a session
    /// thread; `bell` is the hub's bell segment passed to every client.
    pub fn accept_loop(self, ctx: Arc<SessionContext>, bell: Arc<OwnedFd>, stopping: Arc<AtomicBool>) {
        for stream in self.listener.incoming() {
            // SYNC POINT with Hub::shutdown: it sets the flag, then connects
            // once to wake this blocking accept.
            if stopping.load(Ordering::Acquire) {
                break;
            }
            match stream {
                Ok(stream) => {
                    let (ctx, bell) = (Arc::clone(&ctx), Arc::clone(&bell));
                    let spawned = std::thread::Builder::new()
                        .name("fh-shm-session".into())
                        .spawn(move || serve(stream, ctx, bell));
                    if let Err(e) = spawned {
                        warn!("cannot start a session thread: {e}");
                    }
                }
                Err(e) => warn!("accept failed: {e}"),
            }
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Serve one shared-memory client's session until its socket closes.
fn serve(stream: UnixStream, ctx: Arc<SessionContext>, bell: Arc<OwnedFd>) {
    let peer = "shm";
    if ctx.live_clients.fetch_add(1, Ordering::AcqRel) >= MAX_CLIENTS {
        let text = format!("the hub serves at most {MAX_CLIENTS} clients");
        refuse(stream, peer, Violation::new(ErrorCode::HubFull, text));
        ctx.live_clients.fetch_sub(1, Ordering::AcqRel);
        return;
    }
    run(stream, &ctx, &bell);
    ctx.live_clients.fetch_sub(1, Ordering::AcqRel);
}

fn run(stream: UnixStream, ctx: &SessionContext, bell: &OwnedFd) {
    let peer = "shm";
    let (Ok(reading), Ok(for_link), Ok(for_hang_up)) = (stream.try_clone(), stream.try_clone(), stream.try_clone())
    else {
        return;
    };
    let mut reader = MessageReader::new(BufReader::new(reading));
    let name = match handshake(&mut reader, ctx) {
        Ok(name) => name,
        Err(violation) => return refuse(stream, peer, violation),
    };
    let client = ctx.next_client.fetch_add(1, Ordering::Relaxed);
    let (segment, segment_fd) = match ClientSegment::create(SegmentHeader::standard(client)) {
        Ok(created) => created,
        Err(e) => {
            let text = format!("the hub cannot create a shared-memory segment: {e}");
            return refuse(stream, peer, Violation::new(ErrorCode::Internal, text));
        }
    };
    let link = Arc::new(ShmLink::new(segment, Starts::default(), Some(for_link)));
    // Only the bus holds the link: when it lets go of the client (removed,
    // rejected, the hub stops), the link's drop closes the socket, which
    // ends this thread's watch. This thread must not keep it alive.
    let watched = Arc::downgrade(&link);
    let hang_up = Box::new(move || {
        let _ = for_hang_up.shutdown(std::net::Shutdown::Both);
    });
    // Nobody waits on this credit: the bus takes it with `try_acquire`.
    let credit = Arc::new(TxCredit::for_current_thread());
    let attach = Inbound::Attach { client, name: name.clone(), outbox: Outbox::shm(link), hang_up, credit };
    // Attached before WELCOME: whatever the client writes into its ring
    // after WELCOME finds the bus ready for it.
    if ctx.inbox.send(attach).is_err() {
        return;
    }
    let mut welcome = Vec::new();
    wire::encode(
        &mut welcome,
        &Message::Welcome(Welcome { version: PROTOCOL_VERSION, client_id: client, hub_name: &ctx.hub_name }),
    );
    let reason = match socket::send_with_fds(&stream, &welcome, &[segment_fd.as_fd(), bell.as_fd()]) {
        Ok(()) => {
            // The mappings keep the memory; the descriptors are not needed.
            drop(segment_fd);
            info!(client, %name, "client connected over shared memory");
            watch(&stream)
        }
        Err(e) => format!("cannot send WELCOME: {e}"),
    };
    if let Some(link) = watched.upgrade() {
        link.end();
    }
    info!(client, %name, "client disconnected: {reason}");
    let _ = ctx.inbox.send(Inbound::Detach { client, reason });
}

/// Block until the session socket ends; returns why, for the log. Nothing
/// travels on it after `WELCOME`; its end is how a crash is noticed at once.
fn watch(mut stream: &UnixStream) -> String {
    let _ = stream.set_read_timeout(None);
    let mut byte = [0u8; 64];
    loop {
        match stream.read(&mut byte) {
            Ok(0) => return "connection closed".into(),
            Ok(_) => {
                warn!("a shared-memory client wrote to its session socket, which carries nothing after WELCOME");
                return "the client broke the session protocol (bytes on the session socket)".into();
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return format!("connection lost: {e}"),
        }
    }
}

/// The bus's side of one shared-memory client: its segment and the
/// producer state of the to-client ring.
pub struct ShmLink {
    segment: ClientSegment,
    /// Where the bus takes up the to-hub ring (past a handshake that went
    /// through the ring itself, for ivshmem).
    to_hub_start: u32,
    /// Taken only by the bus thread (the ring's single producer); it exists
    /// so `Outbox` stays `Clone + Sync`, and is never contended.
    to_client: Mutex<ToClient>,
    /// Set when the session socket ended: the client is going.
    gone: AtomicBool,
    /// The session socket, shut down when the bus lets go of the client
    /// (`None` for ivshmem, whose poller notices the link's drop instead).
    socket: Option<UnixStream>,
}

/// Ring positions a link starts from: 0 both ways for a fresh segment; past
/// `HELLO` and `WELCOME` when the handshake went through the rings.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Starts {
    pub to_hub_tail: u32,
    pub to_client_head: u32,
}

struct ToClient {
    producer: Producer,
    /// Encoding buffer, reused: writing a frame allocates nothing.
    scratch: Vec<u8>,
    /// Something was published since the client's doorbell last rang.
    unrung: bool,
}

impl std::fmt::Debug for ShmLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShmLink").field("client", &self.segment.header().client_id).finish_non_exhaustive()
    }
}

impl ShmLink {
    pub(crate) fn new(segment: ClientSegment, starts: Starts, socket: Option<UnixStream>) -> Self {
        let to_client = ToClient {
            producer: Producer::starting_at(starts.to_client_head),
            scratch: Vec::with_capacity(256),
            unrung: false,
        };
        let gone = AtomicBool::new(false);
        Self { segment, to_hub_start: starts.to_hub_tail, to_client: Mutex::new(to_client), gone, socket }
    }

    /// The client's segment.
    pub(crate) fn segment(&self) -> &ClientSegment {
        &self.segment
    }

    /// The client is going (its session ended): nothing more is written.
    pub(crate) fn end(&self) {
        // SYNC POINT with `push`'s Acquire load.
        self.gone.store(true, Ordering::Release);
    }

    fn to_client(&self) -> MutexGuard<'_, ToClient> {
        self.to_client.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether frames may take another slot.
    pub fn has_frame_room(&self) -> bool {
        let out = self.to_client();
        out.producer.used_slots(&self.segment.to_client()).is_ok_and(|used| used < FRAME_SHARE_SLOTS)
    }

    /// Write a frame if the frame share has room for it.
    pub fn try_frame(&self, item: &Outbound) -> Result<(), Refused> {
        self.push(item, FRAME_SHARE_SLOTS)
    }

    /// Write a reply or report, using the reserve if need be.
    pub fn try_control(&self, item: &Outbound) -> Result<(), Refused> {
        self.push(item, TO_CLIENT_SLOTS)
    }

    fn push(&self, item: &Outbound, limit: u32) -> Result<(), Refused> {
        // SYNC POINT with the session thread's Release store on EOF.
        if self.gone.load(Ordering::Acquire) {
            return Err(Refused::Gone);
        }
        let ring = self.segment.to_client();
        let mut out = self.to_client();
        let ToClient { producer, scratch, unrung } = &mut *out;
        scratch.clear();
        item.encode(scratch);
        let fits = match producer.used_slots(&ring) {
            Ok(used) => used + slots_for(scratch.len()) <= limit,
            Err(e) => return Err(self.corrupt(&e.to_string())),
        };
        if fits {
            match producer.try_push(&ring, scratch) {
                Ok(true) => {
                    *unrung = true;
                    return Ok(());
                }
                Ok(false) => {}
                Err(e) => return Err(self.corrupt(&e.to_string())),
            }
        }
        // Full: make sure a sleeping client hears of what is waiting, or
        // it would never make room.
        if std::mem::take(unrung) {
            self.segment.client_bell().ring();
        }
        Err(Refused::Full)
    }

    /// The client broke its ring's indices: it is cut off.
    fn corrupt(&self, why: &str) -> Refused {
        warn!(client = self.segment.header().client_id, "disconnecting client: its to-client ring is corrupt: {why}");
        // SYNC POINT with `push`'s Acquire load (same thread today; the
        // flag is also set by the session thread).
        self.gone.store(true, Ordering::Release);
        if let Some(socket) = &self.socket {
            let _ = socket.shutdown(std::net::Shutdown::Both);
        }
        Refused::Gone
    }

    /// Ring the client's doorbell if anything was published since the last
    /// ring (once per bus round, not per message).
    pub fn ring_client(&self) {
        if std::mem::take(&mut self.to_client().unrung) {
            self.segment.client_bell().ring();
        }
    }
}

impl Drop for ShmLink {
    fn drop(&mut self) {
        // The bus has let go of the client (removed, rejected, or the hub
        // stops): its session thread and the client see the socket end.
        if let Some(socket) = &self.socket {
            let _ = socket.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// How reading a client's ring ended.
pub enum PeerEnd {
    /// The client broke the protocol: tell it why and cut it off.
    Violation(ErrorCode, String),
    /// The client said `GOODBYE`.
    Left(String),
}

/// The bus's reader of one shared-memory client's to-hub ring.
pub struct ShmPeer {
    pub client: ClientId,
    link: Arc<ShmLink>,
    credit: Arc<TxCredit>,
    consumer: Consumer,
    /// Copy of the message at the ring's tail, reused.
    body: Vec<u8>,
    /// Records of the `FRAMES` message at the tail already forwarded (a
    /// batch waits in the ring, partly taken, while credit is short).
    taken: usize,
    /// Set when the session socket ended: the ring is drained, then the
    /// client detaches with this reason.
    pub leaving: Option<String>,
}

impl ShmPeer {
    fn new(client: ClientId, link: Arc<ShmLink>, credit: Arc<TxCredit>) -> Self {
        let consumer = Consumer::starting_at(link.to_hub_start);
        Self { client, link, credit, consumer, body: Vec::new(), taken: 0, leaving: None }
    }

    /// Whether a message waits that can be taken now.
    pub fn ready(&self) -> bool {
        self.consumer.has_message(&self.link.segment.to_hub()) && self.credit.in_flight() < TX_CREDITS
    }

    /// Whether the ring is empty.
    pub fn drained(&self) -> bool {
        !self.consumer.has_message(&self.link.segment.to_hub())
    }

    /// Turn up to `budget` waiting messages into requests, appended to
    /// `out`. Returns whether anything was taken from the ring.
    pub fn poll(&mut self, out: &mut Vec<Inbound>, budget: usize) -> Result<bool, PeerEnd> {
        let ring = self.link.segment.to_hub();
        let client = self.client;
        let mut took = false;
        let result = loop {
            if out.len() >= budget {
                break Ok(());
            }
            let slots = match self.consumer.peek(&ring, MAX_MESSAGE_LEN as usize, &mut self.body) {
                Ok(Some(slots)) => slots,
                Ok(None) => break Ok(()),
                Err(e) => break Err(PeerEnd::Violation(ErrorCode::Malformed, format!("corrupt to-hub ring: {e}"))),
            };
            let message = match wire::decode(&self.body) {
                Ok(message) => message,
                Err(e) => break Err(PeerEnd::Violation(e.code(), e.to_string())),
            };
            match message {
                Message::Frames(batch) => {
                    // A batch is checked whole before any of it is taken.
                    if self.taken == 0 {
                        if let Some(index) = batch.iter().position(|r| r.frame.is_echo()) {
                            let text = format!("frame {index}: the echo flag is set by the hub only");
                            break Err(PeerEnd::Violation(ErrorCode::InvalidFrame, text));
                        }
                    }
                    for record in batch.iter().skip(self.taken) {
                        if out.len() >= budget || !self.credit.try_acquire() {
                            break;
                        }
                        out.push(Inbound::Frame { client, port: record.port, frame: record.frame });
                        self.taken += 1;
                        took = true;
                    }
                    if self.taken < batch.len() {
                        break Ok(());
                    }
                    self.taken = 0;
                }
                Message::OpenPort(open) => out.push(Inbound::OpenPort {
                    client,
                    request: open.request,
                    options: open.options,
                    channel: open.channel.to_owned(),
                    port_name: open.port_name.to_owned(),
                }),
                Message::ClosePort { port } => out.push(Inbound::ClosePort { client, port }),
                Message::Ping { nonce } => out.push(Inbound::Ping { client, nonce }),
                Message::StatsRequest { request } => out.push(Inbound::Stats { client, request }),
                Message::Pong { .. } => {}
                Message::Goodbye(report) => {
                    self.consumer.advance(&ring, slots);
                    break Err(PeerEnd::Left(format!("client said goodbye: {}", report.text)));
                }
                other => {
                    let text = format!("{} is not allowed from a client", other.type_name());
                    break Err(PeerEnd::Violation(ErrorCode::UnexpectedMessage, text));
                }
            }
            self.consumer.advance(&ring, slots);
            took = true;
        };
        if took {
            // Frees slots: a client waiting for room hears of it.
            self.link.segment.space_bell().ring();
        }
        result.map(|()| took)
    }
}

/// The bus's shared-memory clients.
#[derive(Default)]
pub struct ShmPeers {
    pub peers: Vec<ShmPeer>,
    /// Requests taken from one ring, handled before the next ring (reused).
    pub requests: Vec<Inbound>,
}

impl ShmPeers {
    /// Start reading the ring of a client that attaches over shared memory.
    pub fn register(&mut self, request: &Inbound) {
        if let Inbound::Attach { client, outbox, credit, .. } = request {
            if let Some(link) = outbox.shm_link() {
                self.peers.push(ShmPeer::new(*client, Arc::clone(link), Arc::clone(credit)));
            }
        }
    }

    /// A shared-memory client's session ended: drain its ring before it
    /// detaches. Returns false for other clients (detach them at once).
    pub fn leave(&mut self, client: ClientId, reason: &str) -> bool {
        match self.peers.iter_mut().find(|p| p.client == client) {
            Some(peer) => {
                peer.leaving.get_or_insert_with(|| reason.to_owned());
                true
            }
            None => false,
        }
    }

    /// Whether any ring has a message that can be taken now.
    pub fn any_ready(&self) -> bool {
        self.peers.iter().any(ShmPeer::ready)
    }

    /// Ring the doorbell of every client that got messages this round.
    pub fn ring_clients(&self) {
        for peer in &self.peers {
            peer.link.ring_client();
        }
    }
}
