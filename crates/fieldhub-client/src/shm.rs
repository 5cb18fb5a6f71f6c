//! The shared-memory link to a local hub (`shm://NAME`, `spec/shm.md`).
//!
//! Connecting: the session socket of the hub, the handshake over it, and
//! with `WELCOME` the client's segment and the hub's bell segment
//! (`SCM_RIGHTS`). From then on:
//!
//! - sending writes the wire message straight into the to-hub ring
//!   ([`RingSender`]) and rings the hub's doorbell — a system call only if
//!   the hub sleeps. A full ring waits on the space doorbell, which the hub
//!   rings as it takes messages. A synchronised participant's frames do
//!   not ring (`ShmLink::quiet_frames`): the hub holds them until the
//!   participant's step ends anyway, and the message that ends it rings.
//! - the thread holding the client's consumer token (`receive.rs`: an
//!   application thread waiting in `recv` or for a reply, or a reader
//!   thread once the ready fd exists) takes messages from the to-client
//!   ring ([`RingReceiver`]) and waits on the client's doorbell, which the
//!   hub rings after publishing. Before it sleeps it may spin for a time
//!   that follows the recent gaps between arrivals (`spin.rs`): a
//!   request/answer exchange finds its answer while still spinning where a
//!   core is free for that, a periodic stream (a 500 kbit/s bus: a frame
//!   every 250 µs) sleeps at once. Other waiting threads sleep on the same
//!   doorbell; the consumer rings it for them.
//! - the link's own thread blocks on the session socket: when it ends (the
//!   hub stopped or died), it marks the link ended and wakes every waiter,
//!   so no call hangs on a dead hub.

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use fieldhub_proto::limits::MAX_MESSAGE_LEN;
use fieldhub_proto::wire::check_length;
use fieldhub_proto::Frame;
use fieldhub_shm::{socket, AdaptiveSpin, BellSegment, ClientSegment, Producer, WaitPolicy};

use crate::handshake::{handshake, Fault, Greeting, Session};
use crate::link::{Flow, Link, SendFail, Took};
use crate::ring_receiver::RingReceiver;
use crate::ring_sender::{one_frame, RingSender};
use crate::{lock, spin, ClientError, ClientOptions};

/// A connected shared-memory link.
pub(crate) struct ShmLink {
    segment: ClientSegment,
    hub_bell: BellSegment,
    /// Its end is the hub's end; closing it releases the hub.
    socket: UnixStream,
    /// Ends when the session socket ends (the hub is gone) or the client
    /// closes it.
    to_hub: RingSender,
    /// Locked by the consumer-token holder only, so never contended.
    to_client: Mutex<ToClient>,
    policy: WaitPolicy,
    /// A synchronised participant's link (virtual time, `spec/protocol.md`
    /// 6.8): sending a frame does not ring the hub's doorbell. The hub
    /// stages a participant's frames until its step ends, so a wake-up per
    /// frame would cost the participant a system call and the sleeping hub
    /// a round of input for nothing; the `STEP` that ends the step rings,
    /// as every other message does (a `PING` of a flush, `CLOSE_PORT`),
    /// and the hub reads the ring in order, so it has the step's frames
    /// before the step's end. A sender that finds the ring full rings
    /// before it waits for room: only the hub makes room. Anything else
    /// (a participant dropped for stalling sends as an observer) is read
    /// at the hub's next round of input, at the latest after its longest
    /// sleep (50 ms).
    quiet_frames: bool,
}

/// The consumer's side of the to-client ring.
struct ToClient {
    receiver: RingReceiver,
    /// How long the consumer spins before it sleeps.
    spin: AdaptiveSpin,
    /// The last wait ended without a message: sleep without spinning.
    idle: bool,
}

