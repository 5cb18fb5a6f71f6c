//! The options every `fieldhub isotp` tool shares, as can-utils' ISO-TP
//! tools spell them (`-s`, `-d` hex ids, 8 digits for a 29-bit id; `-x`
//! extended addressing; `-p` padding; `-L` link layer), and the [`Link`]
//! they make: one port on a channel that sends frames on one id and
//! receives those of another, the ISO-TP state machines of `fieldhub-isotp`
//! fed with their data bytes.
//!
//! Invariant: every frame sent is confirmed on the bus or its drop told
//! ([`Link::confirm`]); the port receives only the ids it listens to (its
//! acceptance filters, set before the first frame is sent).

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use fieldhub_client::{Client, ClientError, Filter, Frame, FrameFlags, Port};
use fieldhub_isotp::Config;
use fieldhub_proto::frame::{CAN_EFF_FLAG, CAN_RTR_FLAG, MAX_EXTENDED_ID, MAX_STANDARD_ID};

use crate::{HubSelect, PortSelect};

/// A CAN identifier as can-utils' ISO-TP tools read it: hex, and 29 bits
/// when written with more than 7 digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CanId {
    pub id: u32,
    pub extended: bool,
}

impl CanId {
    /// Whether `frame` carries this identifier (a data frame, not remote).
    pub fn carries(&self, frame: &Frame) -> bool {
        frame.id() == self.id && frame.is_extended() == self.extended && !frame.is_remote() && !frame.is_error()
    }

    /// The acceptance filter that passes exactly this id's data frames.
    pub fn filter(&self) -> Filter {
        let (flag, mask) = if self.extended { (CAN_EFF_FLAG, MAX_EXTENDED_ID) } else { (0, MAX_STANDARD_ID) };
        Filter { can_id: self.id | flag, can_mask: mask | CAN_EFF_FLAG | CAN_RTR_FLAG }
    }
}

impl std::fmt::Display for CanId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.extended {
            write!(f, "{:08X}", self.id)
        } else {
            write!(f, "{:03X}", self.id)
        }
    }
}

pub fn parse_id(text: &str) -> Result<CanId, String> {
    let id = u32::from_str_radix(text, 16).map_err(|_| format!("'{text}' is not a hex CAN id (7E0, 18DA10F1)"))?;
    let extended = text.len() > 7;
    let max = if extended { MAX_EXTENDED_ID } else { MAX_STANDARD_ID };
    if id > max {
        return Err(match extended {
            true => format!("{text} is above the largest 29-bit id {max:X}"),
            false => format!("{text} is above the largest 11-bit id {max:X}; a 29-bit id has 8 digits: {id:08X}"),
        });
    }
    Ok(CanId { id, extended })
}

/// A byte in hex (`F1`, `0xF1`).
pub fn parse_hex_byte(text: &str) -> Result<u8, String> {
    let digits = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")).unwrap_or(text);
    u8::from_str_radix(digits, 16).map_err(|_| format!("'{text}' is not a byte in hex (00 to FF)"))
}

/// `-x ADDR[:RXADDR]`: the address byte of frames sent and of frames
/// received (the same one unless RXADDR is given).
fn parse_ext(text: &str) -> Result<(u8, u8), String> {
    match text.split_once(':') {
        Some((tx, rx)) => Ok((parse_hex_byte(tx)?, parse_hex_byte(rx)?)),
        None => parse_hex_byte(text).map(|a| (a, a)),
    }
}

/// `-p [TX]:[RX]`: the byte frames sent are padded with, and the byte
/// received frames must be padded with (to 8 bytes, or a CAN FD length).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Padding {
    pub tx: Option<u8>,
    pub rx: Option<u8>,
}

fn parse_padding(text: &str) -> Result<Padding, String> {
    let byte = |t: &str| if t.is_empty() { Ok(None) } else { parse_hex_byte(t).map(Some) };
    let padding = match text.split_once(':') {
        Some((tx, rx)) => Padding { tx: byte(tx)?, rx: byte(rx)? },
        None => Padding { tx: byte(text)?, rx: None },
    };
    if padding == Padding::default() {
        return Err("give a byte: -p TX, -p TX:RX or -p :RX (hex)".into());
    }
    Ok(padding)
}

/// `-L MTU:TX_DL:TX_FLAGS`: classic CAN (MTU 16, TX_DL 8) or CAN FD (MTU 72,
/// TX_DL 8–64; flags 1 bit rate switch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkLayer {
    pub fd: bool,
    pub tx_dl: usize,
    pub brs: bool,
}

/// can-utils' `CANFD_BRS`, the only `-L` flag ISO-TP's frames take here.
const TX_FLAG_BRS: u8 = 0x01;

