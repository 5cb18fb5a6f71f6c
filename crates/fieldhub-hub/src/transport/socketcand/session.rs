//! One socketcand connection: the state machine of `doc/protocol.md`
//! (NO_BUS → `< open >` → BCM, RAW or CONTROL) on the connection's thread,
//! and a writer thread that turns the client's outbox into `< frame … >`
//! lines.
//!
//! Invariants:
//! - A session is a client of the bus like a native one: admitted and
//!   counted by [`Sessions`], its access decided by the same credentials
//!   (socketcand sends no token, so what the peer is decides: the hub's own
//!   user on this machine, `insecure_local`, or the listener's
//!   `allow_unauthenticated`), one port opened by `< open NAME >` without
//!   `FD` (the channel never sends a CAN FD frame to it), and every frame it
//!   sends waits for transmit credit, so a busy channel slows the client's
//!   reader rather than growing a queue.
//! - Frame fate: frames the bus drops are told to the session as
//!   `< error … >` with the reason and the count; nothing is dropped here.
//! - `< hi >` and every `< ok >` are written alone (python-can and SavvyCAN
//!   compare whole reads with them); frames are written in batches.
//! - A session that never opens a bus is closed after
//!   [`HANDSHAKE_TIMEOUT`]; one whose client stops reading is closed when a
//!   write has waited [`WRITE_PATIENCE`]; neither slows the bus or another
//!   client (the outbox never blocks the bus: a full one is counted as
//!   receive overflow).
//! - Idle, nothing runs: the reader sleeps in `read`, the writer on the
//!   outbox (the bus's items, its hang-up or the session's end wake it),
//!   the statistics ticker only exists once asked for.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use fieldhub_bus::credit::TxCredit;
use fieldhub_bus::inbox::Inbound;
use fieldhub_bus::outbox::{Outbound, QueueOutbox};
use fieldhub_proto::wire::PortOptions;
use fieldhub_proto::Frame;
use tracing::{debug, warn};

use super::bcm::{Content, Subscriptions};
use super::configure::{self, ControllerMode};
use super::protocol::{self, Command, Element, Elements, Mode};
use super::statistics::{Counters, Statistics};
use crate::session::credentials::{Access, Grant};
use crate::session::peer_user::PeerOrigin;
use crate::session::{ClientSlot, Sessions, HANDSHAKE_TIMEOUT};
use crate::transport::internal_port::{self, InternalPort, NotOpened, PortRequest};
use fieldhub_bus::access::ALL_CHANNELS;

/// How long a write to a client that does not read may wait before the
/// session is closed.
pub const WRITE_PATIENCE: Duration = Duration::from_secs(10);
/// Outbox items written in one batch.
const BATCH: usize = 256;

const MODE_BCM: u8 = 0;
const MODE_RAW: u8 = 1;
const MODE_CONTROL: u8 = 2;

/// What the connection's thread and its writer share.
struct Shared {
    /// Writes of both threads, each one whole line or batch.
    out: Mutex<TcpStream>,
    mode: AtomicU8,
    subscriptions: Mutex<Subscriptions>,
    /// `< statistics MS >`'s ticker settings.
    statistics: Statistics,
    counters: Counters,
}

impl Shared {
    /// Write `line` alone; a client that does not take it within
    /// [`WRITE_PATIENCE`] loses its connection.
    fn write(&self, line: &str) -> bool {
        let out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        Self::write_to(out, line)
    }

    /// Switch to mode `to` and answer `< ok >`, under the write lock: a
    /// frame the client sends once it read the answer is formatted in the
    /// new mode (the writer reads the mode after taking it), and none of the
    /// new mode is written before the answer.
    fn switch_mode(&self, to: u8) -> bool {
        let out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        self.mode.store(to, Ordering::Release);
        Self::write_to(out, "< ok >")
    }

