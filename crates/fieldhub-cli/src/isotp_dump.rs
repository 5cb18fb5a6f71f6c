//! `fieldhub isotp dump`: the ISO-TP frames between two ids, each explained
//! as isotpdump explains it (`[FF] ln: 4095 data: …`, `[FC] FC: 0 = CTS # …`),
//! or with `--sniff` the payloads they carry, reassembled per direction as
//! isotpsniffer prints them. It only listens: no flow control is sent.
//!
//! Invariant: the text functions do no I/O, so every layout is a unit test.

use std::time::{Duration, Instant};

use anyhow::Context;
use fieldhub_client::Frame;
use fieldhub_isotp::{Config, Event, Receiver};

use crate::candump_text::Stamps;
use crate::isotp_link::{parse_hex_byte, parse_id, CanId};
use crate::output::outln;
use crate::{HubSelect, PortSelect};

/// The terminal colours of can-utils' terminal.h: frames of the source id
/// red, of the destination blue.
const RED: &str = "\x1b[31m";
const BLUE: &str = "\x1b[34m";
const RESET: &str = "\x1b[0m";

/// isotpsniffer's `-f`: hex, ASCII or both.
const FORMAT_HEX: u8 = 1;
const FORMAT_ASCII: u8 = 2;

#[derive(clap::Args)]
pub struct DumpArgs {
    #[command(flatten)]
    hub: HubSelect,
    #[command(flatten)]
    port: PortSelect,
    /// Source CAN id, hex (8 digits: 29-bit).
    #[arg(short = 's', value_name = "ID", value_parser = parse_id)]
    source: CanId,
    /// Destination CAN id, hex.
    #[arg(short = 'd', value_name = "ID", value_parser = parse_id)]
    destination: CanId,
    /// Extended addressing: the address byte of the source's frames (hex), `any` for every one.
    #[arg(short = 'x', value_name = "ADDR|any", value_parser = parse_address)]
    extended: Option<Address>,
    /// Extended addressing, the destination's frames' address byte (default: -x's).
    #[arg(short = 'X', value_name = "ADDR|any", value_parser = parse_address, requires = "extended")]
    rx_extended: Option<Address>,
    /// Colours: the source's frames red, the destination's blue.
    #[arg(short = 'c')]
    colour: bool,
    /// The data as ASCII too.
    #[arg(short = 'a')]
    ascii: bool,
    /// Timestamps: a absolute, A absolute with local date and time, d delta, z since the first.
    #[arg(short = 't', value_name = "a|A|d|z", value_parser = ["a", "A", "d", "z"])]
    timestamps: Option<String>,
    /// Print the payloads, reassembled per direction, instead of the frames, as isotpsniffer.
    #[arg(long)]
    sniff: bool,
    /// With --sniff, isotpsniffer's -f: 1 hex, 2 ASCII, 3 both.
    #[arg(short = 'f', value_name = "1|2|3", default_value = "3", value_parser = clap::value_parser!(u8).range(1..=3), requires = "sniff")]
    format: u8,
    /// With --sniff, the first LEN bytes of each payload only, as isotpsniffer -h.
    #[arg(long = "head", value_name = "LEN", requires = "sniff")]
    head: Option<usize>,
    /// Exit after COUNT lines.
    #[arg(short = 'n', value_name = "COUNT")]
    count: Option<u64>,
    /// Channel.
    channel: String,
}

/// An extended address to match, or any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Address {
    Any,
    Byte(u8),
}

fn parse_address(text: &str) -> Result<Address, String> {
    match text {
        "any" => Ok(Address::Any),
        byte => parse_hex_byte(byte).map(Address::Byte),
    }
}

