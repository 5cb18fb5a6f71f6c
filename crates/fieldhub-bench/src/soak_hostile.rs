//! The attackers of `fieldhub bench soak --hostile` (issue 34), each on its
//! own thread while the soak runs, each counted in the soak's report:
//!
//! - [`Vandal`] (attack 5): a hostile local client keeps attaching over
//!   shared memory, damaging every page it is given — four bytes over the
//!   start of its own segment and of the hub's bell page, and a hole punched
//!   in both (through the descriptors: `pwrite` and
//!   `fallocate(PUNCH_HOLE)`, which the seals allow) — and leaving at once.
//!   The soak's clients that replace the killed ones attach after it all
//!   the time, so the soak's checks prove that no client changes what later
//!   clients map (`spec/shm.md` 2.2).
//! - [`StreamAttacks`], over the hub's TCP port and unix socket:
//!   - silent connections (attack 2): new connections that never send
//!     `HELLO`, up to twice a peer's share of the handshake slots held on
//!     each transport, the oldest let go when the hub closes it to make
//!     room (or at its handshake deadline);
//!   - the control API held (attack 3): more keep-alive HTTP connections
//!     than the hub has HTTP slots, each sending a request every few ms
//!     that the hub refuses (`403`: it names another site in `Origin`, as a
//!     hostile web page's would — the soak's hub has no token to get a
//!     `401` with), while a legitimate request on a fresh connection must
//!     be answered `200` every round;
//!   - garbage (bad input): connections writing random bytes, an oversize
//!     length prefix, or a version-1 `HELLO` with a token in clear; the hub
//!     must answer each by closing it.
//!
//!   The soak's killed clients are replaced all along, over TCP and shared
//!   memory: they must get in, and its checks (one gap-free order, nothing
//!   missing, the hub's descriptors and threads back) must hold. The
//!   attackers run as the soak's own user, so they share a peer's quota
//!   with the replacements: the hub must make room by closing the silent
//!   ones, not the clients that speak.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::FileExt;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use fieldhub_proto::wire::{self, Hello, Message};
use rustix::fs::FallocateFlags;
use serde::Serialize;

use crate::stream_socket::StreamSocket;
use crate::{BenchError, PATIENCE};

/// Pause between two attacks: often enough to meet every replacement
/// client's attach, gentle enough for a shared machine.
const PAUSE: Duration = Duration::from_millis(20);

/// The attacking thread.
pub struct Vandal {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Result<u64, BenchError>>,
}

impl Vandal {
    /// Start attacking the hub whose session socket is `socket`.
    pub fn start(socket: PathBuf) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut attacks = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    attack_once(&socket)?;
                    attacks += 1;
                    std::thread::sleep(PAUSE);
                }
                Ok(attacks)
            })
        };
        Self { stop, thread }
    }

    /// Stop; how many sessions were attached and damaged.
    pub fn finish(self) -> Result<u64, BenchError> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().map_err(|_| BenchError::Invalid("the hostile client's thread panicked".into()))?
    }
}

/// One session: the handshake, then damage to both pages it is given, then
/// gone. A hub that does not welcome it is a problem of the run.
fn attack_once(socket: &std::path::Path) -> Result<(), BenchError> {
    let mut session = UnixStream::connect(socket)?;
    let mut hello = Vec::new();
    let version = fieldhub_proto::limits::PROTOCOL_VERSION;
    let greeting = Hello { version, name: "soak-vandal", options: Default::default() };
    wire::encode(&mut hello, &Message::Hello(greeting));
    session.write_all(&hello)?;
    session.set_read_timeout(Some(PATIENCE))?;
    let (mut answer, mut fds) = (vec![0u8; 256], Vec::new());
    let n = fieldhub_shm::socket::recv_with_fds(&session, &mut answer, &mut fds)?;
    if fds.len() != fieldhub_shm::socket::PASSED_FDS {
        let answer = answer.get(4..n).map(wire::decode);
        return Err(BenchError::Invalid(format!("the hub did not welcome the hostile client: {answer:?}")));
    }
    for fd in fds {
        let file = std::fs::File::from(fd);
        file.write_all_at(b"XXXX", 0)?;
        rustix::fs::fallocate(&file, FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE, 0, 4096)
            .map_err(std::io::Error::from)?;
    }
    Ok(())
}

/// A peer's share of the hub's handshake slots once they are scarce
/// (`MAX_HANDSHAKES_PER_PEER` in the hub's `session/mod.rs`).
const HANDSHAKE_SHARE: usize = 16;
/// Silent connections held on each transport: twice a peer's share.
const SILENT_HELD: usize = 2 * HANDSHAKE_SHARE;
/// Keep-alive HTTP connections held: more than the hub's 64 HTTP slots
/// (attack 3 held 100).
pub const HTTP_HELD: usize = 80;
/// Pause between two steps of a stream attacker.
const STEP: Duration = Duration::from_millis(2);
/// A request the hub refuses whoever sends it: a page of another site.
const CROSS_SITE: &[u8] = b"GET /api/v1/stats HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://evil.example\r\n\r\n";
/// A tool's request, which must be answered however many are refused.
const LEGITIMATE: &[u8] = b"GET /api/v1/stats HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";

