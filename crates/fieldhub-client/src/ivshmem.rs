//! The ivshmem link to a hub (`ivshmem://PATH`, `spec/shm.md` section 8):
//! a client inside a QEMU guest mapping the `ivshmem-plain` device's BAR
//! (or, on the host, the region's backing file).
//!
//! Nothing crosses the VM border but memory, so:
//!
//! - connecting asks the hub's poller for a fresh session (a nonce in the
//!   region's `connect` word, answered in `granted`), then sends `HELLO`
//!   and reads `WELCOME` through the rings of the client segment;
//! - every wait polls (spin briefly, then sleep with a growing back-off up
//!   to 1 ms): the reader thread for the to-client ring, a sender for room
//!   in the to-hub ring. The hub's poller notices what is published;
//! - the watch thread bumps `client_beat` every 100 ms and ends the link
//!   when the hub stops (`generation` changes), ends the session
//!   (`granted` no longer holds this client's nonce) or goes silent
//!   (`hub_beat` still for 3 s), so no call waits on a hub that is gone.
//!
//! Invariant: the link never trusts the region — headers are checked
//! before use, ring indices and lengths by the ring code, messages decoded
//! from private copies.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use fieldhub_proto::limits::MAX_MESSAGE_LEN;
use fieldhub_proto::wire::{self, Message};
use fieldhub_shm::region::{BEAT_INTERVAL, BEAT_TIMEOUT};
use fieldhub_shm::ring::slots_for;
use fieldhub_shm::{Backoff, ClientSegment, Consumer, OpenError, Producer, Region};

use crate::ring_sender::{RingSender, SendFail};
use crate::shm::Flow;
use crate::ClientError;

/// A connected ivshmem link.
pub(crate) struct IvshmemLink {
    region: Region,
    segment: ClientSegment,
    /// This session's nonce, as granted by the hub.
    nonce: u32,
    /// The hub's generation when the session began.
    generation: u32,
    /// Ends when the session ends (hub gone, session taken) or the client
    /// closes it.
    to_hub: RingSender,
    /// Where the reader takes up the to-client ring (after `WELCOME`).
    to_client_start: u32,
}

/// What the handshake established.
pub(crate) struct Welcomed {
    pub link: IvshmemLink,
    pub client_id: u32,
    pub hub_name: String,
}

impl IvshmemLink {
    /// Map the region at `path`, ask for a session and perform the handshake.
    pub fn connect(url: &str, path: &Path, hello: &[u8], timeout: Duration) -> Result<Welcomed, ClientError> {
        let deadline = Instant::now() + timeout;
        let unreachable = |why: String| ClientError::Connect { url: url.into(), source: std::io::Error::other(why) };
        let not_a_region = |e: OpenError| match e {
            OpenError::Map(source) => ClientError::Connect { url: url.into(), source },
            other => ClientError::Protocol(format!("{} is not a fieldhub ivshmem region: {other}", path.display())),
        };
        let region = Region::open(path).map_err(not_a_region)?;
        // SYNC POINT with the hub's Release store once the region is set up.
        let generation = region.generation().load(Ordering::Acquire);
        if generation == 0 {
            return Err(unreachable(format!("no hub serves the region {} (it is not initialised)", path.display())));
        }
        let nonce = fresh_nonce(region.connect().load(Ordering::Relaxed));
        // SYNC POINT with the hub poller's Acquire load: a new session, please.
        region.connect().store(nonce, Ordering::Release);
        let mut backoff = Backoff::new(Backoff::MAX_SLEEP);
        // SYNC POINT with the poller's Release store after it reset the
        // segment: the reset is visible once the nonce is.
        let granted = backoff.wait(Some(deadline), || region.granted().load(Ordering::Acquire) == nonce);
        if !granted {
            return Err(unreachable(format!("no hub answered on the region {} within {timeout:?}", path.display())));
        }
        let segment = region.open_segment().map_err(not_a_region)?;
        let mut producer = Producer::starting_at(0);
        match producer.try_push(&segment.to_hub(), hello) {
            Ok(true) => {}
            _ => return Err(ClientError::Protocol("the hub's to-hub ring has no room for HELLO".into())),
        }
        let ring = segment.to_client();
        let mut consumer = Consumer::starting_at(0);
        if !backoff.wait(Some(deadline), || consumer.has_message(&ring)) {
            return Err(ClientError::Timeout(timeout));
        }
        let mut body = Vec::new();
        consumer.pop(&ring, MAX_MESSAGE_LEN as usize, &mut body).map_err(|e| ClientError::Protocol(e.to_string()))?;
        let (client_id, hub_name, welcome_slots) =
            match wire::decode(&body).map_err(|e| ClientError::Protocol(e.to_string()))? {
                Message::Welcome(w) => (w.client_id, w.hub_name.to_owned(), slots_for(4 + body.len())),
                Message::Refuse(r) => {
                    return Err(ClientError::Refused { url: url.into(), code: r.code, text: r.text.into() })
                }
                other => return Err(ClientError::Protocol(format!("expected WELCOME, got {}", other.type_name()))),
            };
        let link = IvshmemLink {
            region,
            segment,
            nonce,
            generation,
            to_hub: RingSender::new(producer),
            to_client_start: welcome_slots,
        };
        Ok(Welcomed { link, client_id, hub_name })
    }

