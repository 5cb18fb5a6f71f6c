//! `fieldhub gen`: generate frames, like cangen.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use fieldhub_client::{ClientError, Frame, FrameFlags};
use fieldhub_proto::frame::{fd_round_up_len, MAX_EXTENDED_ID, MAX_STANDARD_ID};
use fieldhub_proto::text::format_cansend;
use rand::{Rng, SeedableRng};

use crate::{HubSelect, PortSelect};

#[derive(clap::Args)]
pub struct GenArgs {
    #[command(flatten)]
    hub: HubSelect,
    /// Gap between frames in milliseconds; 0 sends as fast as the bus takes them.
    #[arg(short = 'g', default_value = "200", value_name = "MS")]
    gap_ms: f64,
    /// Identifier: r (random), i (incrementing) or a hex id.
    #[arg(short = 'I', default_value = "r", value_name = "MODE")]
    id: String,
    /// Data length: r (random), i (incrementing) or a number.
    #[arg(short = 'L', default_value = "r", value_name = "MODE")]
    len: String,
    /// Data: r (random), i (incrementing little-endian counter) or hex bytes.
    #[arg(short = 'D', default_value = "r", value_name = "MODE")]
    data: String,
    /// Stop after this many frames (default: run until interrupted).
    #[arg(short = 'n', value_name = "COUNT")]
    count: Option<u64>,
    /// Extended (29-bit) identifiers.
    #[arg(short = 'e')]
    extended: bool,
    /// CAN FD frames.
    #[arg(short = 'f')]
    fd: bool,
    /// CAN FD frames with bit rate switch (implies -f).
    #[arg(short = 'b')]
    brs: bool,
    /// Remote frames.
    #[arg(short = 'R')]
    remote: bool,
    /// Print each frame sent.
    #[arg(short = 'v')]
    verbose: bool,
    /// Seed for the random modes, for reproducible traffic.
    #[arg(long)]
    seed: Option<u64>,
    #[command(flatten)]
    port: PortSelect,
    #[command(flatten)]
    reconnect: crate::reconnect::Reconnect,
    /// Channel to send on.
    channel: String,
}

enum Mode<T> {
    Random,
    Increment,
    Fixed(T),
}

/// `r`, `i` or a fixed value `fixed` parses; `value` says which values
/// are valid, for the message when none is given.
fn mode<T>(text: &str, what: &str, value: &str, fixed: impl Fn(&str) -> Option<T>) -> anyhow::Result<Mode<T>> {
    match text {
        "r" => Ok(Mode::Random),
        "i" => Ok(Mode::Increment),
        other => fixed(other)
            .map(Mode::Fixed)
            .with_context(|| format!("{what} {other}: expected r (random), i (incrementing) or {value}")),
    }
}

fn parse_hex_data(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok()).collect()
}