impl ShmLink {
    /// Connect to the hub serving `name` (in `dir` when its URL names one)
    /// and perform the handshake.
    pub fn connect(
        url: &str,
        name: &str,
        dir: Option<&Path>,
        busy_poll: bool,
        options: &ClientOptions,
    ) -> Result<(Self, Session), ClientError> {
        let path = match dir {
            Some(dir) => socket::socket_path_in(dir, name),
            None => socket::socket_path(name),
        };
        let path = path.map_err(|why| ClientError::InvalidUrl { url: url.into(), why })?;
        let connect_error = |source| ClientError::Connect { url: url.into(), source };
        // Only a hub of this user's is told anything (the token included).
        if let Some(dir) = path.parent() {
            socket::check_private_dir(dir).map_err(connect_error)?;
        }
        let socket = UnixStream::connect(&path).map_err(connect_error)?;
        socket::check_peer_is_this_user(&socket).map_err(connect_error)?;
        let mut greeting = SocketGreeting::new(&socket);
        let session = handshake(url, options, Instant::now() + options.timeout, &mut greeting)?;
        let mut fds = greeting.fds;
        if fds.len() != socket::PASSED_FDS {
            return Err(ClientError::Protocol(format!(
                "the hub passed {} descriptors with WELCOME, expected {} (segment and doorbell)",
                fds.len(),
                socket::PASSED_FDS
            )));
        }
        let unusable =
            |e: fieldhub_shm::OpenError| ClientError::Protocol(format!("the hub's shared memory is unusable: {e}"));
        let bell_fd = fds.pop().expect("two descriptors");
        let segment = ClientSegment::open(fds.pop().expect("two descriptors")).map_err(unusable)?;
        let hub_bell = BellSegment::open(bell_fd).map_err(unusable)?;
        socket.set_read_timeout(None).map_err(connect_error)?;
        let link = ShmLink {
            segment,
            hub_bell,
            socket,
            to_hub: RingSender::new(Producer::starting_at(0)),
            to_client: Mutex::new(ToClient { receiver: RingReceiver::new(), spin: spin::consumer_spin(), idle: false }),
            policy: if busy_poll { WaitPolicy::BUSY_POLL } else { WaitPolicy::ADAPTIVE },
            quiet_frames: options.synchronized,
        };
        Ok((link, session))
    }

    fn ended(&self) -> bool {
        self.to_hub.ended()
    }

    /// Write one message, built by `encode`, into the to-hub ring, waiting
    /// at most `timeout` (`None`: no limit) for room.
    fn send(&self, encode: impl FnOnce(&mut Vec<u8>), timeout: Option<Duration>) -> Result<(), SendFail> {
        self.send_quietly(encode, timeout)?;
        self.hub_bell.bell().ring();
        Ok(())
    }

    /// [`ShmLink::send`] without the doorbell, except before waiting for
    /// room: a full ring empties only when the hub reads it.
    fn send_quietly(&self, encode: impl FnOnce(&mut Vec<u8>), timeout: Option<Duration>) -> Result<(), SendFail> {
        let space = self.segment.space_bell();
        self.to_hub.send(&self.segment.to_hub(), encode, timeout, |deadline, room| {
            self.hub_bell.bell().ring();
            space.wait(self.policy, deadline, room)
        })
    }

    /// End the link: wake every thread waiting on the client's doorbell
    /// and any sender waiting for room.
    fn end(&self) {
        // The wakes make sleeping waiters re-check the flag.
        self.to_hub.end();
        self.segment.client_bell().wake();
        self.segment.space_bell().wake();
    }
}

impl Link for ShmLink {
    fn send_frame(&self, port: u16, frame: &Frame, at_ns: u64, timeout: Option<Duration>) -> Result<(), SendFail> {
        match self.quiet_frames {
            true => self.send_quietly(one_frame(port, frame, at_ns), timeout),
            false => self.send(one_frame(port, frame, at_ns), timeout),
        }
    }

    fn send_message(&self, message: Vec<u8>, timeout: Option<Duration>) -> Result<(), SendFail> {
        self.send(|out| out.extend_from_slice(&message), timeout)
    }

    fn direct(&self) -> bool {
        true
    }

