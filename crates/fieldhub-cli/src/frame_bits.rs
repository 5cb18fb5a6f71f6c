//! `fieldhub frame-bits`: the exact on-wire length of a frame.

use fieldhub_proto::bits::FrameBits;
use fieldhub_proto::text::parse_cansend;

#[derive(clap::Args)]
pub struct FrameBitsArgs {
    /// Frame in cansend syntax (123#DEADBEEF, 1ABCDEF0#R, 123##1DEADBEEF); CAN XL
    /// and raw frames are refused (no bit model yet).
    frame: String,
    /// Nominal (arbitration) bitrate in bit/s.
    #[arg(long, default_value = "500000")]
    bitrate: u32,
    /// Data-phase bitrate for CAN FD frames with BRS (default: the nominal bitrate).
    #[arg(long)]
    data_bitrate: Option<u32>,
    /// Print {"bits", "stuff_bits", "duration_ns", …} as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(args: FrameBitsArgs) -> anyhow::Result<()> {
    let frame = parse_cansend(&args.frame)?;
    if args.bitrate == 0 || args.data_bitrate == Some(0) {
        anyhow::bail!("bitrates must be positive");
    }
    if frame.is_xl() || frame.is_raw() {
        anyhow::bail!(
            "{}: CAN XL and raw frames have no bit model yet (issue 38: the exact ISO 11898-1:2024 XL layout is \
             not implemented), so their length on the wire is not computed",
            args.frame
        );
    }
    let data_bitrate = args.data_bitrate.unwrap_or(args.bitrate);
    let bits = FrameBits::of(&frame);
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
        crate::output::outln!(
            "{}: {} bits ({} stuff bits, 3-bit intermission included), {:.3} µs at {} bit/s{}",
            args.frame,
            bits.total,
            bits.stuff_bits,
            duration_ns as f64 / 1000.0,
            args.bitrate,
            if bits.data_bits > 0 { format!(" / {data_bitrate} bit/s data phase") } else { String::new() }
        )?;
    }
    Ok(())
}
