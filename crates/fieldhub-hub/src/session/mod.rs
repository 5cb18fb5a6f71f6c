//! The session layer: everything about a client that does not depend on how
//! its bytes travel. Every transport — TCP and unix sockets in the reactor,
//! `shm://` session sockets, ivshmem regions, the hub's own SocketCAN ports —
//! attaches a client through this module and nothing else:
//!
//! - [`Sessions::admit`] counts a client against [`MAX_CLIENTS`] and gives it
//!   a [`ClientSlot`]: its id, its handshake ([`ClientSlot::handshake`]:
//!   `HELLO`, and on a hub with a token `CHALLENGE` and `AUTH`; `greeting.rs`),
//!   its `WELCOME`, its attach to the bus. Dropping the slot detaches the
//!   client from the bus and uncounts it, so no transport adjusts a count by
//!   hand and no ending path can forget one.
//! - [`request_of`] is the one mapping from a decoded client message to what
//!   the bus is asked ([`Request`]); [`FrameCursor`] forwards a `FRAMES`
//!   batch record by record as transmit credit allows, resuming where it
//!   stopped.
//! - [`Violation`] is a protocol error to report (`REFUSE` during the
//!   handshake, a fatal `ERROR` after it) with the same text everywhere.
//!
//! Invariants: a client's requests reach the bus in the order it sent them,
//! and its `Detach` after all of them; a client is counted from its first
//! byte to its slot's drop.

pub mod bridge_port;
pub mod credentials;
pub mod greeting;
pub mod peer_key;
pub mod peer_user;

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fieldhub_proto::limits::PROTOCOL_VERSION;
use fieldhub_proto::wire::{
    self, CheckedRecord, ErrorCode, ErrorReport, FrameBatch, FramesReader, Message, RecordPosition, SessionOptions,
    Welcome,
};
use fieldhub_proto::Frame;
use tracing::{debug, info, warn};

use crate::session::credentials::{Access, Credentials, Refused};
use crate::session::peer_key::{held_back, PeerKey, RefusalLog};
use crate::session::peer_user::PeerOrigin;
use fieldhub_bus::auth_refusals::AuthTransport;
use fieldhub_bus::credit::TxCredit;
use fieldhub_bus::inbox::{ClientId, HangUp, Inbound, InboxSender, Intake, NotQueued};
use fieldhub_bus::outbox::Outbox;

pub use fieldhub_bus::names::printable;
pub use fieldhub_bus::CLIENT_LOG;

/// How long a new connection has to send its `HELLO`.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Most clients connected at once, handshakes under way included.
pub const MAX_CLIENTS: usize = 4096;
/// Most connections in their handshake at once (accepted, no `HELLO`
/// accepted yet): strangers that connect and say nothing cannot take the
/// places of clients that present a token. The reactor makes room for a
/// new connection by closing the oldest that has not sent its `HELLO`,
/// and once half of them are taken holds each peer to
/// [`MAX_HANDSHAKES_PER_PEER`] (`transport/reactor/pending.rs`).
pub const MAX_HANDSHAKES: usize = 128;
/// A peer's share of the handshake slots (`peer_key.rs`: a local user, or
/// a remote address) once they are scarce: one party alone cannot fill
/// them.
pub const MAX_HANDSHAKES_PER_PEER: usize = 16;

/// What every session of one hub shares.
pub struct Sessions {
    pub inbox: InboxSender,
    pub hub_name: String,
    pub credentials: Credentials,
    /// The hub runs in virtual time: synchronised sessions are welcome.
    pub virtual_time: bool,
    next_client: AtomicU32,
    live: AtomicUsize,
    /// Slots whose client has no name yet: handshakes under way.
    handshaking: AtomicUsize,
    /// Clients refused for a wrong token (an `AUTH` that proves none of
    /// the hub's tokens), since the hub started.
    wrong_tokens: AtomicU64,
    /// Refused connections, logged once per peer per interval.
    refusals: Mutex<RefusalLog>,
    /// Set when the hub shuts down.
    pub stopping: Arc<AtomicBool>,
}

/// What the hub sends a client after one message of its handshake.
pub enum Answer {
    /// `CHALLENGE` (encoded): the client owes its `AUTH`.
    Challenge(Vec<u8>),
    /// The client is admitted: attach it and send its `WELCOME`.
    Welcome,
}

/// A protocol violation: what to tell the client and the log.
#[derive(Debug)]
pub struct Violation {
    pub code: ErrorCode,
    pub text: String,
}

