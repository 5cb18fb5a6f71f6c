//! The shared-memory link to a local hub (`shm://NAME`, `spec/shm.md`).
//!
//! Connecting: the session socket of the hub, the `HELLO`/`WELCOME`
//! handshake of `spec/protocol.md`, and with `WELCOME` the client's segment
//! and the hub's bell segment (`SCM_RIGHTS`). From then on:
//!
//! - sending writes the wire message straight into the to-hub ring (under a
//!   lock: the ring has one producer, the client has many callers) and rings
//!   the hub's doorbell — a system call only if the hub sleeps. A full ring
//!   waits on the space doorbell, which the hub rings as it takes messages.
//! - the reader thread takes messages from the to-client ring, waiting on
//!   the client's doorbell, and hands them to the same dispatcher as the
//!   stream reader.
//! - the watch thread blocks on the session socket: when it ends (the hub
//!   stopped or died), it marks the link ended and wakes both waiters, so no
//!   call hangs on a dead hub.

use std::io::Write;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use fieldhub_proto::limits::MAX_MESSAGE_LEN;
use fieldhub_proto::wire::{self, check_length, Message};
use fieldhub_shm::{socket, BellSegment, ClientSegment, Consumer, Producer, WaitPolicy};

use crate::ring_sender::{RingSender, SendFail};
use crate::ClientError;

/// A connected shared-memory link.
pub(crate) struct ShmLink {
    segment: ClientSegment,
    hub_bell: BellSegment,
    socket: UnixStream,
    /// Ends when the session socket ends (the hub is gone) or the client
    /// closes it.
    to_hub: RingSender,
    policy: WaitPolicy,
}

/// What the handshake established.
pub(crate) struct Welcomed {
    pub link: ShmLink,
    pub client_id: u32,
    pub hub_name: String,
}

