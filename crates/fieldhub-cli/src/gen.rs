//! `fieldhub gen`: generate frames, like cangen (can-utils' cangen.c is
//! the reference for its options: `-m` mixes kinds per frame from the same
//! random bits, `-8` sends classic DLCs 9..15 with 8 bytes, `-c` bursts, `-X`
//! CAN XL frames with `-V`, `-S`, `-F` and `-A` for their VCID, SDT, flags and
//! acceptance field). `--raw` is fieldhub's own: raw frames for a `protocol =
//! "raw"` channel.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use fieldhub_client::{ClientError, Frame, FrameFlags};
use fieldhub_proto::frame::FrameKind;
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
    /// CAN FD frames with the error state indicator (implies -f), as cangen -E.
    #[arg(short = 'E')]
    esi: bool,
    /// Remote frames.
    #[arg(short = 'R')]
    remote: bool,
    /// Mix frame kinds at random, as cangen -m: 11- and 29-bit identifiers, remote frames among the
    /// classic ones, and on a CAN FD channel CAN FD frames with and without BRS and ESI.
    #[arg(short = 'm')]
    mix: bool,
    /// Classic frames may have a data length code above 8 (9 to 15, with 8 data bytes), as cangen -8:
    /// -L r and -L i then run over DLCs 0 to 15, and -L takes up to 15.
    #[arg(short = '8')]
    raw_dlc: bool,
    /// CAN XL frames, as cangen -X: -I is the 11-bit priority, -L a length 1 to 2048;
    /// -V, -S, -F and -A give the other fields (random by default, as in cangen).
    #[arg(short = 'X')]
    xl: bool,
    /// CAN XL virtual CAN network id (VCID): r (random), i (incrementing) or a hex byte.
    #[arg(short = 'V', value_name = "MODE")]
    vcid: Option<String>,
    /// CAN XL SDU type (SDT): r (random), i (incrementing) or a hex byte.
    #[arg(short = 'S', value_name = "MODE")]
    sdt: Option<String>,
    /// CAN XL flags: r (random), i (incrementing) or hex, SocketCAN's canxl_frame flags:
    /// 01 SEC, 02 RRS (80, XLF, is always set).
    #[arg(short = 'F', value_name = "MODE")]
    xl_flags: Option<String>,
    /// CAN XL acceptance field (AF): r (random), i (incrementing) or a hex value up to FFFFFFFF.
    #[arg(short = 'A', value_name = "MODE")]
    af: Option<String>,
    /// Raw frames for a protocol = "raw" channel: -I a 32-bit id, -L a length 0 to 2048.
    #[arg(long)]
    raw: bool,
    /// Frames per burst, as cangen -c: this many frames back to back, then the gap.
    #[arg(short = 'c', default_value = "1", value_name = "COUNT", value_parser = clap::value_parser!(u64).range(1..))]
    burst: u64,
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

/// The kind of one frame: what -e -f -b -E -R ask for, or -m draws.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Kind {
    extended: bool,
    fd: bool,
    brs: bool,
    esi: bool,
    remote: bool,
}

impl Kind {
    /// cangen -m's draw from one random number: bit 0 a 29-bit id; on a
    /// CAN FD channel bit 1 CAN FD, bits 2 and 3 its BRS and ESI; a classic
    /// frame is remote when bits 3 and 4 are both set (one in four).
    fn mixed(bits: u32, channel_fd: bool) -> Self {
        let fd = channel_fd && bits & 2 != 0;
        Self {
            extended: bits & 1 != 0,
            fd,
            brs: fd && bits & 4 != 0,
            esi: fd && bits & 8 != 0,
            remote: !fd && bits & 24 == 24,
        }
    }

    fn flags(self) -> FrameFlags {
        let mut flags = FrameFlags::empty();
        for (on, flag) in
            [(self.brs, FrameFlags::BRS), (self.esi, FrameFlags::ESI), (self.extended, FrameFlags::EXTENDED)]
        {
            if on {
                flags = flags.union(flag);
            }
        }
        flags
    }
}