impl Violation {
    pub fn new(code: ErrorCode, text: impl Into<String>) -> Self {
        Self { code, text: text.into() }
    }

    /// `REFUSE` carrying this violation, encoded.
    pub fn refusal(&self) -> Vec<u8> {
        self.encode(Message::Refuse)
    }

    /// A fatal `ERROR` carrying this violation, encoded.
    pub fn fatal_error(&self) -> Vec<u8> {
        self.encode(Message::Error)
    }

    fn encode<'a>(&'a self, message: fn(ErrorReport<'a>) -> Message<'a>) -> Vec<u8> {
        let mut bytes = Vec::new();
        let report = ErrorReport { code: self.code as u16, request: 0, fatal: true, text: &self.text };
        wire::encode(&mut bytes, &message(report));
        bytes
    }
}

impl From<wire::DecodeError> for Violation {
    fn from(e: wire::DecodeError) -> Self {
        Self::new(e.code(), e.to_string())
    }
}

impl Sessions {
    pub fn new(
        inbox: InboxSender,
        hub_name: String,
        credentials: Credentials,
        virtual_time: bool,
        stopping: Arc<AtomicBool>,
    ) -> Self {
        Self {
            inbox,
            hub_name,
            credentials,
            virtual_time,
            next_client: AtomicU32::new(1),
            live: AtomicUsize::new(0),
            handshaking: AtomicUsize::new(0),
            wrong_tokens: AtomicU64::new(0),
            refusals: Mutex::new(RefusalLog::default()),
            stopping,
        }
    }

    /// Log the refusal of a connection from `key` (at `peer`), unless this
    /// peer's refusals were logged less than an interval ago: then it is
    /// counted, and the next line says how many were not logged.
    pub fn log_refusal(&self, key: PeerKey, peer: &str, text: &str) {
        let mut refusals = self.refusals.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(held) = refusals.refused(key, Instant::now()) {
            // Relaxed: a count for the log.
            let wrong = match self.wrong_tokens.load(Ordering::Relaxed) {
                0 => String::new(),
                n => format!("; wrong tokens refused since the hub started: {n}"),
            };
            warn!(peer, from = %key, "refusing connection: {text}{}{wrong}", held_back(held));
        }
    }

    /// Count a new client; refused when the hub serves [`MAX_CLIENTS`].
    /// `via` names the transport for the log ("TCP", "shared memory");
    /// `origin` is who connected, for a `HELLO` without a token.
    pub fn admit(
        self: &Arc<Self>,
        via: &'static str,
        peer: impl Into<String>,
        origin: PeerOrigin,
    ) -> Result<ClientSlot, Violation> {
        self.admit_from(via, peer, origin, PeerKey::of(&origin))
    }

    /// [`admit`](Self::admit) a client whose party (`key`) the caller
    /// found already.
    pub fn admit_from(
        self: &Arc<Self>,
        via: &'static str,
        peer: impl Into<String>,
        origin: PeerOrigin,
        key: PeerKey,
    ) -> Result<ClientSlot, Violation> {
        if self.live.fetch_add(1, Ordering::AcqRel) >= MAX_CLIENTS {
            self.live.fetch_sub(1, Ordering::AcqRel);
            return Err(Violation::new(ErrorCode::HubFull, format!("the hub serves at most {MAX_CLIENTS} clients")));
        }
        if self.handshaking.fetch_add(1, Ordering::AcqRel) >= MAX_HANDSHAKES {
            self.handshaking.fetch_sub(1, Ordering::AcqRel);
            self.live.fetch_sub(1, Ordering::AcqRel);
            return Err(Violation::new(
                ErrorCode::HubFull,
                format!("{MAX_HANDSHAKES} connections are in their handshake already; try again in a moment"),
            ));
        }
        let id = self.next_client.fetch_add(1, Ordering::Relaxed);
        Ok(ClientSlot {
            sessions: Arc::clone(self),
            id,
            via,
            peer: peer.into(),
            origin,
            key,
            name: None,
            // The hub's own clients (SocketCAN, SIL Kit) send no HELLO.
            access: Access::Full,
            synchronized: false,
            ahead: false,
            challenged: None,
            attached: false,
            detached: false,
        })
    }

    /// Clients counted now (handshakes under way included).
    pub fn live(&self) -> usize {
        self.live.load(Ordering::Acquire)
    }

    /// Whether the hub is shutting down.
    pub fn stopping(&self) -> bool {
        // SYNC POINT with Hub::shutdown's Release store.
        self.stopping.load(Ordering::Acquire)
    }
}