    fn write_to(mut out: std::sync::MutexGuard<'_, TcpStream>, line: &str) -> bool {
        match out.write_all(line.as_bytes()) {
            Ok(()) => true,
            Err(e) => {
                debug!(error = %e, "socketcand client write failed; closing");
                let _ = out.shutdown(Shutdown::Both);
                false
            }
        }
    }
}

/// Serve one accepted connection until it ends.
pub fn serve(stream: TcpStream, sessions: Arc<Sessions>, allow_unauthenticated: bool) {
    let origin = PeerOrigin::tcp(stream.local_addr(), stream.peer_addr());
    let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_else(|_| "?".into());
    let _ = stream.set_nodelay(true);
    let _ = stream.set_write_timeout(Some(WRITE_PATIENCE));
    let Ok(out) = stream.try_clone() else { return };
    let shared = Arc::new(Shared {
        out: Mutex::new(out),
        mode: AtomicU8::new(MODE_BCM),
        subscriptions: Mutex::new(Subscriptions::default()),
        statistics: Statistics::default(),
        counters: Counters::default(),
    });
    let mut slot = match sessions.admit("socketcand", format!("socketcand:{peer}"), origin) {
        Ok(slot) => slot,
        Err(violation) => {
            shared.write(&protocol::error_line(&violation.text));
            return;
        }
    };
    let access = match sessions.credentials.access("", &origin) {
        Ok(access) => Ok(access),
        // Anyone who reaches the listener uses the channels, but does not
        // change them: no control (bit timing).
        Err(_) if allow_unauthenticated => Ok(Access::Granted(Arc::new(Grant::new(
            "socketcand_allow_unauthenticated".into(),
            vec![ALL_CHANNELS.into()],
            vec![ALL_CHANNELS.into()],
            false,
        )))),
        Err(refused) => Err(match refused {
            crate::session::credentials::Refused::NotHubUser(who) => format!(
                "this hub admits socketcand clients only from processes of its own user, and this is {who} \
                 (socketcand has no token; see docs/socketcand.md)"
            ),
            _ => "this hub requires a token and socketcand cannot present one: connect with a fieldhub client, \
                  or set allow_unauthenticated on the socketcand listener (docs/socketcand.md)"
                .to_owned(),
        }),
    };
    let access = match access {
        Ok(access) => access,
        Err(text) => {
            warn!(peer = %peer, "refusing socketcand connection: {text}");
            shared.write(&protocol::error_line(&text));
            return;
        }
    };
    let mut connection = Connection { stream, shared, sessions, elements: Elements::default(), ticker: None };
    if !connection.shared.write("< hi >") {
        return;
    }
    let _ = connection.stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT));
    let Some(port) = connection.until_open(&mut slot, access, &peer) else { return };
    let _ = connection.stream.set_read_timeout(None);
    let (outbox, credit) = port.1;
    let writer = {
        let (shared, outbox) = (Arc::clone(&connection.shared), Arc::clone(&outbox));
        std::thread::Builder::new().name("fh-scd-w".into()).spawn(move || write_loop(&shared, &outbox))
    };
    let Ok(writer) = writer else {
        warn!("cannot start a socketcand writer thread; closing the session");
        return;
    };
    let reason = connection.serve_bus(&slot, port.0, &credit);
    slot.detach(&reason);
    credit.close();
    let _ = connection.stream.shutdown(Shutdown::Both);
    // The writer sees the outbox gone and ends.
    outbox.close();
    let _ = writer.join();
    connection.shared.statistics.end();
    if let Some(ticker) = connection.ticker.take() {
        let _ = ticker.join();
    }
}

struct Connection {
    stream: TcpStream,
    shared: Arc<Shared>,
    sessions: Arc<Sessions>,
    elements: Elements,
    /// The statistics ticker, once a `statistics` command started it.
    ticker: Option<JoinHandle<()>>,
}

/// The opened port: its handle, the outbox and the transmit credit.
type Opened = (u16, (Arc<QueueOutbox>, Arc<TxCredit>));

