//! One socketcand connection: the state machine of `doc/protocol.md`
//! (NO_BUS → `< open >` → BCM, RAW or CONTROL) on the connection's thread,
//! and a writer thread ([`super::writer`]) that turns the client's outbox
//! into `< frame … >` lines.
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

use std::io::Read;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use fieldhub_bus::credit::TxCredit;
use fieldhub_bus::inbox::Inbound;
use fieldhub_bus::outbox::QueueOutbox;
use fieldhub_proto::wire::PortOptions;
use fieldhub_proto::Frame;
use tracing::warn;

use super::bcm::{Content, Subscriptions};
use super::bcm_tx::{self, JobLink, TxJobError, TxJobs};
use super::configure::{self, ControllerMode};
use super::protocol::{self, Command, Element, Elements, Mode};
use super::writer::{write_loop, Shared, MODE_BCM, MODE_CONTROL, MODE_RAW, WRITE_PATIENCE};
use crate::session::credentials::{Access, Grant};
use crate::session::peer_user::PeerOrigin;
use crate::session::{ClientSlot, Sessions, HANDSHAKE_TIMEOUT};
use crate::transport::internal_port::JobNotRun;
use crate::transport::internal_port::{self, InternalPort, NotOpened, PortRequest};
use fieldhub_bus::access::ALL_CHANNELS;

/// Serve one accepted connection until it ends.
pub fn serve(stream: TcpStream, sessions: Arc<Sessions>, allow_unauthenticated: bool) {
    let origin = PeerOrigin::tcp(stream.local_addr(), stream.peer_addr());
    let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_else(|_| "?".into());
    let _ = stream.set_nodelay(true);
    let _ = stream.set_write_timeout(Some(WRITE_PATIENCE));
    let Ok(out) = stream.try_clone() else { return };
    let shared = Arc::new(Shared::new(out));
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
    let mut connection = Connection {
        stream,
        shared,
        sessions,
        elements: Elements::default(),
        ticker: None,
        tx_jobs: TxJobs::default(),
    };
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
    /// BCM mode's cyclic transmission jobs, run by the bus.
    tx_jobs: TxJobs,
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
                        // socketcand closes its BCM socket when it leaves
                        // BCM mode, and with it the socket's cyclic jobs.
                        if to != MODE_BCM && self.tx_jobs.clear(&link(slot, port)).is_err() {
                            return "the hub is stopping".into();
                        }
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
                (Command::Add { interval_us: 0, frame }, MODE_BCM) => {
                    // A zero interval stops the identifier's timer and
                    // sends the frame once.
                    let stopped = self.tx_jobs.delete(&link(slot, port), bcm_tx::id_of(&frame));
                    if stopped.is_err() || !self.transmit(slot, port, credit, frame) {
                        return "the hub is stopping".into();
                    }
                    continue;
                }
                (Command::Add { interval_us, frame }, MODE_BCM) => {
                    match self.tx_jobs.add(&link(slot, port), interval_us, frame) {
                        Ok(()) => continue,
                        Err(TxJobError::NotRun(JobNotRun::Stopped)) => return "the hub is stopping".into(),
                        Err(e) => protocol::error_line(&e.to_string()),
                    }
                }
                (Command::Update(frame), MODE_BCM) => match self.tx_jobs.update(frame) {
                    Ok(()) => continue,
                    Err(e) => protocol::error_line(&e.to_string()),
                },
                (Command::Delete(id), MODE_BCM) => match self.tx_jobs.delete(&link(slot, port), id) {
                    Ok(true) => continue,
                    Ok(false) => protocol::error_line(&TxJobError::NoJob(id).to_string()),
                    Err(_) => return "the hub is stopping".into(),
                },
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

/// Where the session's cyclic jobs go: its client and port on the bus.
fn link(slot: &ClientSlot, port: u16) -> JobLink<'_> {
    JobLink { sessions: slot.sessions(), client: slot.id(), port }
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