/// What the stream attackers did (`--hostile`).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Attacks {
    /// Connections opened that never sent `HELLO` (attack 2).
    pub silent_opened: u64,
    /// Of those, closed by the hub: to make room, or at its deadline.
    pub silent_closed_by_hub: u64,
    /// Requests refused on the held keep-alive HTTP connections (attack 3).
    pub http_refused: u64,
    /// Held HTTP connections the hub closed to make room.
    pub http_closed_by_hub: u64,
    /// Legitimate requests answered `200` meanwhile, each on a new connection.
    pub http_answered: u64,
    /// Connections that sent garbage and were closed by the hub.
    pub garbage_closed: u64,
}

impl Attacks {
    fn add(self, o: Self) -> Self {
        Self {
            silent_opened: self.silent_opened + o.silent_opened,
            silent_closed_by_hub: self.silent_closed_by_hub + o.silent_closed_by_hub,
            http_refused: self.http_refused + o.http_refused,
            http_closed_by_hub: self.http_closed_by_hub + o.http_closed_by_hub,
            http_answered: self.http_answered + o.http_answered,
            garbage_closed: self.garbage_closed + o.garbage_closed,
        }
    }
}

/// The hub's stream listeners the attackers use.
#[derive(Clone, Debug)]
pub struct Target {
    pub tcp: SocketAddr,
    pub unix: PathBuf,
}