/// What reading the next command gave.
enum Next {
    Command(Command),
    /// A command that could not be read; said to the client already.
    Refused,
    /// The connection ended, with why.
    End(String),
}

impl Connection {
    fn next(&mut self) -> Next {
        loop {
            match self.elements.next_element() {
                Some(Element::Command(text)) => {
                    return match protocol::parse(text) {
                        Ok(command) => Next::Command(command),
                        Err(e) => {
                            if !self.shared.write(&protocol::error_line(&e.0)) {
                                return Next::End("the client does not read".into());
                            }
                            Next::Refused
                        }
                    }
                }
                Some(Element::Bad(e)) => {
                    self.shared.write(&protocol::error_line(&e.0));
                    return Next::End(e.0);
                }
                None => {}
            }
            let mut buf = [0u8; 4096];
            match self.stream.read(&mut buf) {
                Ok(0) => return Next::End("the client closed the connection".into()),
                Ok(n) => self.elements.push(&buf[..n]),
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                    self.shared.write(&protocol::error_line(&format!(
                        "no bus opened within {} s; send 'open NAME'",
                        HANDSHAKE_TIMEOUT.as_secs()
                    )));
                    return Next::End("no < open > in time".into());
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Next::End(format!("reading failed: {e}")),
            }
        }
    }

    fn reply(&self, line: &str) -> Result<(), String> {
        if self.shared.write(line) {
            Ok(())
        } else {
            Err("the client does not read".into())
        }
    }

    /// NO_BUS: until `< open NAME >` opens a port, or the session ends.
    fn until_open(&mut self, slot: &mut ClientSlot, access: Access, peer: &str) -> Option<Opened> {
        let mut mode = ControllerMode::default();
        loop {
            let command = match self.next() {
                Next::Command(command) => command,
                Next::Refused => continue,
                Next::End(_) => return None,
            };
            let answer = match command {
                Command::Open(channel) => {
                    let options = mode.options_for(&channel);
                    return self.open(slot, access, peer, channel, options);
                }
                Command::Echo => "< echo >".to_owned(),
                Command::BitTiming { bus, timing } => configure::bit_timing(&self.sessions, &access, &bus, &timing),
                Command::ControllerMode { bus, listen_only, loopback, .. } => {
                    configure::controller_mode(&self.sessions, &mut mode, &bus, listen_only, loopback)
                }
                _ => protocol::error_line("no bus is open; send 'open NAME' first"),
            };
            self.reply(&answer).ok()?;
        }
    }

    fn open(
        &mut self,
        slot: &mut ClientSlot,
        access: Access,
        peer: &str,
        channel: String,
        options: PortOptions,
    ) -> Option<Opened> {
        slot.admit_as(format!("socketcand-{peer}"), access);
        let hang_up = {
            let stream = self.stream.try_clone().ok()?;
            Box::new(move || {
                let _ = stream.shutdown(Shutdown::Both);
            })
        };
        let request = PortRequest {
            channel: &channel,
            port_name: format!("socketcand-{}", slot.id()),
            // Never FD: socketcand has no CAN FD syntax.
            options,
            deadline: Some(Instant::now() + HANDSHAKE_TIMEOUT),
        };
        match internal_port::open(slot, hang_up, request) {
            Ok(InternalPort { port, outbox, credit }) => {
                self.reply("< ok >").ok()?;
                Some((port, (outbox, credit)))
            }
            // socketcand ends the connection when a bus cannot be opened.
            Err(NotOpened::Refused { text, .. } | NotOpened::Goodbye(text)) => {
                let _ = self.reply(&protocol::error_line(&text));
                None
            }
            Err(NotOpened::Stopped) => None,
        }
    }