pub fn run(args: DumpArgs) -> anyhow::Result<()> {
    let client = args.hub.connect("isotp-dump")?;
    let port = client
        .open_port_with(&args.channel, &args.port.config(1)?)
        .with_context(|| format!("cannot listen on '{}'", args.channel))?;
    client.set_filters(&port, Some(&[args.source.filter(), args.destination.filter()]))?;
    let rx_extended = args.rx_extended.or(args.extended);
    let ext = args.extended.is_some();
    let byte = |address: Option<Address>| match address {
        Some(Address::Byte(b)) => Some(b),
        _ => None,
    };
    // The sniffer's listeners, one a direction (block size 0: no flow control of their own);
    // with `any` the address byte is skipped, not compared.
    let listener = |address: Option<Address>| {
        (Receiver::new(Config { rx_address: byte(address), ..Config::default() }), address == Some(Address::Any))
    };
    let mut listeners = [listener(args.extended), listener(rx_extended)];
    let mut stamps = Stamps::new(args.timestamps.as_deref().and_then(|t| t.chars().next()), false);
    let start = Instant::now();
    let mut printed = 0u64;
    while args.count.is_none_or(|n| printed < n) {
        let now = start.elapsed();
        let mut deadline: Option<Duration> = None;
        for (receiver, _) in &mut listeners {
            match receiver.poll(now) {
                Ok(Some(d)) => deadline = Some(deadline.map_or(d, |e| e.min(d))),
                Ok(None) => {}
                Err(e) => eprintln!("isotp dump: {e}"),
            }
        }
        let Some(received) = client.recv(deadline.map(|d| d.saturating_sub(start.elapsed())))? else {
            continue;
        };
        let frame = received.frame;
        let from_source = args.source.carries(&frame);
        if !from_source && !args.destination.carries(&frame) {
            continue;
        }
        let wanted = if from_source { args.extended } else { rx_extended };
        if let Some(Address::Byte(b)) = wanted {
            if frame.data().first() != Some(&b) {
                continue;
            }
        }
        let colour = args.colour.then_some(if from_source { RED } else { BLUE });
        let line = if args.sniff {
            let (receiver, any) = &mut listeners[usize::from(!from_source)];
            let data = if *any { frame.data().get(1..).unwrap_or_default() } else { frame.data() };
            let outcome = receiver.on_frame(data, start.elapsed());
            if let Some(e) = outcome.error {
                eprintln!("isotp dump: {}: {e}", if from_source { args.source } else { args.destination });
            }
            let Some(Event::Payload(payload)) = outcome.event else {
                continue;
            };
            let id = if from_source { args.source } else { args.destination };
            payload_line(&args.channel, id, &payload, args.format, args.head)
        } else {
            frame_line(&args.channel, &frame, ext, args.ascii)
        };
        let stamp = stamps.stamp(received.meta.timestamp_ns);
        match colour {
            Some(colour) => outln!("{colour}{stamp}{line}{RESET}")?,
            None => outln!("{stamp}{line}")?,
        }
        printed += 1;
    }
    Ok(())
}

/// One frame as isotpdump prints it: ` can0  7E0  [8]  [FF] ln: 20   data: 01 02 …`.
fn frame_line(channel: &str, frame: &Frame, ext: bool, ascii: bool) -> String {
    let data = frame.data();
    let ext = usize::from(ext);
    let mut line = match frame.is_extended() {
        true => format!(" {channel}  {:8X}", frame.id()),
        false => format!(" {channel}  {:3X}", frame.id()),
    };
    if ext == 1 {
        line.push_str(&format!("{{{:02X}}}", data.first().copied().unwrap_or(0)));
    }
    match frame.is_fd() {
        true => line.push_str(&format!(" [{:02}]  ", data.len())),
        false => line.push_str(&format!("  [{}]  ", data.len())),
    }
    let at = |i: usize| data.get(i).copied().unwrap_or(0);
    let n_pci = at(ext);
    let mut data_at = 0;
    match n_pci & 0xF0 {
        _ if data.len() <= ext => line.push_str("[??]"),
        0x00 if n_pci & 0x0F != 0 => {
            line.push_str(&format!("[SF] ln: {:<4} data:", n_pci & 0x0F));
            data_at = ext + 1;
        }
        0x00 => {
            line.push_str(&format!("[SF] ln: {:<4} data:", at(ext + 1)));
            data_at = ext + 2;
        }
        0x10 => {
            let short = (usize::from(n_pci & 0x0F) << 8) + usize::from(at(ext + 1));
            let len = match short {
                0 => {
                    data_at = ext + 6;
                    u32::from_be_bytes([at(ext + 2), at(ext + 3), at(ext + 4), at(ext + 5)]) as usize
                }
                len => {
                    data_at = ext + 2;
                    len
                }
            };
            line.push_str(&format!("[FF] ln: {len:<4} data:"));
        }
        0x20 => {
            line.push_str(&format!("[CF] sn: {:X}    data:", n_pci & 0x0F));
            data_at = ext + 1;
        }
        0x30 => {
            let status = n_pci & 0x0F;
            let info = ["CTS", "WT", "OVFLW", "reserved"][usize::from(status.min(3))];
            let block_size = at(ext + 1);
            let st_min = at(ext + 2);
            let off = if block_size == 0 { "= off " } else { "" };
            line.push_str(&format!("[FC] FC: {status} = {info} # BS: {block_size} {off}# STmin: 0x{st_min:02X} = "));
            match st_min {
                0x00..=0x7F => line.push_str(&format!("{st_min} ms")),
                0xF1..=0xF9 => line.push_str(&format!("{} us", u32::from(st_min & 0x0F) * 100)),
                _ => line.push_str("reserved"),
            }
        }
        _ => line.push_str("[??]"),
    }
    if data_at != 0 && data.len() > data_at {
        line.push(' ');
        for byte in &data[data_at..] {
            line.push_str(&format!("{byte:02X} "));
        }
        if ascii {
            // isotpdump's column: printf("%*s", width, "-  '"); a negative width (CAN FD) left-aligns.
            let width = ((7 - ext as i64) - (data.len() - data_at) as i64) * 3 + 5;
            match width >= 0 {
                true => line.push_str(&format!("{:>w$}", "-  '", w = width as usize)),
                false => line.push_str(&format!("{:<w$}", "-  '", w = width.unsigned_abs() as usize)),
            }
            line.extend(data[data_at..].iter().map(|&b| printable(b)));
            line.push('\'');
        }
    }
    line
}

