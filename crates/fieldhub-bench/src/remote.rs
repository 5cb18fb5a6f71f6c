//! Round trips through a hub the benchmark does not start: the answering
//! side ([`echo`]) runs wherever the path under test ends — a VM guest on
//! ivshmem or virtio-serial, another machine — and the probe ([`ping`]) here.
//! `bench/vm.sh` measures guest↔host paths this way, next to a host-only
//! pair on the same hub in the same run.
//!
//! The probe sends request frames (id `0x100`, a counter in the first four
//! payload bytes) and waits for each answer (id `0x101`, the same counter)
//! before the next: four one-way hops through the hub, as [`latency`]
//! measures them. A wrong counter is an error, never a sample.
//!
//! [`latency`]: crate::latency

use std::time::Instant;

use fieldhub_client::{Client, ClientOptions, Filter, Port};
use serde::Serialize;

use crate::stats::Distribution;
use crate::{BenchError, FrameSize, Progress, PATIENCE, WARM_UP};

/// Identifier of the probe's requests.
pub const REQUEST_ID: u32 = 0x100;
/// Identifier of the echo's answers.
pub const ANSWER_ID: u32 = 0x101;

/// One `ping` series.
#[derive(Debug, Serialize)]
pub struct PingResult {
    pub url: String,
    pub channel: String,
    pub payload_bytes: usize,
    pub round_trip: Distribution,
}

/// A channel of a hub to measure on, with the token the hub needs if any.
#[derive(Clone, Copy, Debug)]
pub struct HubChannel<'a> {
    pub url: &'a str,
    pub token: Option<&'a str>,
    pub channel: &'a str,
}

/// A client with one port on `channel` that hears only frames of `id`,
/// presenting `token` if the hub needs one.
pub fn join(url: &str, name: &str, token: Option<&str>, channel: &str, id: u32) -> Result<(Client, Port), BenchError> {
    let options = ClientOptions { name: name.into(), token: token.map(str::to_owned), ..Default::default() };
    let client = Client::connect_with(url, &options)?;
    let port = client.open_port_with(channel, &crate::fd_port())?;
    client.set_filters(&port, Some(&[Filter { can_id: id, can_mask: 0x7FF }]))?;
    Ok((client, port))
}

/// Answer `rounds` requests on `port` (every request, forever, when `None`),
/// each with an answer of the request's size carrying its counter. Returns
/// the number answered; ends early only when the hub connection does, or —
/// with a bound — when no request comes within the patience.
pub fn answer(client: &Client, port: &Port, rounds: Option<usize>) -> Result<u64, BenchError> {
    let mut answered = 0u64;
    while rounds.is_none_or(|n| answered < n as u64) {
        let Some(request) = client.recv(Some(PATIENCE))? else {
            if rounds.is_some() {
                return Err(BenchError::Stalled("the echo client heard nothing".into()));
            }
            continue;
        };
        let data = request.frame.data();
        let counter = u32::from_le_bytes(data[..4.min(data.len())].try_into().unwrap_or_default());
        let size = if data.len() > 8 { FrameSize::Fd64 } else { FrameSize::Can8 };
        client.send(port, &size.frame(ANSWER_ID, counter))?;
        answered += 1;
    }
    Ok(answered)
}

/// The time one round trip spent inside each call of the probe: `send`
/// (handing the request over) and `recv` (waiting for the answer and
/// taking it). Together they are the round trip.
#[derive(Clone, Copy, Debug)]
pub struct CallTime {
    pub send_ns: u64,
    pub recv_ns: u64,
}

impl CallTime {
    pub fn round_trip_ns(self) -> u64 {
        self.send_ns + self.recv_ns
    }

    /// The round trips of `calls`, in ns.
    pub fn round_trips(calls: &[CallTime]) -> Vec<u64> {
        calls.iter().map(|c| c.round_trip_ns()).collect()
    }
}

/// Send `samples` (plus the warm-up) requests of `size` one at a time and
/// time each answer, and the calls that make up each round trip.
pub fn probe_calls(
    client: &Client,
    port: &Port,
    size: FrameSize,
    samples: usize,
    progress: Progress<'_>,
) -> Result<Vec<CallTime>, BenchError> {
    let mut times = Vec::with_capacity(samples);
    for i in 0..WARM_UP + samples {
        let started = Instant::now();
        client.send(port, &size.frame(REQUEST_ID, i as u32))?;
        let sent = Instant::now();
        let Some(answer) = client.recv(Some(PATIENCE))? else {
            return Err(BenchError::Stalled(format!("no answer to round trip {i}; is an echo on the channel?")));
        };
        let answered = Instant::now();
        if answer.frame.data().get(..4) != Some(&(i as u32).to_le_bytes()[..]) {
            return Err(BenchError::Stalled(format!("round trip {i} was answered out of order")));
        }
        if i >= WARM_UP {
            let ns = |d: std::time::Duration| d.as_nanos() as u64;
            times.push(CallTime { send_ns: ns(sent - started), recv_ns: ns(answered - sent) });
            if times.len() % 1000 == 0 {
                progress(&format!("{}: {}/{samples}", size.label(), times.len()));
            }
        }
    }
    Ok(times)
}

/// `fieldhub bench echo`: answer probes on `channel` of the hub at `url`
/// until the hub connection ends.
pub fn echo(url: &str, token: Option<&str>, channel: &str) -> Result<u64, BenchError> {
    let (client, port) = join(url, "bench-echo", token, channel, REQUEST_ID)?;
    answer(&client, &port, None)
}

/// `fieldhub bench ping`: `samples` round trips to an echo on `channel`.
pub fn ping(
    url: &str,
    token: Option<&str>,
    channel: &str,
    size: FrameSize,
    samples: usize,
    progress: Progress<'_>,
) -> Result<PingResult, BenchError> {
    if samples == 0 {
        return Err(BenchError::Invalid("at least one sample is needed".into()));
    }
    let (client, port) = join(url, "bench-probe", token, channel, ANSWER_ID)?;
    let mut times = CallTime::round_trips(&probe_calls(&client, &port, size, samples, progress)?);
    Ok(PingResult {
        url: url.to_owned(),
        channel: channel.to_owned(),
        payload_bytes: size.payload(),
        round_trip: Distribution::of(&mut times),
    })
}
