//! `fieldhub frame-bits`: the exact on-wire length of a frame.

use fieldhub_proto::bits::{FrameBits, RawShape};
use fieldhub_proto::text::parse_cansend;

#[derive(clap::Args)]
pub struct FrameBitsArgs {
    /// Frame in cansend syntax (123#DEADBEEF, 1ABCDEF0#R, 123##1DEADBEEF), a CAN XL
    /// frame in can-utils' form (00123#80:00:00000000#A5) or a raw frame (R00000011#0A0B).
    frame: String,
    /// Nominal (arbitration) bitrate in bit/s.
    #[arg(long, default_value = "500000")]
    bitrate: u32,
    /// Data-phase bitrate for CAN FD frames with BRS (default: the nominal bitrate).
    #[arg(long)]
    data_bitrate: Option<u32>,
    /// Data-phase bitrate of CAN XL frames (default: the nominal bitrate).
    #[arg(long)]
    xl_data_bitrate: Option<u32>,
    /// A raw frame's bits per data byte, as a `protocol = "raw"` channel's `[channel.raw]`.
    #[arg(long, default_value = "8")]
    bits_per_byte: u32,
    /// A raw frame's bits besides its data bytes.
    #[arg(long, default_value = "0")]
    overhead_bits: u32,
    /// Print {"bits", "stuff_bits", "duration_ns", …} as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(args: FrameBitsArgs) -> anyhow::Result<()> {
    let frame = parse_cansend(&args.frame)?;
    if args.bitrate == 0 || args.data_bitrate == Some(0) || args.xl_data_bitrate == Some(0) {
        anyhow::bail!("bitrates must be positive");
    }
    if args.bits_per_byte == 0 {
        anyhow::bail!("--bits-per-byte must be positive");
    }
    // The data phase's rate: XL frames switch to the XL data bitrate, FD frames with BRS to the FD one.
    let data_bitrate = match frame.is_xl() {
        true => args.xl_data_bitrate.unwrap_or(args.bitrate),
        false => args.data_bitrate.unwrap_or(args.bitrate),
    };
    let bits = match frame.is_raw() {
        true => RawShape { bits_per_byte: args.bits_per_byte, overhead_bits: args.overhead_bits }.bits(frame.len()),
        false => FrameBits::of(&frame),
    };
    let duration_ns = bits.duration_ns(args.bitrate, data_bitrate);
    if args.json {
        let answer = serde_json::json!({
            "bits": bits.total,
            "stuff_bits": bits.stuff_bits,
            "duration_ns": duration_ns,
            "nominal_bits": bits.nominal_bits,
            "data_bits": bits.data_bits,
        });
        crate::output::outln!("{answer}")?;
    } else {
        let what = match (frame.is_xl(), frame.is_raw()) {
            (true, _) => "stuff bits, 3-bit intermission included; ISO 11898-1:2024 CAN XL layout, docs/buses.md",
            (_, true) => "the raw model: overhead plus bits per byte",
            _ => "stuff bits, 3-bit intermission included",
        };
        let stuff = if frame.is_raw() { String::new() } else { format!("{} ", bits.stuff_bits) };
        crate::output::outln!(
            "{}: {} bits ({stuff}{what}), {:.3} µs at {} bit/s{}",
            args.frame,
            bits.total,
            duration_ns as f64 / 1000.0,
            args.bitrate,
            if bits.data_bits > 0 { format!(" / {data_bitrate} bit/s data phase") } else { String::new() }
        )?;
    }
    Ok(())
}
