//! socketcand's text protocol (linux-can/socketcand `doc/protocol.md`): the
//! commands a client sends, parsed from one `< … >` element, and the lines
//! the hub sends back, formatted byte for byte as socketcand does.
//!
//! Invariants:
//! - Parsing never panics and allocates only for a bus name; every refusal
//!   is a [`ProtocolError`] whose text says what was wrong and fits in an
//!   `< error … >` line (no `<` or `>` in it).
//! - Identifiers follow socketcand: hexadecimal, extended when written with
//!   eight digits (`1AAAAAAA`, `00000123`), standard otherwise (at most
//!   0x7FF). Lengths are 0 to 8: socketcand has no CAN FD syntax, so a
//!   session is classic CAN only (`docs/socketcand.md`).
//! - Output lines are what socketcand writes: `< frame 123 23.424242
//!   1A220344 >` (identifier `%03X`/`%08X`, data `%02X` without spaces),
//!   `< error CLASS SEC.USEC >`, `< stat rbytes rpackets tbytes tpackets >`.

use std::fmt::Write as _;

use fieldhub_proto::Frame;

/// The longest element (`<` to `>`) a client may send; socketcand's own
/// buffer holds 4000 bytes, and a `muxfilter` with 257 tuples fits.
pub const MAX_ELEMENT: usize = 8192;

/// Longest bus name in `< open … >` (socketcand's limit).
pub const MAX_BUS_NAME: usize = 16;

/// A command that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ProtocolError(pub String);

fn bad(text: impl Into<String>) -> ProtocolError {
    ProtocolError(text.into())
}

/// One command, as a client writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `< open NAME >`
    Open(String),
    /// `< rawmode >`, `< bcmmode >`, `< controlmode >`, `< isotpmode >`
    Mode(Mode),
    /// `< echo >`
    Echo,
    /// `< send ID DLC DATA… >`
    Send(Frame),
    /// `< add SECS USECS ID DLC DATA… >`: a cyclic transmission job.
    Add { interval_us: u64, frame: Frame },
    /// `< update ID DLC DATA… >`: new content for a job, same timer.
    Update(Frame),
    /// `< delete ID >`
    Delete(CanId),
    /// `< subscribe SECS USECS ID >`: every frame with this identifier,
    /// at most one per interval.
    Subscribe { interval_us: u64, id: CanId },
    /// `< filter SECS USECS ID DLC MASK… >`: frames with this identifier
    /// whose masked content changed.
    Filter { interval_us: u64, id: CanId, mask: Vec<u8> },
    /// `< muxfilter SECS USECS ID N TUPLES… >`: as `filter`, with a mask
    /// per multiplex value (the first tuple selects the multiplexer).
    MuxFilter { interval_us: u64, id: CanId, tuples: Vec<[u8; 8]> },
    /// `< unsubscribe ID >`: drop subscriptions and filters of this id.
    Unsubscribe(CanId),
    /// `< statistics MS >`: `< stat … >` every MS milliseconds (0: off).
    Statistics(u32),
    /// `< BUS B bitrate sample_point tq prop_seg phase_seg1 phase_seg2 sjw brp >`
    BitTiming { bus: String, timing: BitTiming },
    /// `< BUS C listen_only loopback three_samples >`
    ControllerMode { bus: String, listen_only: bool, loopback: bool, three_samples: bool },
}

/// What a bit-timing command gives that a fieldhub channel can take: its
/// bitrate, directly or from the time quantum and the segments (the sample
/// point, SJW and prescaler do not change a virtual bus). socketcand
/// passes `-1` for a value it leaves unset; so does this.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BitTiming {
    pub bitrate: Option<u32>,
    /// The time quantum in nanoseconds.
    pub tq_ns: Option<u32>,
    /// `prop_seg`, `phase_seg1`, `phase_seg2`, in time quanta.
    pub segments: [Option<u32>; 3],
}