/// The transport a handshake of `via` (a [`Sessions::admit`] label) came
/// over, as `STATS` names it; `None` for the hub's own clients, which are
/// never refused.
fn auth_transport(via: &str) -> Option<AuthTransport> {
    Some(match via {
        "TCP" => AuthTransport::Tcp,
        "TLS" => AuthTransport::Tls,
        "a unix socket" => AuthTransport::Unix,
        "shared memory" => AuthTransport::Shm,
        "ivshmem" => AuthTransport::Ivshmem,
        _ => return None,
    })
}

/// One counted client, from its first byte to its end. Dropping it detaches
/// the client from the bus (if attached) and uncounts it.
pub struct ClientSlot {
    sessions: Arc<Sessions>,
    id: ClientId,
    via: &'static str,
    peer: String,
    origin: PeerOrigin,
    /// Whom it counts against (`peer_key.rs`).
    key: PeerKey,
    name: Option<String>,
    /// What the token of its `HELLO` lets it do.
    access: Access,
    /// Its `HELLO` made it a participant of virtual time.
    synchronized: bool,
    /// Its `HELLO` said `AHEAD`: it may step ahead, and its frames'
    /// `timestamp_ns` is the bus time they are for (`spec/protocol.md` 6.8).
    ahead: bool,
    /// The `CHALLENGE` it was sent, until its `AUTH` comes.
    challenged: Option<Box<greeting::Challenged>>,
    attached: bool,
    detached: bool,
}

impl ClientSlot {
    pub fn id(&self) -> ClientId {
        self.id
    }

    /// Whether its frames carry the bus time they are for (`AHEAD`).
    pub fn stamps_frames(&self) -> bool {
        self.ahead
    }