    fn take(
        &self,
        deadline: Option<Instant>,
        until: &dyn Fn() -> bool,
        deliver: &mut dyn FnMut(&[u8]) -> Flow,
    ) -> Took {
        let ring = self.segment.to_client();
        let bell = self.segment.client_bell();
        let busy_poll = self.policy.busy_poll;
        let mut to_client = lock(&self.to_client);
        let ToClient { receiver, spin, idle } = &mut *to_client;
        let wait = |deadline: Option<Instant>, ready: &mut dyn FnMut() -> bool| {
            if busy_poll {
                return bell.wait(WaitPolicy::BUSY_POLL, deadline, ready);
            }
            let started = Instant::now();
            let budget = if *idle { Duration::ZERO } else { spin.budget() };
            let came = spin::wait(bell, budget, deadline, ready);
            if came {
                spin.observe(started.elapsed());
            }
            *idle = !came;
            came
        };
        receiver.run(&ring, deadline, until, || self.ended(), wait, deliver).took()
    }

    /// Waiters other than the consumer sleep on the client's doorbell too:
    /// the hub's ring wakes them with the consumer, and the consumer rings
    /// it when it hands them something or lets the token go.
    fn wait(&self, deadline: Option<Instant>, ready: &dyn Fn() -> bool) -> bool {
        let bell = self.segment.client_bell();
        match self.policy.busy_poll {
            true => bell.wait(WaitPolicy::BUSY_POLL, deadline, ready),
            false => spin::wait(bell, spin::FOLLOWER_SPIN, deadline, ready),
        }
    }

    fn notify(&self) {
        self.segment.client_bell().ring();
    }

    /// Block until the session socket ends, then end the link.
    fn tend(&self) -> Option<String> {
        let mut buf = [0u8; 64];
        loop {
            match (&self.socket).read(&mut buf) {
                Ok(n) if n > 0 => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                _ => break,
            }
        }
        self.end();
        // The consumer reports the end once it has taken what the hub
        // published before it.
        None
    }

    /// Everything sent is already in the ring; the hub takes it before it
    /// lets go of this client, which it does when the socket closes.
    fn close(&self) {
        let _ = self.socket.shutdown(std::net::Shutdown::Both);
        self.end();
    }
}

/// The handshake over the session socket: `HELLO` written, the answer read
/// with the descriptors that come with it.
pub(crate) struct SocketGreeting<'a> {
    socket: &'a UnixStream,
    body: Vec<u8>,
    /// Passed with the answer (`WELCOME`: the segment, then the bell).
    pub fds: Vec<OwnedFd>,
}

impl<'a> SocketGreeting<'a> {
    pub fn new(socket: &'a UnixStream) -> Self {
        Self { socket, body: Vec::new(), fds: Vec::new() }
    }
}

impl Greeting for SocketGreeting<'_> {
    fn send_handshake(&mut self, message: &[u8]) -> Result<(), Fault> {
        self.socket.write_all(message).map_err(Fault::Io)
    }

    /// Reads exactly one message: nothing after it may be taken from the
    /// socket.
    fn answer(&mut self, deadline: Instant) -> Result<&[u8], Fault> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Fault::TimedOut);
        }
        self.socket.set_read_timeout(Some(left)).map_err(Fault::Io)?;
        let buf = &mut self.body;
        buf.clear();
        buf.resize(4, 0);
        let mut filled = 0;
        while filled < buf.len() {
            let n =
                socket::recv_with_fds(self.socket, &mut buf[filled..], &mut self.fds).map_err(|e| match e.kind() {
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => Fault::TimedOut,
                    _ => Fault::Io(e),
                })?;
            if n == 0 {
                return Err(Fault::Closed);
            }
            filled += n;
            if filled == 4 && buf.len() == 4 {
                let len = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
                let len = check_length(len, MAX_MESSAGE_LEN).map_err(|e| Fault::Garbled(e.to_string()))?;
                buf.resize(4 + len, 0);
            }
        }
        Ok(&buf[4..])
    }
}
