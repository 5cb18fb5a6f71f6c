//! Background traffic on the channels other than the measured one, for the
//! channel scaling series: every channel busy, as on a vehicle network,
//! while the measured pair's round trips are timed on the first.
//!
//! Few clients, so the series varies channels and not clients: a sender and
//! a receiver per 32 channels (a client's port limit). Each sender has a
//! port on each of its channels and sends frames round-robin across them,
//! paced to a fixed rate per channel; its receiver, with a port on each of
//! the same channels, takes them all.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use fieldhub_client::{Client, ClientOptions, Port};
use fieldhub_proto::limits::MAX_PORTS_PER_CLIENT;
use serde::Serialize;

use crate::{BenchError, FrameSize, PATIENCE};

/// Identifier of the background frames (apart from the probe's and echo's).
const BACKGROUND_ID: u32 = 0x200;
/// How often the sender catches up with its pace.
const TICK: Duration = Duration::from_millis(1);
/// Quiet time after the sender stopped that ends the receiver's count.
const DRAINED: Duration = Duration::from_millis(200);

/// What the background carried over the whole measurement.
#[derive(Clone, Debug, Serialize)]
pub struct BackgroundTraffic {
    /// Channels with background traffic (all but the measured one).
    pub channels: usize,
    pub frames_per_s_per_channel: f64,
    pub frames_sent: u64,
    pub frames_received: u64,
    /// Frames the hub dropped for the receiver (full receive queue).
    pub frames_dropped: u64,
}

/// The connected senders and receivers; they leave the hub when dropped.
pub struct Background {
    groups: Vec<Group>,
    rate_per_channel: f64,
    size: FrameSize,
}

/// Up to a client's worth of channels, with a sender and a receiver.
struct Group {
    sender: Client,
    ports: Vec<Port>,
    receiver: Client,
}

impl Background {
    /// Senders and receivers with a port on each of `channels` of the hub at
    /// `url`, to carry `rate_per_channel` frames of `size` a second on each.
    pub fn connect(url: &str, channels: &[String], rate_per_channel: f64, size: FrameSize) -> Result<Self, BenchError> {
        let connect = |name: String| Client::connect_with(url, &ClientOptions { name, ..Default::default() });
        let mut groups = Vec::new();
        for (i, channels) in channels.chunks(MAX_PORTS_PER_CLIENT).enumerate() {
            let (sender, receiver) =
                (connect(format!("bench-background-tx{i}"))?, connect(format!("bench-background-rx{i}"))?);
            let mut ports = Vec::with_capacity(channels.len());
            for channel in channels {
                ports.push(sender.open_port_with(channel, &crate::fd_port())?);
                receiver.open_port_with(channel, &crate::fd_port())?;
            }
            groups.push(Group { sender, ports, receiver });
        }
        Ok(Self { groups, rate_per_channel, size })
    }

    /// Run `measure` while the background traffic flows, then let the
    /// receivers take what is left; `measure`'s result and the traffic.
    pub fn during<T>(
        &self,
        measure: impl FnOnce() -> Result<T, BenchError>,
    ) -> Result<(T, BackgroundTraffic), BenchError> {
        let stop = &AtomicBool::new(false);
        let sent: Vec<AtomicU64> = self.groups.iter().map(|_| AtomicU64::new(0)).collect();
        std::thread::scope(|s| {
            let senders: Vec<_> = (self.groups.iter().zip(&sent))
                .map(|(group, sent)| s.spawn(move || group.send(self.rate_per_channel, self.size, stop, sent)))
                .collect();
            let receivers: Vec<_> = (self.groups.iter().zip(&sent))
                .map(|(group, sent)| s.spawn(move || group.receive(stop, sent)))
                .collect();
            let measured = measure();
            stop.store(true, Ordering::Relaxed);
            let panicked = |_| BenchError::Stalled("a background client panicked".into());
            for sender in senders {
                sender.join().map_err(panicked)??;
            }
            let mut frames_received = 0;
            for receiver in receivers {
                frames_received += receiver.join().map_err(panicked)??;
            }
            let traffic = BackgroundTraffic {
                channels: self.groups.iter().map(|g| g.ports.len()).sum(),
                frames_per_s_per_channel: self.rate_per_channel,
                frames_sent: sent.iter().map(|n| n.load(Ordering::Relaxed)).sum(),
                frames_received,
                frames_dropped: self.groups.iter().map(Group::dropped).sum(),
            };
            Ok((measured?, traffic))
        })
    }
}

impl Group {
    /// Send round-robin across the group's channels until `stop`, keeping up
    /// with the pace (a late wake-up sends what is due at once).
    fn send(
        &self,
        rate_per_channel: f64,
        size: FrameSize,
        stop: &AtomicBool,
        sent: &AtomicU64,
    ) -> Result<(), BenchError> {
        let per_second = rate_per_channel * self.ports.len() as f64;
        let started = Instant::now();
        let mut count = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let due = (started.elapsed().as_secs_f64() * per_second) as u64;
            while count < due {
                let port = &self.ports[count as usize % self.ports.len()];
                self.sender.send_timeout(port, &size.frame(BACKGROUND_ID, count as u32), Some(PATIENCE))?;
                count += 1;
                sent.store(count, Ordering::Relaxed);
            }
            std::thread::sleep(TICK);
        }
        Ok(())
    }

    /// Frames received: until `stop`, then until everything sent has come
    /// (or been dropped) or nothing more comes.
    fn receive(&self, stop: &AtomicBool, sent: &AtomicU64) -> Result<u64, BenchError> {
        let mut received = 0u64;
        while !stop.load(Ordering::Relaxed) {
            received += u64::from(self.receiver.recv(Some(Duration::from_millis(20)))?.is_some());
        }
        while received + self.dropped() < sent.load(Ordering::Relaxed) {
            if self.receiver.recv(Some(DRAINED))?.is_none() {
                break;
            }
            received += 1;
        }
        Ok(received)
    }

    /// Frames the hub dropped for the receiver so far.
    fn dropped(&self) -> u64 {
        self.receiver.ports().iter().map(|p| self.receiver.rx_dropped(p)).sum()
    }
}