fn parse_link_layer(text: &str) -> Result<LinkLayer, String> {
    let usage =
        || format!("'{text}' is not MTU:TX_DL:TX_FLAGS (16:8:0 classic CAN, 72:64:1 CAN FD with bit rate switch)");
    let parts: Vec<u8> = text.split(':').map(str::parse::<u8>).collect::<Result<_, _>>().map_err(|_| usage())?;
    let [mtu, tx_dl, flags] = parts[..] else {
        return Err(usage());
    };
    let layer = match mtu {
        16 if tx_dl == 8 && flags == 0 => LinkLayer { fd: false, tx_dl: 8, brs: false },
        16 => return Err(format!("{text}: classic CAN (MTU 16) has TX_DL 8 and no flags")),
        72 if flags & !TX_FLAG_BRS == 0 => LinkLayer { fd: true, tx_dl: usize::from(tx_dl), brs: flags != 0 },
        72 => return Err(format!("{text}: TX_FLAGS {flags} — 1 (bit rate switch) is the only flag")),
        _ => return Err(format!("{text}: MTU {mtu} is neither 16 (classic CAN) nor 72 (CAN FD)")),
    };
    Config { tx_dl: layer.tx_dl, ..Config::default() }.check().map_err(|e| format!("{text}: {e}"))?;
    Ok(layer)
}

/// The options of every ISO-TP tool but `dump`.
#[derive(clap::Args)]
pub struct LinkArgs {
    #[command(flatten)]
    pub hub: HubSelect,
    #[command(flatten)]
    pub port: PortSelect,
    /// Source: the CAN id this tool sends on, hex; 8 digits for a 29-bit id.
    #[arg(short = 's', value_name = "ID", value_parser = parse_id)]
    pub source: CanId,
    /// Destination: the CAN id this tool receives on (its peer's source), hex.
    #[arg(short = 'd', value_name = "ID", value_parser = parse_id)]
    pub destination: CanId,
    /// Extended addressing: ADDR is the first byte of every frame sent, RXADDR (default ADDR) of every frame taken; hex.
    #[arg(short = 'x', value_name = "ADDR[:RXADDR]", value_parser = parse_ext)]
    pub extended: Option<(u8, u8)>,
    /// Padding, hex: frames sent are filled with TX to 8 bytes (or a CAN FD length); frames received must be filled with RX.
    #[arg(short = 'p', value_name = "[TX]:[RX]", value_parser = parse_padding)]
    pub padding: Option<Padding>,
    /// Link layer as can-utils' -L: MTU 16 classic CAN, 72 CAN FD with TX_DL 8, 12, 16, 20, 24, 32, 48 or 64 bytes a
    /// frame; TX_FLAGS 1 switches the bit rate.
    #[arg(short = 'L', value_name = "MTU:TX_DL:TX_FLAGS", value_parser = parse_link_layer, conflicts_with = "fd")]
    pub link_layer: Option<LinkLayer>,
    /// CAN FD frames of up to 64 bytes: -L 72:64:0.
    #[arg(long)]
    pub fd: bool,
    /// Channel.
    pub channel: String,
}

impl LinkArgs {
    fn layer(&self) -> LinkLayer {
        match (self.link_layer, self.fd) {
            (Some(layer), _) => layer,
            (None, true) => LinkLayer { fd: true, tx_dl: 64, brs: false },
            (None, false) => LinkLayer { fd: false, tx_dl: 8, brs: false },
        }
    }

    /// The state machines' configuration: frame length, padding, addresses.
    pub fn config(&self) -> Config {
        let padding = self.padding.unwrap_or_default();
        Config {
            tx_dl: self.layer().tx_dl,
            padding: padding.tx,
            rx_padding: padding.rx,
            tx_address: self.extended.map(|(tx, _)| tx),
            rx_address: self.extended.map(|(_, rx)| rx),
            ..Config::default()
        }
    }

    /// Connect as `tool` and open the port, listening to the destination id.
    pub fn open(&self, tool: &str, lossless: bool) -> anyhow::Result<Link> {
        if self.source == self.destination {
            bail!("-s and -d are both {}: ISO-TP sends on one id and receives on another", self.source);
        }
        let client = self.hub.connect(tool)?;
        let config = fieldhub_client::PortConfig { block_on_overflow: lossless, ..self.port.config(1)? };
        let port = client
            .open_port_with(&self.channel, &config)
            .with_context(|| format!("cannot open a port on '{}'", self.channel))?;
        client.set_filters(&port, Some(&[self.destination.filter()]))?;
        Ok(Link {
            client,
            port,
            source: self.source,
            destination: self.destination,
            layer: self.layer(),
            start: Instant::now(),
        })
    }
}

/// One port sending on the source id and receiving the destination id.
pub struct Link {
    pub client: Client,
    pub port: Port,
    source: CanId,
    destination: CanId,
    layer: LinkLayer,
    start: Instant,
}