    /// The client's name once its `HELLO` was accepted.
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or("?")
    }

    pub fn peer(&self) -> &str {
        &self.peer
    }

    pub fn sessions(&self) -> &Arc<Sessions> {
        &self.sessions
    }

    /// The client proved itself with a certificate the hub's
    /// `tls_client_ca` signed (mutual TLS): it is admitted as a token
    /// holder is (`credentials.rs`).
    pub fn certified(&mut self) {
        self.origin = PeerOrigin::Certified;
    }

    /// Act on one message of the client's handshake — its `HELLO`, then,
    /// when the hub challenged it, its `AUTH` (`spec/protocol.md` 5.1) —
    /// and say what to send it; a failure is what to `REFUSE` with.
    pub fn handshake(&mut self, body: &[u8]) -> Result<Answer, Violation> {
        match self.challenged.take() {
            None => self.hello(body),
            Some(challenged) => self.auth(body, &challenged).map(|()| Answer::Welcome),
        }
    }

    fn hello(&mut self, body: &[u8]) -> Result<Answer, Violation> {
        let hello = match wire::decode(body) {
            Ok(Message::Hello(hello)) => hello,
            Ok(other) => {
                return Err(Violation::new(
                    ErrorCode::UnexpectedMessage,
                    format!("the first message must be HELLO, got {}", other.type_name()),
                ))
            }
            Err(wire::DecodeError::UnsupportedVersion { version }) => {
                return Err(Violation::new(ErrorCode::UnsupportedVersion, greeting::unsupported_version(version)))
            }
            Err(e) => return Err(e.into()),
        };
        if self.sessions.credentials.challenges() {
            let (challenged, bytes) = greeting::Challenged::new(&hello, &self.sessions.hub_name)
                .map_err(|(code, text)| Violation::new(code, text))?;
            self.challenged = Some(Box::new(challenged));
            return Ok(Answer::Challenge(bytes));
        }
        let access = self.sessions.credentials.access_by_mac(None, &self.origin).map_err(|r| self.unauthorized(r))?;
        self.admit_with(access, hello.name, hello.options)?;
        Ok(Answer::Welcome)
    }

    fn auth(&mut self, body: &[u8], challenged: &greeting::Challenged) -> Result<(), Violation> {
        let auth = match wire::decode(body)? {
            Message::Auth(auth) => auth,
            other => {
                return Err(Violation::new(
                    ErrorCode::UnexpectedMessage,
                    format!("the answer to CHALLENGE must be AUTH, got {}", other.type_name()),
                ))
            }
        };
        let transcript = challenged.transcript(&self.sessions.hub_name);
        let proof = (!auth.is_no_token()).then_some((&transcript[..], &auth.mac));
        let access = self.sessions.credentials.access_by_mac(proof, &self.origin).map_err(|r| self.unauthorized(r))?;
        let (name, options) = challenged.hello();
        self.admit_with(access, name, options)
    }

    /// The refusal of a client that is not admitted, counted for its
    /// transport (`STATS`' `auth_refused`); a wrong token for the log too.
    fn unauthorized(&self, refused: Refused) -> Violation {
        if refused == Refused::WrongToken {
            self.sessions.wrong_tokens.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(transport) = auth_transport(self.via) {
            self.sessions.credentials.count_refusal(transport);
        }
        Violation::new(ErrorCode::Unauthorized, greeting::refusal(refused))
    }

    /// Admit the client with `access` under `name` and its `HELLO`'s
    /// session options (its token, or who it is, decided `access`); a
    /// failure is what to `REFUSE` with.
    fn admit_with(&mut self, access: Access, name: &str, options: SessionOptions) -> Result<(), Violation> {
        self.synchronized = options.contains(SessionOptions::SYNCHRONIZED);
        self.ahead = options.contains(SessionOptions::AHEAD);
        if self.ahead && !self.synchronized {
            return Err(Violation::new(
                ErrorCode::Malformed,
                "the AHEAD option needs SYNCHRONIZED: only a participant of virtual time steps ahead",
            ));
        }
        if self.synchronized && !access.may_control() {
            let text = format!(
                "{} is read-only for the hub: a synchronised participant holds bus time back, which needs the \
                 hub's token or an [[access]] with control = true",
                access.describe()
            );
            return Err(Violation::new(ErrorCode::Unauthorized, text));
        }
        if let Some(grant) = access.grant_name() {
            info!(target: CLIENT_LOG, peer = %self.peer, access = grant, "admitted with access '{grant}'");
        }
        self.access = access;
        if self.synchronized && !self.sessions.virtual_time {
            return Err(Violation::new(
                ErrorCode::TimeMode,
                "this hub runs in real time; a synchronised participant needs [hub] time = \"virtual\"",
            ));
        }
        let name = if name.is_empty() { "client" } else { name };
        crate::config::check_name(name)
            .map_err(|why| Violation::new(ErrorCode::Malformed, format!("client name {why}")))?;
        self.greet(name.to_owned());
        Ok(())
    }

    /// Make the client a participant of virtual time, as a `HELLO` with
    /// `SYNCHRONIZED` does; for clients inside the hub (a synchronised SIL
    /// Kit bridge), before [`attach`](Self::attach). The hub's config
    /// allows it only in virtual time.
    pub fn synchronize(&mut self) {
        self.synchronized = true;
    }

    /// Name a client of the hub's own (a SocketCAN port), which sends no `HELLO`.
    pub fn name_as(&mut self, name: String) {
        self.greet(name);
    }

    /// Name a client whose protocol has no `HELLO` (socketcand) and give it
    /// the access its transport decided by the same credentials.
    pub fn admit_as(&mut self, name: String, access: Access) {
        self.access = access;
        self.greet(name);
    }

    /// Name the client: its handshake is over.
    fn greet(&mut self, name: String) {
        if self.name.replace(name).is_none() {
            self.sessions.handshaking.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// `WELCOME` for this client, encoded.
    pub fn welcome(&self) -> Vec<u8> {
        let mut bytes = Vec::new();
        let welcome = Welcome { version: PROTOCOL_VERSION, client_id: self.id, hub_name: &self.sessions.hub_name };
        wire::encode(&mut bytes, &Message::Welcome(welcome));
        bytes
    }

    /// Whom the client counts against.
    pub fn peer_key(&self) -> PeerKey {
        self.key
    }

    /// Log a refused handshake once, the same way for every transport (at
    /// most one line per peer per interval, with a count).
    pub fn log_refusal(&self, violation: &Violation) {
        self.sessions.log_refusal(self.key, &self.peer, &violation.text);
    }

    /// Hand the client to the bus. Before `WELCOME` goes out, so whatever the
    /// client sends after it finds the bus ready.
    pub fn attach(
        &mut self,
        outbox: Outbox,
        hang_up: HangUp,
        credit: Arc<TxCredit>,
        intake: Option<Box<dyn Intake>>,
    ) -> Result<(), NotQueued> {
        let name = self.name().to_owned();
        let (synchronized, ahead) = (self.synchronized, self.ahead);
        let access = self.access.clone();
        self.sessions.inbox.send(Inbound::Attach {
            client: self.id,
            name,
            outbox,
            hang_up,
            credit,
            intake,
            synchronized,
            ahead,
            access,
        })?;
        self.attached = true;
        info!(target: CLIENT_LOG, client = self.id, name = %self.name(), peer = %self.peer, "client connected over {}", self.via);
        Ok(())
    }

    /// Queue a request for the bus (without waking it: the caller wakes it
    /// once after a batch with [`InboxSender::wake_bus`]).
    pub fn forward(&self, request: Inbound) -> Result<(), Violation> {
        self.sessions
            .inbox
            .send_quietly(request)
            .map_err(|NotQueued| Violation::new(ErrorCode::ShuttingDown, "the hub is shutting down"))
    }

    /// End the client's session with the bus (once); its ports close after
    /// everything it sent before.
    pub fn detach(&mut self, reason: &str) {
        if self.attached && !self.detached {
            self.detached = true;
            info!(target: CLIENT_LOG, client = self.id, name = %self.name(), peer = %self.peer, "client disconnected: {reason}");
            let _ = self.sessions.inbox.send(Inbound::Detach { client: self.id, reason: reason.to_owned() });
        }
    }

    /// The client broke the protocol: log it and detach it.
    pub fn reject(&mut self, violation: &Violation) {
        if self.attached && !self.detached {
            warn!(client = self.id, name = %self.name(), peer = %self.peer, "rejecting client: {}", violation.text);
        }
        self.detach(&violation.text);
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        self.detach("session ended");
        debug!(client = self.id, "client slot released");
        if self.name.is_none() {
            self.sessions.handshaking.fetch_sub(1, Ordering::AcqRel);
        }
        self.sessions.live.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What a client's message asks of the bus: one mapping for every transport.
// Lives on the stack for one message and is never stored: boxing the large
// variant would only add an allocation per request.
#[allow(clippy::large_enum_variant)]
pub enum Request<'a> {
    /// Frame records to forward (the batch was checked whole).
    Frames(FrameBatch<'a>),
    /// A request for the bus.
    Bus(Inbound),
    /// Nothing to do.
    Nothing,
    /// The client said goodbye; the reason is for the log.
    Goodbye(String),
}

/// Map one decoded message of an attached client.
pub fn request_of(client: ClientId, message: Message<'_>) -> Result<Request<'_>, Violation> {
    Ok(match message {
        Message::Frames(batch) => {
            // A batch is taken whole or refused whole, so check it first
            // (from what decoding noted: building its frames here would
            // build each twice, once more when the bus takes it).
            if let Some(index) = batch.first_echo() {
                return Err(echo_refused(index));
            }
            Request::Frames(batch)
        }
        Message::OpenPort(open) => Request::Bus(Inbound::OpenPort {
            client,
            request: open.request,
            options: open.options,
            channel: open.channel.to_owned(),
            port_name: open.port_name.to_owned(),
        }),
        Message::ClosePort { port } => Request::Bus(Inbound::ClosePort { client, port }),
        Message::Ping { nonce } => Request::Bus(Inbound::Ping { client, nonce }),
        Message::StatsRequest { request } => Request::Bus(Inbound::Stats { client, request }),
        Message::Step { until_ns } => Request::Bus(Inbound::Step { client, until_ns }),
        Message::StepAhead(step) => Request::Bus(Inbound::StepAhead {
            client,
            until_ns: step.until_ns,
            period_ns: step.period_ns,
            filters: step.filters.iter().collect(),
        }),
        Message::Pong { .. } => Request::Nothing,
        Message::Goodbye(report) => Request::Goodbye(format!("client said goodbye: {}", printable(report.text))),
        // A stream that outlives its client — a virtio-serial port whose
        // guest process died and was started again — carries the next
        // client's HELLO into the old session.
        Message::Hello(hello) => {
            return Err(Violation::new(
                ErrorCode::UnexpectedMessage,
                format!(
                    "HELLO from {:?} on a connection already in a session (a new process on the same stream, as \
                     after a guest process died on a virtio-serial port?); this session ends, connect again",
                    hello.name
                ),
            ))
        }
        other => {
            return Err(Violation::new(
                ErrorCode::UnexpectedMessage,
                format!("{} is not allowed from a client", other.type_name()),
            ))
        }
    })
}

/// A client's batch with an echo-flagged record (a transmit confirmation,
/// which only the hub sends) at `index`: refused whole.
fn echo_refused(index: usize) -> Violation {
    Violation::new(ErrorCode::InvalidFrame, format!("frame {index}: the echo flag is set by the hub only"))
}

/// Where forwarding a `FRAMES` batch stands: the records already forwarded.
/// A batch waits, partly taken, while the client has no transmit credit;
/// forwarding resumes at the next record without reading the ones before.
#[derive(Clone, Copy, Debug, Default)]
pub struct FrameCursor {
    at: RecordPosition,
    /// The session said `AHEAD`: a record's `timestamp_ns` is the bus time
    /// its frame is for; otherwise it is ignored (0).
    stamped: bool,
}

impl FrameCursor {
    /// A cursor for a session whose frames carry their bus time (`AHEAD`:
    /// [`ClientSlot::stamps_frames`]) or not.
    pub fn new(stamped: bool) -> Self {
        Self { at: RecordPosition::default(), stamped }
    }

    /// Forward the batch's records from where it stopped, each with one
    /// credit from `credit`, through `push` (false: stop, nothing taken),
    /// with the bus time each is for (0: now).
    /// Returns true once the whole batch is forwarded (and resets).
    pub fn forward(
        &mut self,
        batch: &FrameBatch<'_>,
        mut take_credit: impl FnMut() -> bool,
        mut push: impl FnMut(u16, Frame, u64) -> bool,
    ) -> bool {
        let mut records = batch.resume(self.at);
        loop {
            let here = records.record_position(batch);
            let Some(record) = records.next() else { break };
            let at_ns = if self.stamped { record.meta.timestamp_ns } else { 0 };
            if !take_credit() || !push(record.port, record.frame, at_ns) {
                self.at = here;
                return false;
            }
        }
        self.at = RecordPosition::default();
        true
    }

    /// Forward the `FRAMES` message `payload` (the body after its type byte)
    /// from where it stopped, reading it in one pass ([`FramesReader`]):
    /// `take` gets each checked record from there on with the bus time it
    /// is for (0: now) and writes its frame where the frame goes (false:
    /// stop, nothing taken; the rest is only checked). Returns whether the
    /// whole batch is forwarded (the cursor resets), or why the client's
    /// batch is refused — whole: the caller then drops what `take` took of
    /// it, since the batch's soundness is known only once it is read to the
    /// end.
    pub fn forward_checked(
        &mut self,
        payload: &[u8],
        mut take: impl FnMut(&CheckedRecord<'_>, u64) -> bool,
    ) -> Result<bool, Violation> {
        let mut reader = FramesReader::new(payload)?;
        let mut stopped = None;
        loop {
            let here = reader.position();
            let Some(record) = reader.next_record()? else { break };
            if record.is_echo() {
                return Err(echo_refused(record.index()));
            }
            if stopped.is_some() || record.index() < self.at.records_read() {
                continue;
            }
            let at_ns = if self.stamped { record.timestamp_ns() } else { 0 };
            if !take(&record, at_ns) {
                stopped = Some(here);
            }
        }
        self.at = stopped.unwrap_or_default();
        Ok(stopped.is_none())
    }

    /// Whether a batch is partly forwarded.
    pub fn in_batch(&self) -> bool {
        self.at.records_read() > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_with_an_echo_record_is_refused_whole_naming_the_record() {
        use fieldhub_proto::wire::{decode, BatchEncoder};
        use fieldhub_proto::{Frame, FrameMeta};
        let mut out = Vec::new();
        let mut encoder = BatchEncoder::begin(&mut out);
        for i in 0..3u32 {
            let frame = Frame::can(i, false, &[1; 8]).unwrap().with_echo(i == 1);
            encoder.push(&mut out, 1, &frame, &FrameMeta::default());
        }
        encoder.finish(&mut out);
        let Err(violation) = request_of(7, decode(&out[4..]).unwrap()) else { panic!("an echo batch was taken") };
        assert_eq!(violation.code, ErrorCode::InvalidFrame);
        assert_eq!(violation.text, "frame 1: the echo flag is set by the hub only");
    }

    #[test]
    fn text_from_clients_cannot_break_a_log_line_or_drive_a_terminal() {
        assert_eq!(printable("client closed"), "client closed");
        assert_eq!(printable("bye\n2026-11-24T00:00:00Z  INFO forged"), "bye\\n2026-11-24T00:00:00Z  INFO forged");
        assert_eq!(printable("\u{1b}[2Jgone"), "\\u{1b}[2Jgone");
        assert_eq!(printable("Grüße"), "Grüße");
    }
}