impl BitTiming {
    /// The bitrate it sets: `bitrate` when given, else one second over the
    /// bit's time quanta (the sync segment, then the three segments).
    pub fn bitrate(&self) -> Result<u32, ProtocolError> {
        if let Some(bitrate) = self.bitrate.filter(|&b| b > 0) {
            return Ok(bitrate);
        }
        let quanta: Option<u64> =
            self.segments.iter().try_fold(1u64, |sum, segment| segment.map(|s| sum + u64::from(s)));
        match (self.tq_ns.filter(|&tq| tq > 0), quanta) {
            (Some(tq), Some(quanta)) => match 1_000_000_000 / u64::from(tq).saturating_mul(quanta) {
                0 => Err(bad(format!("a bit of {quanta} time quanta of {tq} ns is longer than a second"))),
                bitrate => Ok(bitrate as u32),
            },
            _ => Err(bad(
                "the bit timing gives no bitrate, nor tq with prop_seg, phase_seg1 and phase_seg2: a fieldhub \
                 channel takes a bitrate, e.g. 'can0 B 500000 -1 -1 -1 -1 -1 -1 -1'",
            )),
        }
    }
}

/// The session modes after `< open >`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Raw,
    Bcm,
    Control,
    IsoTp,
}

/// A CAN identifier as socketcand spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CanId {
    pub id: u32,
    pub extended: bool,
}

impl CanId {
    fn parse(word: &str) -> Result<Self, ProtocolError> {
        let id = u32::from_str_radix(word, 16)
            .map_err(|_| bad(format!("'{}' is not a hexadecimal CAN identifier", shown(word))))?;
        let extended = word.len() == 8;
        let limit = if extended { 0x1FFF_FFFF } else { 0x7FF };
        if id > limit {
            return Err(bad(format!(
                "CAN identifier {id:X} is too large (standard identifiers go up to 7FF; write extended ones with \
                 eight digits, up to 1FFFFFFF)"
            )));
        }
        Ok(Self { id, extended })
    }

    /// Whether `frame` carries this identifier.
    pub fn matches(&self, frame: &Frame) -> bool {
        frame.id() == self.id && frame.is_extended() == self.extended
    }
}

/// Split an element (without its `<` and `>`) into words and read it.
pub fn parse(element: &str) -> Result<Command, ProtocolError> {
    let mut words = element.split_ascii_whitespace();
    let Some(verb) = words.next() else { return Err(bad("an empty command")) };
    let mut args = Args { words, verb };
    let command = match verb {
        "open" => {
            let name = args.word("a bus name")?;
            if name.len() > MAX_BUS_NAME {
                return Err(bad(format!("bus name '{}' is longer than {MAX_BUS_NAME} characters", shown(name))));
            }
            Command::Open(name.to_owned())
        }
        "rawmode" => Command::Mode(Mode::Raw),
        "bcmmode" => Command::Mode(Mode::Bcm),
        "controlmode" => Command::Mode(Mode::Control),
        "isotpmode" => Command::Mode(Mode::IsoTp),
        "echo" => Command::Echo,
        "send" => Command::Send(args.frame()?),
        "add" => {
            let interval_us = args.interval()?;
            Command::Add { interval_us, frame: args.frame()? }
        }
        "update" => Command::Update(args.frame()?),
        "delete" => Command::Delete(args.id()?),
        "subscribe" => {
            let interval_us = args.interval()?;
            Command::Subscribe { interval_us, id: args.id()? }
        }
        "filter" => {
            let interval_us = args.interval()?;
            let id = args.id()?;
            let len = args.length()?;
            let mask = (0..len).map(|_| args.byte()).collect::<Result<Vec<_>, _>>()?;
            Command::Filter { interval_us, id, mask }
        }
        "muxfilter" => {
            let interval_us = args.interval()?;
            let id = args.id()?;
            let count = args.number::<u32>("the number of 8-byte tuples")?;
            if !(2..=257).contains(&count) {
                return Err(bad(format!("muxfilter takes 2 to 257 tuples, not {count}")));
            }
            let mut tuples = Vec::with_capacity(count as usize);
            for _ in 0..count {
                let mut tuple = [0u8; 8];
                for byte in &mut tuple {
                    *byte = args.byte()?;
                }
                tuples.push(tuple);
            }
            Command::MuxFilter { interval_us, id, tuples }
        }
        "unsubscribe" => Command::Unsubscribe(args.id()?),
        "statistics" => Command::Statistics(args.number("the interval in milliseconds")?),
        bus => match args.words.next() {
            Some("B") => {
                let bitrate = args.setting("the bitrate")?;
                let _sample_point = args.setting("sample_point")?;
                let tq_ns = args.setting("tq")?;
                let segments = [args.setting("prop_seg")?, args.setting("phase_seg1")?, args.setting("phase_seg2")?];
                let (_sjw, _brp) = (args.setting("sjw")?, args.setting("brp")?);
                Command::BitTiming { bus: bus.to_owned(), timing: BitTiming { bitrate, tq_ns, segments } }
            }
            Some("C") => Command::ControllerMode {
                bus: bus.to_owned(),
                listen_only: args.flag("listen_only")?,
                loopback: args.flag("loopback")?,
                three_samples: args.flag("three_samples")?,
            },
            _ => return Err(bad(format!("unknown command '{}'", shown(verb)))),
        },
    };
    match args.words.next() {
        None => Ok(command),
        Some(extra) => Err(bad(format!("'{}' after a complete {verb} command", shown(extra)))),
    }
}

