//! The ivshmem link to a hub (`ivshmem://PATH`, `spec/shm.md` section 8):
//! a client inside a QEMU guest mapping the `ivshmem-plain` device's BAR
//! (or, on the host, the region's backing file).
//!
//! Nothing crosses the VM border but memory, so:
//!
//! - connecting asks the hub's poller for a fresh session (a nonce in the
//!   region's `connect` word, answered in `granted`), then performs the
//!   handshake through the rings of the client segment ([`RingGreeting`]);
//! - every wait polls (spin briefly, then sleep with a growing back-off up
//!   to 1 ms): the consumer for the to-client ring ([`RingReceiver`]; an
//!   application thread waiting for the hub, or a reader thread once the
//!   ready fd exists, as on `shm://`), other waiting threads for what the
//!   consumer hands them, a sender for room in the to-hub ring
//!   ([`RingSender`]). The hub's poller notices what is published;
//! - the link's own thread bumps `client_beat` every 100 ms and ends the link
//!   when the hub stops (`generation` changes), ends the session
//!   (`granted` no longer holds this client's nonce) or goes silent
//!   (`hub_beat` still for 3 s), so no call waits on a hub that is gone.
//!
//! Invariant: the link never trusts the region — headers are checked
//! before use, ring indices and lengths by the ring code, messages decoded
//! from private copies.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use fieldhub_proto::Frame;
use fieldhub_shm::region::{BEAT_INTERVAL, BEAT_TIMEOUT};
use fieldhub_shm::{Backoff, ClientSegment, OpenError, Producer, Region};

use crate::handshake::{handshake, Fault, Greeting, Session};
use crate::link::{Flow, Link, SendFail, Took};
use crate::ring_receiver::{RingReceiver, Stop, Taken};
use crate::ring_sender::{one_frame, RingSender};
use crate::{lock, ClientError, ClientOptions};

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
    /// Locked by the consumer-token holder only, after the handshake took
    /// `WELCOME` from it.
    to_client: Mutex<RingReceiver>,
}

impl IvshmemLink {
    /// Map the region at `path`, ask for a session and perform the handshake.
    pub fn connect(url: &str, path: &Path, options: &ClientOptions) -> Result<(Self, Session), ClientError> {
        let timeout = options.timeout;
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
        // SYNC POINT with the poller's Release store after it reset the
        // segment: the reset is visible once the nonce is.
        let granted =
            Backoff::new(Backoff::MAX_SLEEP).wait(Some(deadline), || region.granted().load(Ordering::Acquire) == nonce);
        if !granted {
            return Err(unreachable(format!("no hub answered on the region {} within {timeout:?}", path.display())));
        }
        let segment = region.open_segment().map_err(not_a_region)?;
        let mut greeting = RingGreeting::new(&segment);
        let session = handshake(url, options, deadline, &mut greeting)?;
        let RingGreeting { producer, receiver, .. } = greeting;
        let link = IvshmemLink {
            region,
            segment,
            nonce,
            generation,
            to_hub: RingSender::new(producer),
            to_client: Mutex::new(receiver),
        };
        Ok((link, session))
    }

    fn ended(&self) -> bool {
        self.to_hub.ended()
    }

    /// Write one message, built by `encode`, into the to-hub ring, polling
    /// at most `timeout` (`None`: no limit) for room. The hub's poller sees
    /// the new head; there is nothing to ring.
    fn send(&self, encode: impl FnOnce(&mut Vec<u8>), timeout: Option<Duration>) -> Result<(), SendFail> {
        let mut backoff = Backoff::new(Backoff::MAX_SLEEP);
        self.to_hub.send(&self.segment.to_hub(), encode, timeout, |deadline, room| backoff.wait(deadline, room))
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
}

impl Link for IvshmemLink {
    fn send_frame(&self, port: u16, frame: &Frame, at_ns: u64, timeout: Option<Duration>) -> Result<(), SendFail> {
        self.send(one_frame(port, frame, at_ns), timeout)
    }

    fn send_message(&self, message: Vec<u8>, timeout: Option<Duration>) -> Result<(), SendFail> {
        self.send(|out| out.extend_from_slice(&message), timeout)
    }

    fn direct(&self) -> bool {
        true
    }

    /// Takes messages as the `shm://` consumer does, polling while the ring
    /// is empty.
    fn take(
        &self,
        deadline: Option<Instant>,
        until: &dyn Fn() -> bool,
        deliver: &mut dyn FnMut(&[u8]) -> Flow,
    ) -> Took {
        let ring = self.segment.to_client();
        let mut backoff = Backoff::new(Backoff::MAX_SLEEP);
        let wait = |deadline: Option<Instant>, ready: &mut dyn FnMut() -> bool| backoff.wait(deadline, ready);
        let stop = lock(&self.to_client).run(&ring, deadline, until, || self.ended(), wait, deliver);
        match stop {
            // A segment reset under a session the hub ended looks like a
            // corrupt ring, or an empty one: report the session's end.
            Stop::Drained | Stop::Corrupt(_) => match self.session_over() {
                Some(over) => Took::Ended(over.into()),
                None => stop.took(),
            },
            _ => stop.took(),
        }
    }

    /// Polls: nothing in the region can wake a thread across the VM border,
    /// so the consumer's hand-overs are seen on the next look.
    fn wait(&self, deadline: Option<Instant>, ready: &dyn Fn() -> bool) -> bool {
        Backoff::new(Backoff::MAX_SLEEP).wait(deadline, ready)
    }

    fn notify(&self) {}

    /// Bump this client's beat and watch the hub's, until the link ends.
    fn tend(&self) -> Option<String> {
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
        // The consumer and senders notice on their next poll; the end is
        // reported once what the hub published has been taken.
        self.to_hub.end();
        None
    }

    /// The hub's poller sees the goodbye in the ring and lets the session
    /// go; without one it does after the client's beat stops.
    fn close(&self) {
        self.to_hub.end();
    }
}

/// The handshake through the rings of a freshly granted segment: `HELLO`
/// published in the to-hub ring, the answer polled for in the to-client
/// ring. The link takes over both ring ends where the handshake left them.
pub(crate) struct RingGreeting<'a> {
    segment: &'a ClientSegment,
    producer: Producer,
    receiver: RingReceiver,
}

impl<'a> RingGreeting<'a> {
    pub fn new(segment: &'a ClientSegment) -> Self {
        Self { segment, producer: Producer::starting_at(0), receiver: RingReceiver::new() }
    }
}

impl Greeting for RingGreeting<'_> {
    fn send_handshake(&mut self, message: &[u8]) -> Result<(), Fault> {
        match self.producer.try_push(&self.segment.to_hub(), message) {
            Ok(true) => Ok(()),
            Ok(false) => Err(Fault::Corrupt("its to-hub ring has no room for a handshake message".into())),
            Err(e) => Err(Fault::Corrupt(e.to_string())),
        }
    }

    fn answer(&mut self, deadline: Instant) -> Result<&[u8], Fault> {
        let mut backoff = Backoff::new(Backoff::MAX_SLEEP);
        let taken = self.receiver.take_one(
            &self.segment.to_client(),
            Some(deadline),
            || false,
            |deadline, ready| backoff.wait(deadline, ready),
        );
        match taken.map_err(|e| Fault::Corrupt(e.to_string()))? {
            Taken::Message(body) => Ok(body),
            Taken::TimedOut => Err(Fault::TimedOut),
            Taken::Ended => Err(Fault::Closed),
        }
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