fn printable(byte: u8) -> char {
    if (0x20..0x7F).contains(&byte) {
        byte as char
    } else {
        '.'
    }
}

/// One payload as isotpsniffer prints it: ` can0  7E0  [5]  01 02 03 04 05  - '.....'`.
fn payload_line(channel: &str, id: CanId, payload: &[u8], format: u8, head: Option<usize>) -> String {
    let shown = &payload[..head.unwrap_or(payload.len()).min(payload.len())];
    let cut = shown.len() < payload.len();
    let mut line = format!(" {channel}  {:03X}  [{}]  ", id.id, payload.len());
    if format & FORMAT_HEX != 0 {
        for byte in shown {
            line.push_str(&format!("{byte:02X} "));
        }
        if cut {
            line.push_str("... ");
        }
        if format & FORMAT_ASCII != 0 {
            line.push_str(" - ");
        }
    }
    if format & FORMAT_ASCII != 0 {
        line.push('\'');
        line.extend(shown.iter().map(|&b| printable(b)));
        line.push('\'');
        if cut {
            line.push_str(" ... ");
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use fieldhub_client::FrameFlags;

    fn classic(id: u32, data: &[u8]) -> Frame {
        Frame::can(id, false, data).unwrap()
    }

    #[test]
    fn frames_are_explained_as_isotpdump_explains_them() {
        let ff = classic(0x7E0, &[0x10, 0x14, 1, 2, 3, 4, 5, 6]);
        assert_eq!(frame_line("can0", &ff, false, false), " can0  7E0  [8]  [FF] ln: 20   data: 01 02 03 04 05 06 ");
        let fc = classic(0x7E8, &[0x30, 8, 0xF5]);
        assert_eq!(
            frame_line("can0", &fc, false, false),
            " can0  7E8  [3]  [FC] FC: 0 = CTS # BS: 8 # STmin: 0xF5 = 500 us"
        );
        let fc = classic(0x7E8, &[0x32, 0, 0x14]);
        assert_eq!(
            frame_line("can0", &fc, false, false),
            " can0  7E8  [3]  [FC] FC: 2 = OVFLW # BS: 0 = off # STmin: 0x14 = 20 ms"
        );
        let cf = classic(0x7E0, &[0x2A, 0x41, 0x42]);
        assert_eq!(
            frame_line("can0", &cf, false, true),
            " can0  7E0  [3]  [CF] sn: A    data: 41 42                 -  'AB'"
        );
        let sf = classic(0x12, &[0xF1, 0x02, 0x3E, 0x00]);
        assert_eq!(frame_line("can0", &sf, true, false), " can0   12{F1}  [4]  [SF] ln: 2    data: 3E 00 ");
    }

    #[test]
    fn escaped_lengths_and_can_fd_frames_are_explained() {
        let extended = Frame::can(0x18DA_10F1, true, &[0x10, 0, 0, 0, 0xEA, 0x60, 0xAA, 0xBB]).unwrap();
        assert_eq!(frame_line("can0", &extended, false, false), " can0  18DA10F1  [8]  [FF] ln: 60000 data: AA BB ");
        let mut data = vec![0x00, 0x0A];
        data.extend(1..=10);
        let sf = Frame::can_fd(0x7E0, FrameFlags::empty(), &data).unwrap();
        assert!(frame_line("fd0", &sf, false, false).starts_with(" fd0  7E0 [12]  [SF] ln: 10   data: 01 02"));
    }

    #[test]
    fn payloads_are_printed_as_isotpsniffer_prints_them() {
        let id = CanId { id: 0x7E0, extended: false };
        assert_eq!(payload_line("can0", id, b"AB\x01", 3, None), " can0  7E0  [3]  41 42 01  - 'AB.'");
        assert_eq!(payload_line("can0", id, b"AB\x01", 1, Some(2)), " can0  7E0  [3]  41 42 ... ");
        assert_eq!(payload_line("can0", id, b"AB\x01", 2, Some(2)), " can0  7E0  [3]  'AB' ... ");
    }
}