    /// BCM, RAW and CONTROL: commands until the session ends; returns why.
    fn serve_bus(&mut self, slot: &ClientSlot, port: u16, credit: &TxCredit) -> String {
        loop {
            let command = match self.next() {
                Next::Command(command) => command,
                Next::Refused => continue,
                Next::End(reason) => return reason,
            };
            let mode = self.shared.mode.load(Ordering::Acquire);
            let answer = match (command, mode) {
                (Command::Mode(to), _) => match to {
                    Mode::Bcm | Mode::Raw | Mode::Control => {
                        let to = match to {
                            Mode::Raw => MODE_RAW,
                            Mode::Control => MODE_CONTROL,
                            _ => MODE_BCM,
                        };
                        // `< ok >` alone, and the mode in place before the
                        // client can read it.
                        if !self.shared.switch_mode(to) {
                            return "the client does not read".into();
                        }
                        self.shared.statistics.mode_changed(to == MODE_CONTROL);
                        continue;
                    }
                    Mode::IsoTp => protocol::error_line(
                        "ISO-TP mode is not served by a fieldhub hub; use RAW mode with an ISO-TP stack in the \
                         client (python-can with can-isotp)",
                    ),
                },
                (Command::Echo, _) => "< echo >".to_owned(),
                (Command::Send(frame), MODE_BCM | MODE_RAW) => {
                    if !self.transmit(slot, port, credit, frame) {
                        return "the hub is stopping".into();
                    }
                    continue;
                }
                (Command::Subscribe { interval_us, id }, MODE_BCM) => {
                    self.subscriptions().set(id, Content::All, interval_us);
                    continue;
                }
                (Command::Filter { interval_us, id, mask }, MODE_BCM) => {
                    self.subscriptions().set(id, Content::Changed(mask), interval_us);
                    continue;
                }
                (Command::MuxFilter { interval_us, id, tuples }, MODE_BCM) => {
                    self.subscriptions().set(id, Content::MuxChanged(tuples), interval_us);
                    continue;
                }
                (Command::Unsubscribe(id), MODE_BCM) => {
                    if self.subscriptions().remove(id) {
                        continue;
                    }
                    protocol::error_line(&format!("no subscription or filter for {:X} to remove", id.id))
                }
                (Command::Add { .. } | Command::Update(_) | Command::Delete(_), MODE_BCM) => protocol::error_line(
                    "cyclic transmission jobs (add, update, delete) are not served by this hub yet; send each \
                     frame with 'send'",
                ),
                (Command::Statistics(ms), MODE_CONTROL) => {
                    self.shared.statistics.set(ms);
                    if self.ticker.is_none() {
                        self.ticker = self.start_ticker();
                    }
                    continue;
                }
                (Command::Open(_), _) => protocol::error_line("a bus is open already; one session serves one bus"),
                (Command::BitTiming { .. } | Command::ControllerMode { .. }, _) => {
                    protocol::error_line("bus configuration is only possible before 'open', in NO_BUS mode")
                }
                (command, mode) => protocol::error_line(&format!(
                    "{} is not a command of {} mode",
                    verb(&command),
                    match mode {
                        MODE_RAW => "RAW",
                        MODE_CONTROL => "CONTROL",
                        _ => "BCM",
                    }
                )),
            };
            if let Err(reason) = self.reply(&answer) {
                return reason;
            }
        }
    }

    /// Start the statistics ticker; `None` (said to the client) when no
    /// thread can be started.
    fn start_ticker(&self) -> Option<JoinHandle<()>> {
        let shared = Arc::clone(&self.shared);
        let started = std::thread::Builder::new()
            .name("fh-scd-stat".into())
            .spawn(move || shared.statistics.run(&shared.counters, |line| shared.write(line)));
        match started {
            Ok(ticker) => Some(ticker),
            Err(e) => {
                warn!(error = %e, "cannot start a socketcand statistics thread");
                let _ = self.reply(&protocol::error_line("the hub cannot start the statistics timer now; try again"));
                None
            }
        }
    }