struct Args<'a> {
    words: std::str::SplitAsciiWhitespace<'a>,
    verb: &'a str,
}

impl<'a> Args<'a> {
    fn word(&mut self, what: &str) -> Result<&'a str, ProtocolError> {
        self.words.next().ok_or_else(|| bad(format!("{} needs {what}", self.verb)))
    }

    fn number<T: std::str::FromStr>(&mut self, what: &str) -> Result<T, ProtocolError> {
        let word = self.word(what)?;
        word.parse().map_err(|_| bad(format!("{what} of {} is not a number: '{}'", self.verb, shown(word))))
    }

    /// A bit-timing value: a number, or `-1` for unset (`None`).
    fn setting(&mut self, what: &str) -> Result<Option<u32>, ProtocolError> {
        let word = self.word(what)?;
        match word {
            "-1" => Ok(None),
            _ => word.parse().map(Some).map_err(|_| {
                bad(format!("{what} of the bit timing is not a number from 0 up, or -1 for unset: '{}'", shown(word)))
            }),
        }
    }

    fn flag(&mut self, what: &str) -> Result<bool, ProtocolError> {
        match self.word(what)? {
            "0" => Ok(false),
            "1" => Ok(true),
            other => Err(bad(format!("{what} must be 0 or 1, not '{}'", shown(other)))),
        }
    }

    /// `SECS USECS`, in microseconds.
    fn interval(&mut self) -> Result<u64, ProtocolError> {
        let secs: u64 = self.number("the interval's seconds")?;
        let usecs: u64 = self.number("the interval's microseconds")?;
        secs.checked_mul(1_000_000)
            .and_then(|us| us.checked_add(usecs))
            .ok_or_else(|| bad(format!("the interval of {} is too long", self.verb)))
    }

    fn id(&mut self) -> Result<CanId, ProtocolError> {
        CanId::parse(self.word("a CAN identifier")?)
    }

    /// A length: socketcand reads it as decimal, python-can writes it in
    /// hexadecimal; for 0 to 8 both are the same digit.
    fn length(&mut self) -> Result<usize, ProtocolError> {
        let word = self.word("a data length")?;
        match word.parse::<usize>() {
            Ok(len) if len <= 8 => Ok(len),
            _ => Err(bad(format!(
                "data length '{}' is not 0 to 8 (socketcand carries classic CAN frames only)",
                shown(word)
            ))),
        }
    }

    fn byte(&mut self) -> Result<u8, ProtocolError> {
        let word = self.word("more data bytes (as many as the length says)")?;
        u8::from_str_radix(word, 16).map_err(|_| bad(format!("'{}' is not a hexadecimal byte", shown(word))))
    }

    fn frame(&mut self) -> Result<Frame, ProtocolError> {
        let id = self.id()?;
        let len = self.length()?;
        let mut data = [0u8; 8];
        for byte in &mut data[..len] {
            *byte = self.byte()?;
        }
        Frame::can(id.id, id.extended, &data[..len]).map_err(|e| bad(e.to_string()))
    }
}

