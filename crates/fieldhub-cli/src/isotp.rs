//! `fieldhub isotp send|recv|dump`: ISO-TP (ISO 15765-2:2016) payloads over
//! a channel, like can-utils' isotpsend, isotprecv, isotpdump and
//! isotpsniffer. The protocol is `fieldhub-isotp`'s; this module reads the
//! payload, drives the state machines with the port's frames and the time,
//! and prints what arrives (`isotp_link.rs`: the options and the port;
//! `isotp_dump.rs`: `dump`).

use std::io::Read;
use std::time::Duration;

use anyhow::{bail, Context};
use fieldhub_isotp::{Config, Event, Receiver, SendStep, Sender, StMin};

use crate::isotp_link::{parse_hex_byte, Link, LinkArgs};
use crate::output::outln;

#[derive(clap::Args)]
pub struct IsotpArgs {
    #[command(subcommand)]
    tool: Tool,
}

#[derive(clap::Subcommand)]
enum Tool {
    /// Send a payload, like isotpsend: hex bytes from stdin (`01 02 03`, or `010203`), or -D LEN bytes.
    Send(SendArgs),
    /// Receive payloads and print them as hex bytes, like isotprecv: one, or with -l every one.
    Recv(RecvArgs),
    /// Print the ISO-TP frames between two ids explained, like isotpdump; --sniff prints their reassembled
    /// payloads, like isotpsniffer.
    Dump(crate::isotp_dump::DumpArgs),
}

#[derive(clap::Args)]
pub struct SendArgs {
    #[command(flatten)]
    link: LinkArgs,
    /// Send a payload of LEN bytes 01 02 03 … FF 01 … instead of reading stdin, as isotpsend -D.
    #[arg(short = 'D', value_name = "LEN")]
    length: Option<usize>,
    /// Send the payload NUM times, `i` for ever, as isotpsend -l.
    #[arg(short = 'l', value_name = "NUM|i", value_parser = parse_loops, default_value = "1")]
    loops: Loops,
    /// Wait MS milliseconds before each payload, as isotpsend -g.
    #[arg(short = 'g', value_name = "MS")]
    gap_ms: Option<u64>,
    /// N_Bs: how long to wait for the receiver's flow control, in milliseconds.
    #[arg(long = "n-bs", value_name = "MS", default_value = "1000")]
    n_bs_ms: u64,
}