/// A classic frame's data length code `dlc` (0..=15): its length and, above
/// 8, the raw DLC it carries (`len8_dlc`).
fn classic_dlc(dlc: usize) -> (usize, u8) {
    if dlc > 8 {
        (8, dlc as u8)
    } else {
        (dlc, 0)
    }
}

/// How `-V`, `-S`, `-F` and `-A` fill a CAN XL frame's own fields, each
/// as cangen does: random, incremented before each frame (the first frame
/// gets 1), or fixed.
struct XlFields {
    vcid: Mode<u8>,
    sdt: Mode<u8>,
    flags: Mode<u8>,
    af: Mode<u32>,
    /// The last values sent, which `i` increments.
    last: (u8, u8, u8, u32),
}

/// SocketCAN's `canxl_frame` flags `-F` takes: `CANXL_SEC`, `CANXL_RRS`,
/// and `CANXL_XLF`, which every CAN XL frame has.
const CANXL_SEC: u8 = 0x01;
const CANXL_RRS: u8 = 0x02;
const CANXL_XLF: u8 = 0x80;

impl XlFields {
    fn parse(args: &GenArgs) -> anyhow::Result<Self> {
        let given = [(&args.vcid, "-V"), (&args.sdt, "-S"), (&args.xl_flags, "-F"), (&args.af, "-A")];
        let given: Vec<&str> = given.into_iter().filter(|(mode, _)| mode.is_some()).map(|(_, name)| name).collect();
        if !args.xl && !given.is_empty() {
            bail!("{} are fields of CAN XL frames: add -X", given.join(" "));
        }
        let text = |mode: &Option<String>| mode.clone().unwrap_or_else(|| "r".to_owned());
        let byte = |s: &str| u8::from_str_radix(s, 16).ok();
        let flags = |s: &str| byte(s).filter(|f| f & !(CANXL_SEC | CANXL_RRS | CANXL_XLF) == 0);
        Ok(Self {
            vcid: mode(&text(&args.vcid), "-V", "a hex VCID 0 to FF", byte)?,
            sdt: mode(&text(&args.sdt), "-S", "a hex SDT 0 to FF", byte)?,
            flags: mode(&text(&args.xl_flags), "-F", "hex flags of 01 (SEC), 02 (RRS) and 80 (XLF)", flags)?,
            af: mode(&text(&args.af), "-A", "a hex acceptance field 0 to FFFFFFFF", |s| {
                u32::from_str_radix(s, 16).ok()
            })?,
            last: (0, 0, 0, 0),
        })
    }

    /// The next frame's VCID, SDT, flags and acceptance field.
    fn next(&mut self, rng: &mut impl Rng) -> (u8, u8, FrameFlags, u32) {
        let (vcid, sdt, flags, af) = &mut self.last;
        *vcid = draw(&self.vcid, *vcid, rng, |v| v.wrapping_add(1));
        *sdt = draw(&self.sdt, *sdt, rng, |v| v.wrapping_add(1));
        *flags = draw(&self.flags, *flags, rng, |v| v.wrapping_add(1));
        *af = draw(&self.af, *af, rng, |v| v.wrapping_add(1));
        let mut xl = FrameFlags::empty();
        xl.set(FrameFlags::XL_SEC, *flags & CANXL_SEC != 0);
        xl.set(FrameFlags::XL_RRS, *flags & CANXL_RRS != 0);
        (*vcid, *sdt, xl, *af)
    }
}

/// One field's next value under `mode`, after `last`.
fn draw<T: Copy>(mode: &Mode<T>, last: T, rng: &mut impl Rng, increment: impl Fn(T) -> T) -> T
where
    rand::distributions::Standard: rand::distributions::Distribution<T>,
{
    match mode {
        Mode::Random => rng.gen(),
        Mode::Increment => increment(last),
        Mode::Fixed(value) => *value,
    }
}