/// At most 32 characters of a client's word, printable, without `<` or `>`,
/// for an error message.
fn shown(word: &str) -> String {
    word.chars().take(32).map(|c| if c.is_ascii_graphic() && c != '<' && c != '>' { c } else { '?' }).collect()
}

/// `< error TEXT >`, with `<` and `>` in the text replaced so the line
/// stays one element.
pub fn error_line(text: &str) -> String {
    let text: String = text.chars().map(|c| if c == '<' || c == '>' || c.is_control() { '?' } else { c }).collect();
    format!("< error {text} >")
}

/// Append a received frame as socketcand writes it: `< frame ID SEC.USEC
/// DATA >`, or `< error CLASS SEC.USEC >` for an error frame.
pub fn format_frame(out: &mut String, frame: &Frame, timestamp_ns: u64) {
    let (secs, usecs) = (timestamp_ns / 1_000_000_000, (timestamp_ns % 1_000_000_000) / 1_000);
    if frame.is_error() {
        let _ = write!(out, "< error {:03X} {secs}.{usecs:06} >", frame.id());
        return;
    }
    if frame.is_extended() {
        let _ = write!(out, "< frame {:08X} {secs}.{usecs:06} ", frame.id());
    } else {
        let _ = write!(out, "< frame {:03X} {secs}.{usecs:06} ", frame.id());
    }
    for byte in frame.data() {
        let _ = write!(out, "{byte:02X}");
    }
    out.push_str(" >");
}

/// `< stat rbytes rpackets tbytes tpackets >`
pub fn stat_line(rx_bytes: u64, rx_packets: u64, tx_bytes: u64, tx_packets: u64) -> String {
    format!("< stat {rx_bytes} {rx_packets} {tx_bytes} {tx_packets} >")
}

/// What [`Elements::next_element`] found in the bytes a client sent.
#[derive(Debug, PartialEq, Eq)]
pub enum Element<'a> {
    /// The text between `<` and `>`.
    Command(&'a str),
    /// An element longer than [`MAX_ELEMENT`] or not ASCII text.
    Bad(ProtocolError),
}

/// The client's byte stream cut into `< … >` elements; bytes outside an
/// element are skipped, as socketcand does.
#[derive(Default)]
pub struct Elements {
    buf: Vec<u8>,
    /// Where the next element's search starts.
    start: usize,
}