/// The silent, control-API and garbage attackers, one thread each.
pub struct StreamAttacks {
    stop: Arc<AtomicBool>,
    threads: Vec<(&'static str, JoinHandle<Result<Attacks, BenchError>>)>,
}

type Attacker = fn(&AtomicBool, &Target) -> Result<Attacks, BenchError>;

impl StreamAttacks {
    pub fn start(target: Target) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let attackers: [(&'static str, Attacker); 3] =
            [("silent connections", silent), ("control API", control_api), ("garbage", garbage)];
        let threads = attackers
            .into_iter()
            .map(|(name, attack)| {
                let (stop, target) = (Arc::clone(&stop), target.clone());
                (name, std::thread::spawn(move || attack(&stop, &target)))
            })
            .collect();
        Self { stop, threads }
    }

    /// Stop them all (their connections closed); what they did, and what
    /// went wrong, by attacker.
    pub fn finish(self) -> (Attacks, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        let mut problems = Vec::new();
        let mut total = Attacks::default();
        for (name, thread) in self.threads {
            match thread.join() {
                Ok(Ok(done)) => total = total.add(done),
                Ok(Err(e)) => problems.push(format!("the {name} attacker: {e}")),
                Err(_) => problems.push(format!("the {name} attacker's thread panicked")),
            }
        }
        (total, problems)
    }
}

/// One legitimate request before the soak takes the hub's measure: the
/// control API's thread opens the netlink socket it asks the kernel who a
/// TCP peer is with at its first request, and keeps it for its life
/// (`fieldhub_shm::peer`). That is the hub's steady state, not a leak.
pub fn first_request(target: &Target) -> Result<(), BenchError> {
    match http_status(&mut BufReader::new(open(target, false)?), LEGITIMATE)? {
        200 => Ok(()),
        status => Err(BenchError::Invalid(format!("the hub answered a request of its own user {status}"))),
    }
}

/// A connection to the hub over TCP or its unix socket.
fn open(target: &Target, over_unix: bool) -> std::io::Result<StreamSocket> {
    let conn = match over_unix {
        true => StreamSocket::Unix(UnixStream::connect(&target.unix)?),
        false => StreamSocket::Tcp(TcpStream::connect(target.tcp)?),
    };
    conn.set_read_timeout(Some(PATIENCE))?;
    Ok(conn)
}

/// Whether the hub has closed `conn` (or written to it: a `REFUSE` before
/// closing), without waiting.
fn closed_by_hub(conn: &mut StreamSocket) -> std::io::Result<bool> {
    conn.set_nonblocking(true)?;
    let read = conn.read(&mut [0u8; 512]);
    conn.set_nonblocking(false)?;
    Ok(!matches!(read, Err(e) if e.kind() == ErrorKind::WouldBlock))
}

/// Attack 2: connections that never say `HELLO`, [`SILENT_HELD`] held on
/// each transport; one more every step, the oldest dropped beyond that.
fn silent(stop: &AtomicBool, target: &Target) -> Result<Attacks, BenchError> {
    let mut done = Attacks::default();
    let mut held: [VecDeque<StreamSocket>; 2] = Default::default();
    while !stop.load(Ordering::Relaxed) {
        for (over_unix, held) in [false, true].into_iter().zip(held.iter_mut()) {
            let before = held.len();
            held.retain_mut(|c| !closed_by_hub(c).unwrap_or(true));
            done.silent_closed_by_hub += (before - held.len()) as u64;
            held.push_back(open(target, over_unix)?);
            done.silent_opened += 1;
            if held.len() > SILENT_HELD {
                held.pop_front();
            }
        }
        std::thread::sleep(STEP);
    }
    Ok(done)
}

/// Attack 3: [`HTTP_HELD`] keep-alive connections, each asking in turn
/// what the hub refuses; after each turn of them a legitimate request,
/// which must be answered.
fn control_api(stop: &AtomicBool, target: &Target) -> Result<Attacks, BenchError> {
    let mut done = Attacks::default();
    let mut held: Vec<Option<BufReader<StreamSocket>>> = (0..HTTP_HELD).map(|_| None).collect();
    while !stop.load(Ordering::Relaxed) {
        for slot in &mut held {
            let conn = match slot {
                Some(conn) => conn,
                None => slot.insert(BufReader::new(open(target, false)?)),
            };
            match http_status(conn, CROSS_SITE) {
                Ok(403) => done.http_refused += 1,
                Ok(status) => return Err(BenchError::Invalid(format!("a cross-site request was answered {status}"))),
                Err(_) => {
                    *slot = None;
                    done.http_closed_by_hub += 1;
                }
            }
            std::thread::sleep(STEP);
        }
        let mut fresh = BufReader::new(open(target, false)?);
        match http_status(&mut fresh, LEGITIMATE)? {
            200 => done.http_answered += 1,
            status => {
                return Err(BenchError::Invalid(format!(
                    "a legitimate request was answered {status} while {HTTP_HELD} connections were held"
                )))
            }
        }
    }
    Ok(done)
}

/// Send `request`; the status of its response, whose body is read.
fn http_status(conn: &mut BufReader<StreamSocket>, request: &[u8]) -> std::io::Result<u16> {
    conn.get_mut().write_all(request)?;
    let (mut status, mut length, mut line) = (None, 0usize, String::new());
    loop {
        line.clear();
        if conn.read_line(&mut line)? == 0 {
            return Err(ErrorKind::UnexpectedEof.into());
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if status.is_none() {
            status = line.split(' ').nth(1).and_then(|s| s.parse::<u16>().ok());
        } else if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
    }
    std::io::copy(&mut conn.by_ref().take(length as u64), &mut std::io::sink())?;
    status.ok_or_else(|| std::io::Error::new(ErrorKind::InvalidData, "a response without a status line"))
}

/// Bad input: a connection writes one kind of garbage in turn — random
/// bytes, an oversize length prefix, a version-1 `HELLO` — over TCP and
/// the unix socket by turns; the hub must close it.
fn garbage(stop: &AtomicBool, target: &Target) -> Result<Attacks, BenchError> {
    let mut done = Attacks::default();
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut round = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let bytes = match round % 3 {
            0 => (0..64)
                .map(|_| {
                    // xorshift64: noise, nothing more.
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    rng as u8
                })
                .collect(),
            1 => (fieldhub_proto::limits::MAX_MESSAGE_LEN + 1).to_le_bytes().to_vec(),
            _ => version_1_hello(),
        };
        let mut conn = open(target, round % 2 == 1)?;
        // The hub may close it before it has all: that is an answer too.
        let _ = conn.write_all(&bytes);
        match conn.read_to_end(&mut Vec::new()) {
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Err(BenchError::Stalled(format!(
                    "the hub kept a connection that sent {} bytes of garbage open for {PATIENCE:?}",
                    bytes.len()
                )))
            }
            _ => done.garbage_closed += 1,
        }
        round += 1;
        std::thread::sleep(STEP);
    }
    Ok(done)
}

/// A `HELLO` of protocol version 1, length prefix included: name "old",
/// then its token "sesame" in clear (the hub must refuse it by its version
/// before it reads the token; `hostile_input::challenge` checks the answer).
pub fn version_1_hello() -> Vec<u8> {
    let mut body = vec![wire::msg::HELLO];
    body.extend_from_slice(b"FHUB");
    body.extend_from_slice(&1u16.to_le_bytes());
    body.extend_from_slice(&[3, b'o', b'l', b'd', 6]);
    body.extend_from_slice(b"sesame");
    let mut bytes = (body.len() as u32).to_le_bytes().to_vec();
    bytes.extend_from_slice(&body);
    bytes
}