#[derive(clap::Args)]
pub struct RecvArgs {
    #[command(flatten)]
    link: LinkArgs,
    /// Block size the flow control asks for, hex as isotprecv -b (0: the sender sends every frame without waiting).
    #[arg(short = 'b', value_name = "BS", value_parser = parse_hex_byte, default_value = "0")]
    block_size: u8,
    /// STmin the flow control asks for, its byte in hex as isotprecv -m: 0-7F milliseconds, F1-F9 100-900 µs.
    #[arg(short = 'm', value_name = "STMIN", value_parser = parse_st_min, default_value = "0")]
    st_min: StMin,
    /// Keep receiving: print every payload until interrupted, as isotprecv -l.
    #[arg(short = 'l')]
    keep: bool,
    /// N_Cr: how long to wait for the next consecutive frame, in milliseconds.
    #[arg(long = "n-cr", value_name = "MS", default_value = "1000")]
    n_cr_ms: u64,
    /// The longest payload taken; a sender announcing more gets flow control OVFLW.
    #[arg(long = "max-len", value_name = "BYTES", default_value_t = fieldhub_isotp::DEFAULT_MAX_PAYLOAD)]
    max_len: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Loops {
    Times(u64),
    Forever,
}

fn parse_loops(text: &str) -> Result<Loops, String> {
    match text {
        "i" => Ok(Loops::Forever),
        n => match n.parse() {
            Ok(0) | Err(_) => Err(format!("'{text}' is neither a number of payloads (1 or more) nor i (for ever)")),
            Ok(n) => Ok(Loops::Times(n)),
        },
    }
}

fn parse_st_min(text: &str) -> Result<StMin, String> {
    let st_min = StMin(parse_hex_byte(text)?);
    if !st_min.is_defined() {
        return Err(format!("STmin {text} is reserved: 0-7F are milliseconds, F1-F9 100-900 µs (hex)"));
    }
    Ok(st_min)
}

pub fn run(args: IsotpArgs) -> anyhow::Result<()> {
    match args.tool {
        Tool::Send(args) => send(args),
        Tool::Recv(args) => recv(args),
        Tool::Dump(args) => crate::isotp_dump::run(args),
    }
}

/// Hex bytes as isotpsend reads them from stdin, separated by blanks;
/// a longer run of digits is several bytes (`DEADBEEF`).
fn parse_payload(text: &str) -> anyhow::Result<Vec<u8>> {
    let mut payload = Vec::new();
    for (n, word) in text.split_whitespace().enumerate() {
        let digits = word.strip_prefix("0x").unwrap_or(word);
        let bytes = if digits.len() <= 2 {
            u8::from_str_radix(digits, 16).ok().map(|b| vec![b])
        } else if digits.len() % 2 == 0 {
            (0..digits.len()).step_by(2).map(|i| u8::from_str_radix(&digits[i..i + 2], 16).ok()).collect()
        } else {
            None
        };
        match bytes {
            Some(bytes) => payload.extend(bytes),
            None => bail!("stdin: word {} '{word}' is not hex bytes (01 02 03, or 010203)", n + 1),
        }
    }
    Ok(payload)
}

fn send(args: SendArgs) -> anyhow::Result<()> {
    let payload = match args.length {
        Some(0) => bail!("-D 0: a payload has at least 1 byte"),
        Some(len) => (0..len).map(|i| (i % 0xFF) as u8 + 1).collect(),
        None => {
            let mut text = String::new();
            std::io::stdin().read_to_string(&mut text).context("cannot read the payload from stdin")?;
            parse_payload(&text)?
        }
    };
    if payload.is_empty() {
        bail!("no payload: give hex bytes on stdin (echo 01 02 03 | fieldhub isotp send …) or -D LEN");
    }
    let config = Config { n_bs: Duration::from_millis(args.n_bs_ms), ..args.link.config() };
    let link = args.link.open("isotp-send", false)?;
    let mut sent = 0u64;
    while args.loops != Loops::Times(sent) {
        if let Some(ms) = args.gap_ms {
            std::thread::sleep(Duration::from_millis(ms));
        }
        transfer(&link, Sender::new(config.clone(), payload.clone())?)?;
        sent += 1;
    }
    link.confirm()
}

/// One payload out: the sender's frames sent, flow control handed to it.
fn transfer(link: &Link, mut sender: Sender) -> anyhow::Result<()> {
    loop {
        match sender.poll(link.now())? {
            SendStep::Frame(frame) => link.send(frame.as_slice())?,
            SendStep::WaitUntil(at) => std::thread::sleep(at.saturating_sub(link.now())),
            SendStep::AwaitFlowControl(deadline) => {
                if let Some(data) = link.recv(Some(deadline))? {
                    sender.on_frame(&data, link.now())?;
                }
            }
            SendStep::Done => return Ok(()),
        }
    }
}

fn recv(args: RecvArgs) -> anyhow::Result<()> {
    let config = Config {
        block_size: args.block_size,
        st_min: args.st_min,
        n_cr: Duration::from_millis(args.n_cr_ms),
        max_payload: args.max_len,
        ..args.link.config()
    };
    // Lossless: a consecutive frame lost to a full queue would fail the transfer.
    let link = args.link.open("isotp-recv", true)?;
    let mut receiver = Receiver::new(config);
    loop {
        let deadline = match receiver.poll(link.now()) {
            Ok(deadline) => deadline,
            Err(e) if args.keep => {
                eprintln!("isotp recv: {e}");
                None
            }
            Err(e) => return Err(e.into()),
        };
        let Some(data) = link.recv(deadline)? else {
            continue;
        };
        let outcome = receiver.on_frame(&data, link.now());
        if let Some(e) = outcome.error {
            // A transfer that failed ends a single recv; a stray frame does not.
            if !args.keep && !matches!(e, fieldhub_isotp::RxError::Malformed(_)) {
                return Err(e.into());
            }
            eprintln!("isotp recv: {e}");
        }
        match outcome.event {
            Some(Event::FlowControl(frame)) => link.send(frame.as_slice())?,
            Some(Event::Payload(payload)) => {
                outln!("{}", hex_bytes(&payload))?;
                if !args.keep {
                    return link.confirm();
                }
            }
            None => {}
        }
    }
}

/// A payload as isotprecv prints it: `01 02 03 `, each byte followed by a blank.
pub fn hex_bytes(payload: &[u8]) -> String {
    use std::fmt::Write;
    let mut text = String::with_capacity(payload.len() * 3);
    for byte in payload {
        let _ = write!(text, "{byte:02X} ");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stdin_payloads_are_blank_separated_hex_bytes() {
        assert_eq!(parse_payload("01 02 0a\nFF\n").unwrap(), [1, 2, 10, 255]);
        assert_eq!(parse_payload("DEADBEEF 0x3e 7").unwrap(), [0xDE, 0xAD, 0xBE, 0xEF, 0x3E, 7]);
        let err = parse_payload("01 XYZ").unwrap_err().to_string();
        assert!(err.contains("word 2 'XYZ' is not hex bytes"), "{err}");
        assert!(parse_payload("123").is_err());
    }

    #[test]
    fn payloads_print_as_isotprecv_prints_them() {
        assert_eq!(hex_bytes(&[0x01, 0xAB]), "01 AB ");
    }

    #[test]
    fn loops_and_stmin_read_as_can_utils_reads_them() {
        assert_eq!(parse_loops("3"), Ok(Loops::Times(3)));
        assert_eq!(parse_loops("i"), Ok(Loops::Forever));
        assert!(parse_loops("0").is_err());
        assert_eq!(parse_st_min("F5"), Ok(StMin(0xF5)));
        assert_eq!(parse_st_min("14"), Ok(StMin(0x14)));
        assert!(parse_st_min("80").unwrap_err().contains("reserved"));
    }
}