impl Elements {
    /// Add bytes read from the client.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The next complete element, `None` when more bytes are needed.
    pub fn next_element(&mut self) -> Option<Element<'_>> {
        let rest = &self.buf[self.start..];
        let Some(open) = rest.iter().position(|&b| b == b'<') else {
            self.start = self.buf.len();
            return None;
        };
        let body = &rest[open + 1..];
        let Some(close) = body.iter().position(|&b| b == b'>') else {
            if body.len() > MAX_ELEMENT {
                self.start = self.buf.len();
                return Some(Element::Bad(bad(format!("a command longer than {MAX_ELEMENT} bytes"))));
            }
            // Keep the partial element only.
            self.start += open;
            return None;
        };
        let from = self.start + open + 1;
        self.start = from + close + 1;
        let body = &self.buf[from..from + close];
        if body.len() > MAX_ELEMENT {
            return Some(Element::Bad(bad(format!("a command longer than {MAX_ELEMENT} bytes"))));
        }
        match std::str::from_utf8(body) {
            Ok(text) if text.is_ascii() => Some(Element::Command(text)),
            _ => Some(Element::Bad(bad("a command that is not ASCII text"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(id: u32, extended: bool, data: &[u8]) -> Frame {
        Frame::can(id, extended, data).unwrap()
    }

    #[test]
    fn the_protocol_documents_examples_parse() {
        assert_eq!(parse(" open can0 "), Ok(Command::Open("can0".into())));
        assert_eq!(parse(" send 123 0 "), Ok(Command::Send(frame(0x123, false, &[]))));
        assert_eq!(parse(" send 1AAAAAAA 2 1 f1 "), Ok(Command::Send(frame(0x1AAA_AAAA, true, &[1, 0xf1]))));
        assert_eq!(
            parse(" add 1 0 123 8 11 22 33 44 55 66 77 88 "),
            Ok(Command::Add {
                interval_us: 1_000_000,
                frame: frame(0x123, false, &[0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88])
            })
        );
        assert_eq!(parse(" update 123 3 11 22 33 "), Ok(Command::Update(frame(0x123, false, &[0x11, 0x22, 0x33]))));
        assert_eq!(parse(" delete 123 "), Ok(Command::Delete(CanId { id: 0x123, extended: false })));
        assert_eq!(
            parse(" filter 1 500000 123 8 FF 00 F8 00 00 00 00 00 "),
            Ok(Command::Filter {
                interval_us: 1_500_000,
                id: CanId { id: 0x123, extended: false },
                mask: vec![0xFF, 0, 0xF8, 0, 0, 0, 0, 0]
            })
        );
        let mux = parse(" muxfilter 0 0 123 2 FF 00 00 00 00 00 00 00 33 FF FF FF FF FF FF FF ").unwrap();
        assert!(matches!(mux, Command::MuxFilter { tuples, .. } if tuples.len() == 2 && tuples[1][0] == 0x33));
        assert_eq!(
            parse(" subscribe 0 0 123 "),
            Ok(Command::Subscribe { interval_us: 0, id: CanId { id: 0x123, extended: false } })
        );
        assert_eq!(parse(" unsubscribe 123 "), Ok(Command::Unsubscribe(CanId { id: 0x123, extended: false })));
        assert_eq!(parse(" statistics 1000 "), Ok(Command::Statistics(1000)));
        assert_eq!(parse(" rawmode "), Ok(Command::Mode(Mode::Raw)));
        assert_eq!(
            parse(" can0 C 1 0 0 "),
            Ok(Command::ControllerMode {
                bus: "can0".into(),
                listen_only: true,
                loopback: false,
                three_samples: false
            })
        );
        let timing = |bitrate, tq_ns, segments| BitTiming { bitrate, tq_ns, segments };
        assert_eq!(
            parse(" can0 B 500000 875 0 0 0 0 0 0 "),
            Ok(Command::BitTiming { bus: "can0".into(), timing: timing(Some(500_000), Some(0), [Some(0); 3]) })
        );
        assert_eq!(
            parse(" can0 B -1 -1 125 6 7 2 1 -1 "),
            Ok(Command::BitTiming { bus: "can0".into(), timing: timing(None, Some(125), [Some(6), Some(7), Some(2)]) })
        );
    }

    #[test]
    fn bit_timing_gives_the_bitrate_or_one_second_over_the_bits_time_quanta() {
        let bitrate = |text: &str| match parse(text) {
            Ok(Command::BitTiming { timing, .. }) => timing.bitrate().map_err(|e| e.0),
            other => panic!("{text}: {other:?}"),
        };
        assert_eq!(bitrate(" can0 B 250000 875 -1 -1 -1 -1 -1 -1 "), Ok(250_000));
        // 125 ns × (1 + 6 + 7 + 2) = 2 µs a bit: 500 kbit/s, as `ip link` computes it.
        assert_eq!(bitrate(" can0 B 0 -1 125 6 7 2 1 -1 "), Ok(500_000));
        assert!(bitrate(" can0 B -1 875 -1 -1 -1 -1 -1 -1 ").unwrap_err().contains("takes a bitrate"));
        assert!(bitrate(" can0 B 0 -1 4294967295 4294967295 1 1 1 1 ").unwrap_err().contains("longer than a second"));
        let error = parse(" can0 B -2 0 0 0 0 0 0 0 ").unwrap_err().0;
        assert!(error.contains("the bitrate of the bit timing is not a number from 0 up, or -1"), "{error}");
    }

    #[test]
    fn python_cans_send_spelling_parses() {
        // python-can writes `< send {id} {len:X} {bytes as {:x}} >`.
        assert_eq!(parse(" send 00000042 3 0 a ff "), Ok(Command::Send(frame(0x42, true, &[0, 0xa, 0xff]))));
    }

    #[test]
    fn bad_commands_say_what_is_wrong() {
        let cases = [
            (" ", "an empty command"),
            (" frobnicate ", "unknown command 'frobnicate'"),
            (" send 123 9 ", "data length '9' is not 0 to 8"),
            (" send 800 0 ", "CAN identifier 800 is too large"),
            (" send 123 2 11 ", "send needs more data bytes"),
            (" send 12G 0 ", "'12G' is not a hexadecimal CAN identifier"),
            (" send 123 1 1FF ", "'1FF' is not a hexadecimal byte"),
            (" send 123 0 00 ", "'00' after a complete send command"),
            (" open abcdefghijklmnopq ", "longer than 16 characters"),
            (" can0 C 2 0 0 ", "listen_only must be 0 or 1"),
            (" muxfilter 0 0 123 1 FF 00 00 00 00 00 00 00 ", "2 to 257 tuples"),
            (" add 18446744073709551615 0 123 0 ", "interval of add is too long"),
        ];
        for (input, expected) in cases {
            let error = parse(input).expect_err(input).0;
            assert!(error.contains(expected), "{input:?}: {error}");
        }
    }

    #[test]
    fn frames_are_formatted_as_socketcand_formats_them() {
        let mut out = String::new();
        format_frame(&mut out, &frame(0x123, false, &[0x1A, 0x22, 0x03, 0x44]), 23_424_242_999);
        assert_eq!(out, "< frame 123 23.424242 1A220344 >");
        out.clear();
        format_frame(&mut out, &frame(0x42, true, &[]), 5_000_000_000);
        assert_eq!(out, "< frame 00000042 5.000000  >");
        out.clear();
        format_frame(&mut out, &Frame::error(0x4, [0; 8]).unwrap(), 1_000_001_000);
        assert_eq!(out, "< error 004 1.000001 >");
        assert_eq!(stat_line(1, 2, 3, 4), "< stat 1 2 3 4 >");
        assert_eq!(error_line("no <channel>\n"), "< error no ?channel?? >");
    }

    #[test]
    fn elements_are_cut_from_a_stream_in_any_pieces() {
        let mut elements = Elements::default();
        elements.push(b"junk< open ca");
        assert_eq!(elements.next_element(), None);
        elements.push(b"n0 >< echo >\r\n< raw");
        assert_eq!(elements.next_element(), Some(Element::Command(" open can0 ")));
        assert_eq!(elements.next_element(), Some(Element::Command(" echo ")));
        assert_eq!(elements.next_element(), None);
        elements.push(b"mode >");
        assert_eq!(elements.next_element(), Some(Element::Command(" rawmode ")));
        assert_eq!(elements.next_element(), None);
    }

    #[test]
    fn an_oversize_element_or_binary_is_refused_and_the_stream_goes_on() {
        let mut elements = Elements::default();
        elements.push(b"<");
        elements.push(&vec![b'a'; MAX_ELEMENT + 1]);
        assert!(matches!(elements.next_element(), Some(Element::Bad(e)) if e.0.contains("longer than")));
        elements.push(b"< \xff >< echo >");
        assert!(matches!(elements.next_element(), Some(Element::Bad(e)) if e.0.contains("not ASCII")));
        assert_eq!(elements.next_element(), Some(Element::Command(" echo ")));
    }
}