    fn subscriptions(&self) -> std::sync::MutexGuard<'_, Subscriptions> {
        self.shared.subscriptions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hand `frame` to the bus once it has credit; `false` when the hub stops.
    fn transmit(&self, slot: &ClientSlot, port: u16, credit: &TxCredit, frame: Frame) -> bool {
        let sessions = &self.sessions;
        if !credit.acquire(|| sessions.stopping()) {
            return false;
        }
        let len = frame.len() as u64;
        if sessions.inbox.send(Inbound::Frame { client: slot.id(), port, frame }).is_err() {
            return false;
        }
        self.shared.counters.tx_packets.fetch_add(1, Ordering::Relaxed);
        self.shared.counters.tx_bytes.fetch_add(len, Ordering::Relaxed);
        true
    }
}

fn verb(command: &Command) -> &'static str {
    match command {
        Command::Open(_) => "open",
        Command::Mode(_) => "a mode switch",
        Command::Echo => "echo",
        Command::Send(_) => "send",
        Command::Add { .. } => "add",
        Command::Update(_) => "update",
        Command::Delete(_) => "delete",
        Command::Subscribe { .. } => "subscribe",
        Command::Filter { .. } => "filter",
        Command::MuxFilter { .. } => "muxfilter",
        Command::Unsubscribe(_) => "unsubscribe",
        Command::Statistics(_) => "statistics",
        Command::BitTiming { .. } => "bit timing",
        Command::ControllerMode { .. } => "controller mode",
    }
}

/// The writer thread: the bus's frames and reports to the client, until
/// the bus lets go of the session or the client stops reading. It sleeps on
/// the outbox: items, the outbox's close and the bus's goodbye wake it.
fn write_loop(shared: &Shared, outbox: &QueueOutbox) {
    let mut batch = Vec::with_capacity(BATCH);
    let mut text = String::new();
    while let Some(first) = outbox.take_blocking(None) {
        batch.push(first);
        outbox.take_into(&mut batch, BATCH - 1);
        outbox.took();
        text.clear();
        let mut end = false;
        let mode = shared.mode.load(Ordering::Acquire);
        for item in batch.drain(..) {
            match item {
                Outbound::Frame { frame, meta, .. } => {
                    shared.counters.rx_packets.fetch_add(1, Ordering::Relaxed);
                    shared.counters.rx_bytes.fetch_add(frame.len() as u64, Ordering::Relaxed);
                    let wanted = match mode {
                        MODE_RAW => true,
                        MODE_BCM => shared
                            .subscriptions
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .pass(&frame, meta.timestamp_ns),
                        _ => false,
                    };
                    if wanted {
                        protocol::format_frame(&mut text, &frame, meta.timestamp_ns);
                    }
                }
                Outbound::RxOverflow { dropped, .. } => text.push_str(&protocol::error_line(&format!(
                    "{dropped} frames of the channel dropped: this session did not read fast enough"
                ))),
                Outbound::TxDropped { reason, dropped, .. } => text.push_str(&protocol::error_line(&format!(
                    "{dropped} frames this session sent are off the bus: {}",
                    reason.describe()
                ))),
                Outbound::ChannelState { text: said, .. } => text.push_str(&protocol::error_line(&said)),
                Outbound::Error { text: said, fatal, .. } => {
                    text.push_str(&protocol::error_line(&said));
                    end |= fatal;
                }
                Outbound::Goodbye { text: said, .. } => {
                    text.push_str(&protocol::error_line(&said));
                    end = true;
                }
                Outbound::PortOpened { .. }
                | Outbound::PortClosed { .. }
                | Outbound::Pong { .. }
                | Outbound::Grant { .. }
                | Outbound::Stats { .. } => {}
            }
        }
        if !text.is_empty() && !shared.write(&text) {
            warn!("a socketcand client stopped reading for {} s; its session is closed", WRITE_PATIENCE.as_secs());
            return;
        }
        if end {
            let _ = shared.out.lock().unwrap_or_else(|e| e.into_inner()).shutdown(Shutdown::Both);
            return;
        }
    }
}