    fn ended(&self) -> bool {
        self.to_hub.ended()
    }

    /// Write one message, built by `encode`, into the to-hub ring, polling
    /// at most `timeout` (`None`: no limit) for room. The hub's poller sees
    /// the new head; there is nothing to ring.
    pub fn send(&self, encode: impl FnOnce(&mut Vec<u8>), timeout: Option<Duration>) -> Result<(), SendFail> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut backoff = Backoff::new(Backoff::MAX_SLEEP);
        self.to_hub.send(&self.segment.to_hub(), encode, deadline, |deadline, room| backoff.wait(deadline, room))
    }

    /// Reader thread: take messages from the to-client ring and hand each
    /// to `dispatch`, as the `shm://` reader does, polling while it is empty.
    pub fn read_loop(&self, mut dispatch: impl FnMut(Message<'_>) -> Flow) -> Option<String> {
        let ring = self.segment.to_client();
        let mut consumer = Consumer::starting_at(self.to_client_start);
        let mut body = Vec::new();
        let mut backoff = Backoff::new(Backoff::MAX_SLEEP);
        loop {
            match consumer.pop(&ring, MAX_MESSAGE_LEN as usize, &mut body) {
                Ok(true) => match wire::decode(&body) {
                    Ok(message) => match dispatch(message) {
                        Flow::Continue => {}
                        Flow::Close(reason) => return Some(reason),
                        Flow::Leave => return None,
                    },
                    Err(e) => return Some(format!("the hub sent an invalid message: {e}")),
                },
                Ok(false) if self.ended() => {
                    if !consumer.has_message(&ring) {
                        return Some(self.end_reason());
                    }
                }
                Ok(false) => {
                    backoff.wait(None, || consumer.has_message(&ring) || self.ended());
                }
                // A segment reset under a session the hub ended looks like
                // a corrupt ring: report the session's end instead.
                Err(_) if self.session_over().is_some() => return Some(self.end_reason()),
                Err(e) => return Some(format!("the hub corrupted the shared ring: {e}")),
            }
        }
    }

    /// Why the session is over, if the region says it is.
    fn session_over(&self) -> Option<&'static str> {
        // SYNC POINT with the hub's Release stores of both words.
        if self.region.generation().load(Ordering::Acquire) != self.generation {
            return Some("the hub serving the ivshmem region stopped or restarted");
        }
        if self.region.granted().load(Ordering::Acquire) != self.nonce {
            return Some("the hub ended the ivshmem session (another client took the region over, or this one was silent too long)");
        }
        None
    }

    fn end_reason(&self) -> String {
        self.session_over().unwrap_or("the hub closed the connection").into()
    }

    /// Watch thread: bump this client's beat and watch the hub's, until the
    /// link ends.
    pub fn watch(&self) {
        const STEP: Duration = Duration::from_millis(20);
        // Relaxed: a liveness counter; nothing is read through it.
        let mut hub_beat = self.region.hub_beat().load(Ordering::Relaxed);
        let mut hub_seen = Instant::now();
        let mut next_beat = Instant::now();
        while !self.ended() {
            let now = Instant::now();
            if now >= next_beat {
                next_beat = now + BEAT_INTERVAL;
                self.region.client_beat().fetch_add(1, Ordering::Relaxed);
                let seen = self.region.hub_beat().load(Ordering::Relaxed);
                if seen != hub_beat {
                    (hub_beat, hub_seen) = (seen, now);
                }
                if self.session_over().is_some() || now.duration_since(hub_seen) >= BEAT_TIMEOUT {
                    break;
                }
            }
            std::thread::sleep(STEP);
        }
        self.end();
    }

    /// End the link: the reader and senders notice on their next poll.
    pub fn end(&self) {
        self.to_hub.end();
    }
}

/// A nonce for a new session: nonzero, and not the one in the word now.
fn fresh_nonce(current: u32) -> u32 {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
    let nonce = (nanos as u32) ^ std::process::id().rotate_left(13);
    if nonce == 0 || nonce == current {
        nonce.wrapping_add(2) | 1
    } else {
        nonce
    }
}