impl Link {
    /// The time the state machines see: since the link opened.
    pub fn now(&self) -> Duration {
        self.start.elapsed()
    }

    /// Send one frame's `data` on the source id.
    pub fn send(&self, data: &[u8]) -> anyhow::Result<()> {
        let frame = if self.layer.fd {
            let mut flags = FrameFlags::empty();
            flags.set(FrameFlags::EXTENDED, self.source.extended);
            flags.set(FrameFlags::BRS, self.layer.brs);
            Frame::can_fd(self.source.id, flags, data)?
        } else {
            Frame::can(self.source.id, self.source.extended, data)?
        };
        self.client.send(&self.port, &frame).with_context(|| format!("sending on '{}'", self.port.channel))?;
        match self.client.take_dropped() {
            Some(dropped) => Err(self.dropped(dropped)),
            None => Ok(()),
        }
    }

    /// The data of the next frame on the destination id, waiting until
    /// `deadline` (`None`: as long as it takes); `None` when it passed.
    pub fn recv(&self, deadline: Option<Duration>) -> anyhow::Result<Option<Vec<u8>>> {
        loop {
            let wait = deadline.map(|d| d.saturating_sub(self.now()));
            let Some(received) = self.client.recv(wait)? else {
                return Ok(None);
            };
            if self.destination.carries(&received.frame) {
                return Ok(Some(received.frame.data().to_vec()));
            }
        }
    }

    /// Wait until every frame sent is on the bus; an error names what the hub dropped.
    pub fn confirm(&self) -> anyhow::Result<()> {
        match self.client.flush() {
            Ok(_) => Ok(()),
            Err(e @ ClientError::Dropped { .. }) => Err(self.dropped(e)),
            Err(ClientError::Timeout(waited)) => bail!(
                "frames sent on '{}' are not on the bus after {} s (a lossless receiver that does not read, or a busy channel)",
                self.port.channel,
                waited.as_secs_f64()
            ),
            Err(e) => Err(e.into()),
        }
    }

    fn dropped(&self, error: ClientError) -> anyhow::Error {
        let why = match &error {
            ClientError::Dropped { reason, .. } => fieldhub_client::DropReason::from_wire(*reason)
                .map_or_else(|| format!("reason code {reason}"), |r| r.describe().to_owned()),
            other => other.to_string(),
        };
        anyhow::anyhow!("the hub took a frame off '{}': {why}; the transfer is incomplete", self.port.channel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_hex_and_29_bit_with_8_digits() {
        assert_eq!(parse_id("7E0"), Ok(CanId { id: 0x7E0, extended: false }));
        assert_eq!(parse_id("18DA10F1"), Ok(CanId { id: 0x18DA_10F1, extended: true }));
        assert_eq!(parse_id("00000123"), Ok(CanId { id: 0x123, extended: true }));
        assert!(parse_id("800").unwrap_err().contains("above the largest 11-bit id 7FF"));
        assert!(parse_id("7G0").unwrap_err().contains("not a hex CAN id"));
        assert_eq!(parse_id("18DA10F1").unwrap().to_string(), "18DA10F1");
    }

    #[test]
    fn extended_addresses_and_padding_read_as_can_utils_writes_them() {
        assert_eq!(parse_ext("F1"), Ok((0xF1, 0xF1)));
        assert_eq!(parse_ext("F1:10"), Ok((0xF1, 0x10)));
        assert_eq!(parse_padding("AA"), Ok(Padding { tx: Some(0xAA), rx: None }));
        assert_eq!(parse_padding("AA:55"), Ok(Padding { tx: Some(0xAA), rx: Some(0x55) }));
        assert_eq!(parse_padding(":55"), Ok(Padding { tx: None, rx: Some(0x55) }));
        assert!(parse_padding(":").is_err());
        assert!(parse_ext("100").unwrap_err().contains("not a byte"));
    }

    #[test]
    fn link_layers_are_classic_or_can_fd_with_an_iso_tp_length() {
        assert_eq!(parse_link_layer("72:64:1"), Ok(LinkLayer { fd: true, tx_dl: 64, brs: true }));
        assert_eq!(parse_link_layer("16:8:0"), Ok(LinkLayer { fd: false, tx_dl: 8, brs: false }));
        assert!(parse_link_layer("72:63:0").unwrap_err().contains("TX_DL 63"));
        assert!(parse_link_layer("16:64:0").unwrap_err().contains("classic CAN (MTU 16) has TX_DL 8"));
        assert!(parse_link_layer("72:64").unwrap_err().contains("MTU:TX_DL:TX_FLAGS"));
        assert!(parse_link_layer("64:64:0").unwrap_err().contains("neither 16"));
    }
}