pub fn run(args: GenArgs) -> anyhow::Result<()> {
    let fd = args.fd || args.brs;
    if fd && args.remote {
        bail!("CAN FD has no remote frames: drop -R or -f/-b");
    }
    let max_len = if fd { 64 } else { 8 };
    let max_id = if args.extended { MAX_EXTENDED_ID } else { MAX_STANDARD_ID };
    let ids = if args.extended {
        format!("a hex identifier 0 to {max_id:X}")
    } else {
        format!("a hex identifier 0 to {max_id:X} (to {MAX_EXTENDED_ID:X} with -e)")
    };
    let id_mode = mode(&args.id, "-I", &ids, |s| u32::from_str_radix(s, 16).ok().filter(|&id| id <= max_id))?;
    let data_mode = mode(&args.data, "-D", "hex bytes, two digits each (DEADBEEF)", parse_hex_data)?;
    let len_mode = match &data_mode {
        // Fixed data fixes the length, as in cangen.
        Mode::Fixed(bytes) => Mode::Fixed(bytes.len()),
        _ => {
            let lengths = if fd { "a length 0 to 64".to_owned() } else { "a length 0 to 8 (to 64 with -f)".to_owned() };
            mode(&args.len, "-L", &lengths, |s| s.parse::<usize>().ok().filter(|&l| l <= max_len))?
        }
    };
    if args.gap_ms < 0.0 || !args.gap_ms.is_finite() {
        bail!("-g {}: the gap must be 0 or more milliseconds", args.gap_ms);
    }
    let gap = Duration::from_secs_f64(args.gap_ms / 1000.0);

    let open = || -> anyhow::Result<_> {
        let client = args.hub.connect("gen")?;
        let port = client
            .open_port_with(&args.channel, &args.port.config(1)?)
            .with_context(|| format!("cannot open a port on '{}'", args.channel))?;
        Ok((client, port))
    };
    let (mut client, mut port) = args.reconnect.until_connected("gen", open)?;
    let mut rng = match args.seed {
        Some(seed) => rand::rngs::StdRng::seed_from_u64(seed),
        None => rand::rngs::StdRng::from_entropy(),
    };
    let (mut next_id, mut next_len, mut counter) = (0u32, 0usize, 0u64);
    let started = Instant::now();
    let mut sent = 0u64;
    while args.count.is_none_or(|n| sent < n) {
        let id = match &id_mode {
            Mode::Random => rng.gen_range(0..=max_id),
            Mode::Increment => {
                let id = next_id;
                next_id = if next_id >= max_id { 0 } else { next_id + 1 };
                id
            }
            Mode::Fixed(id) => *id,
        };
        let mut len = match &len_mode {
            Mode::Random => rng.gen_range(0..=max_len),
            Mode::Increment => {
                let len = next_len;
                next_len = (next_len + 1) % (max_len + 1);
                len
            }
            Mode::Fixed(len) => *len,
        };
        if fd {
            len = fd_round_up_len(len).unwrap_or(64);
        }
        let mut data = [0u8; 64];
        match &data_mode {
            Mode::Random => rng.fill(&mut data[..len]),
            Mode::Increment => {
                let bytes = counter.to_le_bytes();
                let n = len.min(8);
                data[..n].copy_from_slice(&bytes[..n]);
                counter = counter.wrapping_add(1);
            }
            Mode::Fixed(bytes) => data[..bytes.len()].copy_from_slice(bytes),
        }
        let frame = if args.remote {
            Frame::remote(id, args.extended, len)?
        } else if fd {
            let mut flags = if args.brs { FrameFlags::BRS } else { FrameFlags::empty() };
            if args.extended {
                flags = flags.union(FrameFlags::EXTENDED);
            }
            Frame::can_fd(id, flags, &data[..len])?
        } else {
            Frame::can(id, args.extended, &data[..len])?
        };
        while let Err(e) = client.send(&port, &frame) {
            // The frames the gone hub had not confirmed are lost with it;
            // this one goes to the hub that comes back.
            args.reconnect.after("gen", e.into())?;
            (client, port) = args.reconnect.until_connected("gen", open)?;
        }
        if args.verbose {
            crate::output::outln!("  {}  {}", args.channel, format_cansend(&frame))?;
        }
        sent += 1;
        if !gap.is_zero() {
            // Pace against the start time so gaps do not accumulate drift.
            let due = started + gap.mul_f64(sent as f64);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
    }
    // A timed channel or a lossless reader can hold the last frames for a
    // while: wait as long as the hub is there, not one request's timeout.
    // Every report of frames off the bus comes before the answer; each flush
    // returns one, so flush until none is left and say them all at once.
    let mut dropped = fieldhub_client::DropTally::default();
    loop {
        match client.flush_all(&mut dropped) {
            Ok(_) if dropped.is_empty() => return Ok(()),
            Ok(_) => {
                bail!("{} of {sent} frames are not on the bus ({dropped}; docs/frame-fate.md)", dropped.total())
            }
            Err(ClientError::Timeout(after)) => {
                eprintln!("gen: the bus has not taken the last frames after {after:?}; still waiting (Ctrl-C to stop)")
            }
            Err(e) => return Err(e).context("waiting for the hub to take the last frames"),
        }
    }
}
