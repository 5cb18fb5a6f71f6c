//! Bystanders: extra shared-memory clients with a port on the measured
//! channel, so the hub fans every frame out to them as well. Each reads
//! everything the channel carries — during the measurement, or (idle) only
//! after it — and checks that sequence numbers only grow.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fieldhub_client::{Client, ClientOptions};
use serde::Serialize;

use crate::BenchError;

/// What the extra clients saw over the whole run.
#[derive(Clone, Debug, Serialize)]
pub struct ExtraClients {
    pub count: usize,
    /// They read only after the measurement.
    pub idle: bool,
    /// Frames the client that received the fewest received.
    pub min_frames_received: u64,
    /// Frames the hub dropped for them (full receive queues), summed.
    pub frames_dropped: u64,
    /// Every extra client saw sequence numbers only grow.
    pub order_kept: bool,
}

/// Connected bystanders; they leave the hub when dropped.
pub struct Bystanders {
    clients: Vec<Client>,
    /// Their applications only read what queued up once the measurement is
    /// over (their client threads still take every frame from the hub);
    /// otherwise each has a thread waiting in `recv`.
    idle: bool,
}

impl Bystanders {
    /// `count` clients on `channel` of the hub at `url`.
    pub fn connect(url: &str, channel: &str, count: usize, idle: bool) -> Result<Self, BenchError> {
        let clients = (0..count)
            .map(|i| {
                let options = ClientOptions { name: format!("bench-extra{i}"), ..Default::default() };
                let client = Client::connect_with(url, &options).map_err(|source| BenchError::ExtraClient {
                    index: i,
                    count,
                    source,
                })?;
                client.open_port_with(channel, &crate::fd_port())?;
                Ok(client)
            })
            .collect::<Result<Vec<_>, BenchError>>()?;
        Ok(Self { clients, idle })
    }

    /// Run `measure` while every bystander reads (or idles), then let them
    /// take what is left; `measure`'s result and what they saw.
    pub fn during<T>(&self, measure: impl FnOnce() -> Result<T, BenchError>) -> Result<(T, ExtraClients), BenchError> {
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let listeners: Vec<_> =
                self.clients.iter().map(|client| s.spawn(|| listen(client, &stop, self.idle))).collect();
            let measured = measure();
            stop.store(true, Ordering::Relaxed);
            let seen: Vec<(u64, bool)> = listeners.into_iter().map(|l| l.join().unwrap_or((0, false))).collect();
            let summary = ExtraClients {
                count: self.clients.len(),
                idle: self.idle,
                min_frames_received: seen.iter().map(|&(n, _)| n).min().unwrap_or(0),
                // The hub reports its drops before it answers a flush: only
                // then is the count complete.
                frames_dropped: self
                    .clients
                    .iter()
                    .map(|c| {
                        let _ = c.flush();
                        c.ports().iter().map(|p| c.rx_dropped(p)).sum::<u64>()
                    })
                    .sum(),
                order_kept: seen.iter().all(|&(_, ordered)| ordered),
            };
            Ok((measured?, summary))
        })
    }
}

/// An extra client's application: frames received, and whether their
/// sequence numbers only grew. An idle one reads only after `stop`.
fn listen(client: &Client, stop: &AtomicBool, idle: bool) -> (u64, bool) {
    let (mut frames, mut last_seq, mut ordered) = (0u64, 0u64, true);
    let mut take = |received: fieldhub_client::Received| {
        frames += 1;
        ordered &= received.meta.seq > last_seq;
        last_seq = received.meta.seq;
    };
    while !stop.load(Ordering::Relaxed) {
        if idle {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        match client.recv(Some(Duration::from_millis(20))) {
            Ok(Some(received)) => take(received),
            Ok(None) => {}
            Err(_) => return (frames, false),
        }
    }
    loop {
        match client.try_recv() {
            Ok(Some(received)) => take(received),
            Ok(None) => break,
            Err(_) => return (frames, false),
        }
    }
    (frames, ordered)
}