impl ShmLink {
    /// Connect to the hub serving `name` and perform the handshake.
    pub fn connect(
        url: &str,
        name: &str,
        busy_poll: bool,
        hello: &[u8],
        timeout: Duration,
    ) -> Result<Welcomed, ClientError> {
        let path = socket::socket_path(name).map_err(|why| ClientError::InvalidUrl { url: url.into(), why })?;
        let connect_error = |source| ClientError::Connect { url: url.into(), source };
        let socket = UnixStream::connect(&path).map_err(connect_error)?;
        (&socket).write_all(hello).map_err(connect_error)?;
        socket.set_read_timeout(Some(timeout)).map_err(connect_error)?;
        let (body, mut fds) = read_welcome(&socket, timeout)?;
        let (client_id, hub_name) = match wire::decode(&body).map_err(|e| ClientError::Protocol(e.to_string()))? {
            Message::Welcome(w) => (w.client_id, w.hub_name.to_owned()),
            Message::Refuse(r) => {
                return Err(ClientError::Refused { url: url.into(), code: r.code, text: r.text.into() })
            }
            other => return Err(ClientError::Protocol(format!("expected WELCOME, got {}", other.type_name()))),
        };
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
            policy: if busy_poll { WaitPolicy::BUSY_POLL } else { WaitPolicy::ADAPTIVE },
        };
        Ok(Welcomed { link, client_id, hub_name })
    }

    fn ended(&self) -> bool {
        self.to_hub.ended()
    }

    /// Write one message, built by `encode`, into the to-hub ring, waiting
    /// at most `timeout` (`None`: no limit) for room.
    pub fn send(&self, encode: impl FnOnce(&mut Vec<u8>), timeout: Option<Duration>) -> Result<(), SendFail> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let space = self.segment.space_bell();
        self.to_hub
            .send(&self.segment.to_hub(), encode, deadline, |deadline, room| space.wait(self.policy, deadline, room))?;
        self.hub_bell.bell().ring();
        Ok(())
    }

    /// Reader thread: take messages from the to-client ring and hand each
    /// to `dispatch` until it says stop (`Some(reason)` closes the link) or
    /// the link ends. Returns the reason the link ended, `None` to leave
    /// without closing (the receiver is gone).
    pub fn read_loop(&self, mut dispatch: impl FnMut(Message<'_>) -> Flow) -> Option<String> {
        let ring = self.segment.to_client();
        let mut consumer = Consumer::starting_at(0);
        let mut body = Vec::new();
        let bell = self.segment.client_bell();
        loop {
            match consumer.pop(&ring, MAX_MESSAGE_LEN as usize, &mut body) {
                Ok(true) => match wire::decode(&body) {
                    Ok(message) => match dispatch(message) {
                        // A thread in `wait_for_delivery` may have seen the
                        // ring already emptied by this thread and the queue
                        // not yet filled: it sleeps on the same bell.
                        Flow::Continue => {
                            bell.ring();
                        }
                        Flow::Close(reason) => return Some(reason),
                        Flow::Leave => return None,
                    },
                    Err(e) => return Some(format!("the hub sent an invalid message: {e}")),
                },
                Ok(false) if self.ended() => {
                    // Messages published before the socket ended come first.
                    if !consumer.has_message(&ring) {
                        return Some("the hub closed the connection".into());
                    }
                }
                Ok(false) => {
                    bell.wait(self.policy, None, || consumer.has_message(&ring) || self.ended());
                }
                Err(e) => return Some(format!("the hub corrupted the shared ring: {e}")),
            }
        }
    }

    /// Wait as the reader thread does — on the client's doorbell — until
    /// the hub publishes into the to-client ring, `ready()` holds, the link
    /// ends or `deadline` passes. A thread about to wait for frames calls
    /// this first, so the hub's wake-up reaches it directly and it does not
    /// also need the reader thread to wake it: one wake-up per delivery
    /// instead of two.
    pub fn wait_for_delivery(&self, deadline: Option<Instant>, ready: impl Fn() -> bool) {
        let ring = self.segment.to_client();
        self.segment.client_bell().wait(self.policy, deadline, || ready() || ring.has_unread() || self.ended());
    }

    /// Watch thread: block until the session socket ends, then end the link.
    pub fn watch(&self) {
        let mut buf = [0u8; 64];
        loop {
            match std::io::Read::read(&mut &self.socket, &mut buf) {
                Ok(n) if n > 0 => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                _ => break,
            }
        }
        self.end();
    }

    /// End the link: wake the reader and any sender waiting for room.
    fn end(&self) {
        // The wakes make sleeping waiters re-check the flag.
        self.to_hub.end();
        self.segment.client_bell().wake();
        self.segment.space_bell().wake();
    }

    /// Close the session socket (the hub detaches this client once it has
    /// taken what is in the ring) and end the link.
    pub fn shutdown(&self) {
        let _ = self.socket.shutdown(std::net::Shutdown::Both);
        self.end();
    }
}

/// What the dispatcher tells the reader loop.
pub(crate) enum Flow {
    Continue,
    /// End the link with this reason.
    Close(String),
    /// Stop reading without closing (nobody receives any more).
    Leave,
}

/// Read the first message and the descriptors that come with it (never
/// more than that message: nothing else may be taken from the socket).
fn read_welcome(socket: &UnixStream, timeout: Duration) -> Result<(Vec<u8>, Vec<OwnedFd>), ClientError> {
    let mut buf = vec![0u8; 4];
    let mut fds = Vec::new();
    let mut filled = 0;
    while filled < buf.len() {
        let n = socket::recv_with_fds(socket, &mut buf[filled..], &mut fds).map_err(|e| match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => ClientError::Timeout(timeout),
            _ => ClientError::Protocol(format!("during handshake: {e}")),
        })?;
        if n == 0 {
            return Err(ClientError::Closed { reason: "the hub closed the connection during the handshake".into() });
        }
        filled += n;
        if filled == 4 && buf.len() == 4 {
            let len = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
            let len = check_length(len, MAX_MESSAGE_LEN).map_err(|e| ClientError::Protocol(e.to_string()))?;
            buf.resize(4 + len, 0);
        }
    }
    buf.drain(..4);
    Ok((buf, fds))
}