/// What `-X` and `--raw` exclude: the options of classic and FD frames.
fn check_long_kinds(args: &GenArgs) -> anyhow::Result<()> {
    let others = [(args.extended, "-e"), (args.fd, "-f"), (args.brs, "-b"), (args.esi, "-E")];
    let others = others.into_iter().chain([(args.remote, "-R"), (args.mix, "-m"), (args.raw_dlc, "-8")]);
    let given: Vec<&str> = others.filter(|(on, _)| *on).map(|(_, name)| name).collect();
    match (args.xl, args.raw) {
        (true, true) => bail!("-X and --raw are two frame kinds: give one"),
        (true, false) | (false, true) if !given.is_empty() => {
            let kind = if args.xl { "-X (CAN XL)" } else { "--raw" };
            bail!("{kind} takes none of {}: they are options of classic and CAN FD frames", given.join(" "))
        }
        _ => Ok(()),
    }
}

/// Largest CAN XL and raw payload.
const MAX_LONG_LEN: usize = fieldhub_proto::canxl::MAX_CANXL_DATA;

pub fn run(args: GenArgs) -> anyhow::Result<()> {
    check_long_kinds(&args)?;
    let long = args.xl || args.raw;
    let fd = args.fd || args.brs || args.esi;
    if fd && args.remote {
        bail!("CAN FD has no remote frames: drop -R or -f/-b/-E");
    }
    if fd && args.raw_dlc {
        bail!("-8 is for classic frames (a DLC above 8 with 8 bytes); CAN FD's DLCs 9 to 15 are its lengths 12 to 64");
    }
    let max_len = if long {
        MAX_LONG_LEN
    } else if fd || args.mix {
        64
    } else if args.raw_dlc {
        15
    } else {
        8
    };
    let max_id = match (args.raw, args.extended || args.mix) {
        (true, _) => u32::MAX,
        (false, true) => MAX_EXTENDED_ID,
        (false, false) => MAX_STANDARD_ID,
    };
    let ids = if long {
        format!("a hex {} 0 to {max_id:X}", if args.xl { "priority" } else { "id" })
    } else if args.extended || args.mix {
        format!("a hex identifier 0 to {max_id:X}")
    } else {
        format!("a hex identifier 0 to {max_id:X} (to {MAX_EXTENDED_ID:X} with -e)")
    };
    let mut xl_fields = XlFields::parse(&args)?;
    let id_mode = mode(&args.id, "-I", &ids, |s| u32::from_str_radix(s, 16).ok().filter(|&id| id <= max_id))?;
    let data_mode = mode(&args.data, "-D", "hex bytes, two digits each (DEADBEEF)", parse_hex_data)?;
    let len_mode = match &data_mode {
        // Fixed data fixes the length, as in cangen.
        Mode::Fixed(bytes) => Mode::Fixed(bytes.len()),
        _ => {
            let lengths = match max_len {
                MAX_LONG_LEN if args.xl => "a length 1 to 2048".to_owned(),
                MAX_LONG_LEN => "a length 0 to 2048".to_owned(),
                64 => "a length 0 to 64".to_owned(),
                15 => "a DLC 0 to 15".to_owned(),
                _ => "a length 0 to 8 (to 64 with -f, a DLC to 15 with -8)".to_owned(),
            };
            let least = usize::from(args.xl);
            mode(&args.len, "-L", &lengths, |s| s.parse::<usize>().ok().filter(|&l| (least..=max_len).contains(&l)))?
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
    let given = Kind { extended: args.extended, fd, brs: args.brs, esi: args.esi, remote: args.remote };
    let started = Instant::now();
    let mut sent = 0u64;
    // One buffer for every frame's data: up to 2,048 bytes with -X or --raw.
    let mut data = vec![0u8; max_len.max(64)];
    while args.count.is_none_or(|n| sent < n) {
        if !gap.is_zero() && sent > 0 && sent % args.burst == 0 {
            // The gap before each burst but the first, as cangen's; paced
            // against the start time so gaps do not accumulate drift.
            let due = started + gap.mul_f64((sent / args.burst) as f64);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
        let kind = if args.mix { Kind::mixed(rng.gen(), port.channel_fd) } else { given };
        // A fixed identifier beyond 11 bits is a 29-bit one whatever -m drew.
        let extended = !long && (kind.extended || matches!(id_mode, Mode::Fixed(id) if id > MAX_STANDARD_ID));
        let kind = Kind { extended, ..kind };
        let max_id = match (args.raw, extended) {
            (true, _) => u32::MAX,
            (false, true) => MAX_EXTENDED_ID,
            (false, false) => MAX_STANDARD_ID,
        };
        let id = match &id_mode {
            Mode::Random => rng.gen_range(0..=max_id),
            Mode::Increment => {
                let id = next_id;
                next_id = if next_id >= max_id { 0 } else { next_id + 1 };
                id
            }
            Mode::Fixed(id) => *id,
        };
        // A classic frame's length code runs to 15 with -8 (else to 8), a
        // CAN FD frame's length to 64.
        let most = if long {
            MAX_LONG_LEN
        } else if kind.fd {
            64
        } else if args.raw_dlc {
            15
        } else {
            8
        };
        // A CAN XL frame has at least one byte.
        let least = usize::from(args.xl);
        let code = match &len_mode {
            Mode::Random => rng.gen_range(least..=most),
            Mode::Increment => {
                let len = least + next_len % (most + 1 - least);
                next_len = (next_len + 1) % (most + 1 - least);
                len
            }
            Mode::Fixed(len) => *len.min(&most),
        };
        let (len, len8_dlc) = match (long, kind.fd) {
            (true, _) => (code, 0),
            (false, true) => (fd_round_up_len(code).unwrap_or(64), 0),
            (false, false) => classic_dlc(code),
        };
        match &data_mode {
            Mode::Random => rng.fill(&mut data[..len]),
            Mode::Increment => {
                let bytes = counter.to_le_bytes();
                let n = len.min(8);
                data[..n].copy_from_slice(&bytes[..n]);
                counter = counter.wrapping_add(1);
            }
            Mode::Fixed(bytes) => data[..bytes.len().min(len)].copy_from_slice(&bytes[..bytes.len().min(len)]),
        }
        let frame = if args.xl {
            let (vcid, sdt, flags, af) = xl_fields.next(&mut rng);
            Frame::can_xl(id as u16, vcid, sdt, flags, af, &data[..len])?
        } else if args.raw {
            Frame::raw(id, &data[..len])?
        } else if kind.remote {
            Frame::remote(id, extended, len)?
        } else if kind.fd {
            Frame::can_fd(id, kind.flags(), &data[..len])?
        } else {
            Frame::from_parts(FrameKind::Can, kind.flags(), id, len, len8_dlc, 0, &data[..len])?
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mix_draws_kinds_from_the_bits_cangen_uses() {
        let classic = |bits| Kind::mixed(bits, false);
        assert!(classic(1).extended && !classic(0).extended);
        assert!(!classic(2 | 4 | 8).fd, "no CAN FD on a classic channel");
        assert!(classic(24).remote && !classic(8).remote && !classic(16).remote);
        let fd = |bits| Kind::mixed(bits, true);
        assert_eq!(fd(2 | 4), Kind { extended: false, fd: true, brs: true, esi: false, remote: false });
        assert_eq!(fd(2 | 8 | 16), Kind { extended: false, fd: true, brs: false, esi: true, remote: false });
        assert!(!fd(4).brs, "BRS only on a CAN FD frame");
    }

    #[test]
    fn a_classic_dlc_above_8_carries_8_bytes() {
        assert_eq!(classic_dlc(5), (5, 0));
        assert_eq!(classic_dlc(8), (8, 0));
        assert_eq!(classic_dlc(15), (8, 15));
    }
}
