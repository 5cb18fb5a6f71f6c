//! Vector ASC, the text log of CANoe/CANalyzer, as described in Vector's
//! "CAN, Log & Trigger ASC Logging Format" and as python-can reads and
//! writes it.
//!
//! What fieldhub writes:
//!
//! ```text
//! date Tue Nov 14 10:13:20.123 pm 2023
//! base hex  timestamps absolute
//! internal events logged
//! // fieldhub start 1700000000.123
//! // fieldhub channel 1 = can0
//! // fieldhub channel 2 = fd0
//! Begin Triggerblock Tue Nov 14 10:13:20.123 pm 2023
//!    0.000000 Start of measurement
//!    0.000456 1  123             Rx   d 4 DE AD BE EF
//!    0.000789 1  1ABCDEF0x       Tx   r 8
//! // fieldhub error frame 20000004#0000000000000000
//!    0.001000 1  ErrorFrame
//!    0.001200 CANFD   2 Rx        123 1 0 9 12 00 11 22 33 44 55 66 77 88 99 AA BB        0    0     3000        0        0        0        0        0
//! End TriggerBlock
//! ```
//!
//! - Times are seconds since the trigger block's start ("timestamps
//!   absolute"); with "timestamps relative" each is the gap to the previous
//!   event. The dates are local wall-clock time with milliseconds, so the
//!   block starts at the first frame's millisecond and the comment
//!   `// fieldhub start` keeps the exact Unix time for readers in another
//!   time zone.
//! - Channels are numbered from 1; `// fieldhub channel N = NAME` comments
//!   record which fieldhub channel each number was. Files without them read
//!   channel N as `can{N-1}` (python-can's numbering).
//! - CAN FD lines: channel, direction, id, BRS, ESI, DLC (hex), data length
//!   (decimal), data, message duration, message length, flags (hex: 0x1000
//!   EDL, 0x2000 BRS, 0x4000 ESI, 0x10 remote), CRC, four bit-timing words.
//!   A `CANFD` line whose flags lack EDL carries a classic frame.
//! - An ASC error frame has no detail; the `// fieldhub error frame`
//!   comment before it keeps the SocketCAN class and bytes. Without it an
//!   error frame reads as `CAN_ERR_BUSERROR` with zeroed bytes.
//! - Skipped when reading: comments, statistics, status and other events,
//!   transmit requests (`TxRq`), J1939 and other lines that are not frames.
//!   A line that is a frame event but does not parse is an error.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::BufRead;

use chrono::{DateTime, FixedOffset, Local, NaiveDate, Offset, TimeZone, Utc};
use fieldhub_proto::frame::{fd_len_to_dlc, FD_LENGTHS};
use fieldhub_proto::text::{parse_cansend, write_cansend};
use fieldhub_proto::{Frame, FrameFlags};

use crate::line_reader::Lines;
use crate::{DateZone, Direction, LogError, Record};

/// SocketCAN `CAN_ERR_BUSERROR`: the class an ASC error frame without detail gets.
pub const CAN_ERR_BUSERROR: u32 = 0x80;
/// `CANFD` line flag: extended data length (a CAN FD frame).
pub const FD_FLAG_EDL: u32 = 0x1000;
/// `CANFD` line flag: bit rate switch.
pub const FD_FLAG_BRS: u32 = 0x2000;
/// `CANFD` line flag: error state indicator.
pub const FD_FLAG_ESI: u32 = 0x4000;
/// `CANFD` line flag: remote frame.
pub const FD_FLAG_RTR: u32 = 0x10;

/// CANoe's date layout: `Wed Nov 15 10:13:20.123 am 2023`.
const DATE_FORMAT: &str = "%a %b %d %I:%M:%S%.3f %P %Y";
const NANOS: u64 = 1_000_000_000;
const MILLI: u64 = 1_000_000;

/// Format a Unix time (ns) as an ASC date in `zone`.
pub fn format_date(timestamp_ns: u64, zone: DateZone) -> String {
    let utc = DateTime::<Utc>::from_timestamp((timestamp_ns / NANOS) as i64, (timestamp_ns % NANOS) as u32)
        .unwrap_or(DateTime::UNIX_EPOCH);
    match zone {
        DateZone::Local => utc.with_timezone(&Local).format(DATE_FORMAT).to_string(),
        DateZone::Fixed(seconds) => {
            let offset = FixedOffset::east_opt(seconds).unwrap_or(Utc.fix());
            utc.with_timezone(&offset).format(DATE_FORMAT).to_string()
        }
    }
}

/// Parse an ASC date (`Wed Nov 15 10:13:20.123 am 2023`, also 24-hour
/// without am/pm, without milliseconds, German month names) into Unix ns.
pub fn parse_date(text: &str, zone: DateZone) -> Result<i128, String> {
    let bad = || format!("cannot read the date '{text}': expected e.g. 'Wed Nov 15 10:13:20.123 am 2023'");
    let tokens: Vec<&str> = text.split_whitespace().collect();
    let (month, day, time, meridiem, year) = match tokens.as_slice() {
        [_, month, day, time, year] => (month, day, time, None, year),
        [_, month, day, time, meridiem, year] => (month, day, time, Some(meridiem.to_ascii_lowercase()), year),
        _ => return Err(bad()),
    };
    let month = month_number(month).ok_or_else(bad)?;
    let day: u32 = day.parse().map_err(|_| bad())?;
    let year: i32 = year.parse().map_err(|_| bad())?;
    let (hms, fraction) = time.split_once('.').unwrap_or((time, ""));
    let mut parts = hms.split(':').map(|p| p.parse::<u32>());
    let (Some(Ok(mut hour)), Some(Ok(minute)), Some(Ok(second)), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad());
    };
    let nanos = parse_fraction(fraction).ok_or_else(bad)?;
    match meridiem.as_deref() {
        None => {}
        Some("am") if (1..=12).contains(&hour) => hour %= 12,
        Some("pm") if (1..=12).contains(&hour) => hour = hour % 12 + 12,
        Some(_) => return Err(bad()),
    }
    let naive = NaiveDate::from_ymd_opt(year, month, day)
        .and_then(|d| d.and_hms_nano_opt(hour, minute, second, nanos as u32))
        .ok_or_else(bad)?;
    let offset_seconds = match zone {
        DateZone::Fixed(seconds) => seconds,
        // In a DST gap or overlap, take the offset in force at that UTC instant.
        DateZone::Local => match Local.from_local_datetime(&naive).earliest() {
            Some(local) => local.offset().fix().local_minus_utc(),
            None => Local.offset_from_utc_datetime(&naive).fix().local_minus_utc(),
        },
    };
    let utc = naive.and_utc();
    Ok(i128::from(utc.timestamp()) * i128::from(NANOS) + i128::from(utc.timestamp_subsec_nanos())
        - i128::from(offset_seconds) * i128::from(NANOS))
}

fn month_number(name: &str) -> Option<u32> {
    const MONTHS: [&[&str]; 12] = [
        &["jan"],
        &["feb"],
        &["mar", "mär", "mrz"],
        &["apr"],
        &["may", "mai"],
        &["jun"],
        &["jul"],
        &["aug"],
        &["sep"],
        &["oct", "okt"],
        &["nov"],
        &["dec", "dez"],
    ];
    let lower = name.to_lowercase();
    let prefix: String = lower.chars().take(3).collect();
    MONTHS.iter().position(|names| names.contains(&prefix.as_str())).map(|i| i as u32 + 1)
}

/// Up to nine decimal digits as nanoseconds ("" is 0).
fn parse_fraction(digits: &str) -> Option<u64> {
    if digits.len() > 9 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if digits.is_empty() {
        return Some(0);
    }
    Some(digits.parse::<u64>().ok()? * 10u64.pow(9 - digits.len() as u32))
}

/// An event time `[-]SECONDS[.FRACTION]` in nanoseconds.
fn parse_time(text: &str) -> Option<i128> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (secs, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    if secs.is_empty() || !secs.bytes().all(|b| b.is_ascii_digit()) || secs.len() > 12 {
        return None;
    }
    let ns = i128::from(secs.parse::<u64>().ok()?) * i128::from(NANOS) + i128::from(parse_fraction(fraction)?);
    Some(if negative { -ns } else { ns })
}

/// Writes ASC: the header at the first frame (or at [`AscWriter::finish`]),
/// then one line a frame into the caller's buffer.
pub(crate) struct AscWriter {
    zone: DateZone,
    /// Start of the trigger block if no frame is ever written.
    fallback_start_ns: u64,
    /// Start of the trigger block (the first frame's millisecond), once written.
    base_ns: Option<u64>,
    numbers: HashMap<String, u32>,
    /// Channel names by number - 1.
    names: Vec<String>,
    /// Channels whose number comment has been written.
    announced: usize,
}

impl AscWriter {
    pub(crate) fn new(channels: &[String], fallback_start_ns: u64, zone: DateZone) -> Self {
        let mut writer =
            Self { zone, fallback_start_ns, base_ns: None, numbers: HashMap::new(), names: Vec::new(), announced: 0 };
        for channel in channels {
            writer.number(channel);
        }
        writer
    }

    fn number(&mut self, channel: &str) -> u32 {
        if let Some(&number) = self.numbers.get(channel) {
            return number;
        }
        self.names.push(channel.to_owned());
        let number = self.names.len() as u32;
        self.numbers.insert(channel.to_owned(), number);
        number
    }

    fn header(&mut self, out: &mut String, start_ns: u64) -> u64 {
        let base = start_ns - start_ns % MILLI;
        let date = format_date(base, self.zone);
        let _ = writeln!(out, "date {date}");
        out.push_str("base hex  timestamps absolute\n");
        out.push_str("internal events logged\n");
        let _ = writeln!(out, "// fieldhub start {}.{:03}", base / NANOS, (base % NANOS) / MILLI);
        self.announce(out);
        let _ = writeln!(out, "Begin Triggerblock {date}");
        let _ = writeln!(out, "{:>11} Start of measurement", "0.000000");
        self.base_ns = Some(base);
        base
    }

    fn announce(&mut self, out: &mut String) {
        for (i, name) in self.names.iter().enumerate().skip(self.announced) {
            let _ = writeln!(out, "// fieldhub channel {} = {name}", i + 1);
        }
        self.announced = self.names.len();
    }

    /// Append the lines for one frame (and the header before the first).
    pub(crate) fn write_frame(
        &mut self,
        out: &mut String,
        timestamp_ns: u64,
        channel: &str,
        frame: &Frame,
        direction: Direction,
    ) {
        let number = self.number(channel);
        let base = match self.base_ns {
            Some(base) => base,
            None => self.header(out, timestamp_ns),
        };
        self.announce(out);
        let relative = i128::from(timestamp_ns) - i128::from(base);
        let dir = match direction {
            Direction::Rx => "Rx",
            Direction::Tx => "Tx",
        };
        if frame.is_error() {
            out.push_str("// fieldhub error frame ");
            write_cansend(out, frame);
            out.push('\n');
            push_time(out, relative);
            let _ = writeln!(out, " {number}  ErrorFrame");
        } else if frame.is_fd() {
            push_time(out, relative);
            let _ = write!(out, " CANFD {number:>3} {dir:<4} ");
            push_id(out, frame, 8, false);
            let brs = u8::from(frame.flags().contains(FrameFlags::BRS));
            let esi = u8::from(frame.flags().contains(FrameFlags::ESI));
            let dlc = fd_len_to_dlc(frame.len()).unwrap_or(15);
            let _ = write!(out, " {brs} {esi} {dlc:x} {:>2}", frame.len());
            push_bytes(out, frame.data());
            let mut flags = FD_FLAG_EDL;
            if brs == 1 {
                flags |= FD_FLAG_BRS;
            }
            if esi == 1 {
                flags |= FD_FLAG_ESI;
            }
            // Duration, length, CRC and bit timings are unknown to a virtual bus: 0.
            let _ = writeln!(out, " {0:>8} {0:>4} {flags:>8X} {0:>8} {0:>8} {0:>8} {0:>8} {0:>8}", 0);
        } else {
            push_time(out, relative);
            let _ = write!(out, " {number}  ");
            push_id(out, frame, 15, true);
            let _ = write!(out, " {dir:<4} ");
            if frame.is_remote() {
                out.push('r');
                if !frame.is_empty() {
                    let _ = write!(out, " {:X}", frame.len());
                }
            } else {
                let _ = write!(out, "d {:X}", frame.dlc());
                push_bytes(out, frame.data());
            }
            out.push('\n');
        }
    }

    /// Append what ends the file (and the header if no frame came).
    pub(crate) fn finish(&mut self, out: &mut String) {
        if self.base_ns.is_none() {
            self.header(out, self.fallback_start_ns);
        }
        self.announce(out);
        out.push_str("End TriggerBlock\n");
    }
}

/// `[-]S.UUUUUU`, right-aligned in 11 columns as CANoe writes it.
fn push_time(out: &mut String, relative_ns: i128) {
    let negative = relative_ns < 0;
    let abs = relative_ns.unsigned_abs();
    let secs = abs / u128::from(NANOS);
    let micros = (abs % u128::from(NANOS)) / 1_000;
    let digits = secs.checked_ilog10().unwrap_or(0) as usize + 1;
    let width = usize::from(negative) + digits + 7;
    out.extend(std::iter::repeat_n(' ', 11usize.saturating_sub(width)));
    if negative {
        out.push('-');
    }
    let _ = write!(out, "{secs}.{micros:06}");
}

/// Hex id with `x` for extended ids, padded to `width` (left- or right-aligned).
fn push_id(out: &mut String, frame: &Frame, width: usize, left: bool) {
    let digits = frame.id().checked_ilog(16).unwrap_or(0) as usize + 1;
    let len = digits + usize::from(frame.is_extended());
    let pad = width.saturating_sub(len);
    if !left {
        out.extend(std::iter::repeat_n(' ', pad));
    }
    let _ = write!(out, "{:X}", frame.id());
    if frame.is_extended() {
        out.push('x');
    }
    if left {
        out.extend(std::iter::repeat_n(' ', pad));
    }
}

fn push_bytes(out: &mut String, bytes: &[u8]) {
    for b in bytes {
        let _ = write!(out, " {b:02X}");
    }
}

/// Records from an ASC log.
pub struct AscReader<R> {
    lines: Lines<R>,
    zone: DateZone,
    radix: u32,
    relative: bool,
    /// Unix time (ns) the event times count from.
    base_ns: i128,
    /// Exact start from a `// fieldhub start` comment, for the next trigger block.
    exact_start: Option<i128>,
    /// Time of the previous event, for "timestamps relative".
    previous_ns: i128,
    names: HashMap<u32, String>,
    /// Detail for the next `ErrorFrame` line, from a `// fieldhub error frame` comment.
    pending_error: Option<Frame>,
}

/// Why a line was not turned into a record.
enum Skip {
    /// Not a frame (comment, header, statistics, other event).
    NotAFrame,
    Malformed(String),
}

impl From<String> for Skip {
    fn from(message: String) -> Self {
        Self::Malformed(message)
    }
}

impl<R: BufRead> AscReader<R> {
    pub fn new(input: R, zone: DateZone) -> Self {
        Self {
            lines: Lines::new(input),
            zone,
            radix: 16,
            relative: false,
            base_ns: 0,
            exact_start: None,
            previous_ns: 0,
            names: HashMap::new(),
            pending_error: None,
        }
    }
}

/// The parts of an ASC reader that interpret one line.
struct LineContext<'a> {
    zone: DateZone,
    radix: &'a mut u32,
    relative: &'a mut bool,
    base_ns: &'a mut i128,
    exact_start: &'a mut Option<i128>,
    previous_ns: &'a mut i128,
    names: &'a mut HashMap<u32, String>,
    pending_error: &'a mut Option<Frame>,
}

impl<R: BufRead> Iterator for AscReader<R> {
    type Item = Result<Record, LogError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let (number, line) = match self.lines.next_line()? {
                Ok(line) => line,
                Err(e) => return Some(Err(e.into())),
            };
            let mut context = LineContext {
                zone: self.zone,
                radix: &mut self.radix,
                relative: &mut self.relative,
                base_ns: &mut self.base_ns,
                exact_start: &mut self.exact_start,
                previous_ns: &mut self.previous_ns,
                names: &mut self.names,
                pending_error: &mut self.pending_error,
            };
            match context.line(line.trim()) {
                Ok(record) => return Some(Ok(record)),
                Err(Skip::NotAFrame) => continue,
                Err(Skip::Malformed(message)) => return Some(Err(LogError::line(number, message))),
            }
        }
    }
}

impl LineContext<'_> {
    fn line(&mut self, line: &str) -> Result<Record, Skip> {
        if let Some(comment) = line.strip_prefix("//") {
            self.comment(comment.trim())?;
            return Err(Skip::NotAFrame);
        }
        let mut words = line.split_whitespace();
        let Some(first) = words.next() else { return Err(Skip::NotAFrame) };
        let rest = line[first.len()..].trim();
        match first.to_ascii_lowercase().as_str() {
            "date" => {
                *self.base_ns = parse_date(rest, self.zone)?;
                return Err(Skip::NotAFrame);
            }
            "base" => {
                self.base(rest)?;
                return Err(Skip::NotAFrame);
            }
            "begin" if words.next().is_some_and(|w| w.eq_ignore_ascii_case("triggerblock")) => {
                let date = rest["triggerblock".len().min(rest.len())..].trim();
                if let Some(exact) = self.exact_start.take() {
                    *self.base_ns = exact;
                } else if !date.is_empty() {
                    *self.base_ns = parse_date(date, self.zone)?;
                }
                *self.previous_ns = 0;
                return Err(Skip::NotAFrame);
            }
            _ => {}
        }
        if !first.starts_with(|c: char| c.is_ascii_digit() || c == '-') {
            // Header words ("internal events logged", "End TriggerBlock") and
            // anything else that is not a timed event.
            return Err(Skip::NotAFrame);
        }
        let time = parse_time(first).ok_or_else(|| format!("'{first}' is not an event time in seconds"))?;
        let relative_ns = if *self.relative { *self.previous_ns + time } else { time };
        *self.previous_ns = relative_ns;
        let fields: Vec<&str> = words.collect();
        let (number, frame, direction) = match fields.first() {
            Some(&"CANFD") => self.fd_event(&fields[1..])?,
            Some(channel) if channel.bytes().all(|b| b.is_ascii_digit()) => {
                self.classic_event(channel, &fields[1..])?
            }
            _ => return Err(Skip::NotAFrame),
        };
        let timestamp_ns = u64::try_from(*self.base_ns + relative_ns)
            .map_err(|_| format!("event time {first} lies before 1970 (check the file's date)"))?;
        let channel = match self.names.get(&number) {
            Some(name) => name.clone(),
            None => format!("can{}", number - 1),
        };
        Ok(Record { timestamp_ns, channel, frame, direction })
    }

    fn comment(&mut self, comment: &str) -> Result<(), String> {
        let Some(ours) = comment.strip_prefix("fieldhub ") else { return Ok(()) };
        if let Some(mapping) = ours.strip_prefix("channel ") {
            let bad = || format!("'// fieldhub channel {mapping}': expected '// fieldhub channel NUMBER = NAME'");
            let (number, name) = mapping.split_once('=').ok_or_else(bad)?;
            let number = channel_number(number.trim())?;
            let name = name.trim();
            if name.is_empty() || name.contains(char::is_whitespace) {
                return Err(bad());
            }
            self.names.insert(number, name.to_owned());
        } else if let Some(start) = ours.strip_prefix("start ") {
            let ns = parse_time(start.trim())
                .filter(|&ns| ns >= 0)
                .ok_or_else(|| format!("'// fieldhub start {start}': expected Unix seconds like 1700000000.123"))?;
            *self.exact_start = Some(ns);
        } else if let Some(frame) = ours.strip_prefix("error frame ") {
            let frame = parse_cansend(frame.trim()).map_err(|e| e.to_string())?;
            if !frame.is_error() {
                return Err(format!("'// fieldhub error frame {frame:?}' does not hold an error frame"));
            }
            *self.pending_error = Some(frame);
        }
        Ok(())
    }

    fn base(&mut self, rest: &str) -> Result<(), String> {
        let words: Vec<String> = rest.split_whitespace().map(str::to_ascii_lowercase).collect();
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        let (radix, stamps) = match words.as_slice() {
            [radix] => (radix, None),
            [radix, "timestamps", stamps] => (radix, Some(stamps)),
            _ => return Err(format!("'base {rest}': expected 'base hex|dec  timestamps absolute|relative'")),
        };
        *self.radix = match *radix {
            "hex" => 16,
            "dec" => 10,
            other => return Err(format!("'base {other}': expected hex or dec")),
        };
        *self.relative = match stamps.copied() {
            None | Some("absolute") => false,
            Some("relative") => true,
            Some(other) => return Err(format!("'timestamps {other}': expected absolute or relative")),
        };
        Ok(())
    }

    fn error_frame(&mut self) -> Result<Frame, String> {
        match self.pending_error.take() {
            Some(frame) => Ok(frame),
            None => Frame::error(CAN_ERR_BUSERROR, [0; 8]).map_err(|e| e.to_string()),
        }
    }

    /// `<channel> <id> <Rx|Tx> d <dlc> <bytes>…` / `… r [<dlc>]` / `<channel> ErrorFrame`.
    fn classic_event(&mut self, channel: &str, fields: &[&str]) -> Result<(u32, Frame, Option<Direction>), Skip> {
        let number = channel_number(channel)?;
        match fields {
            [error, ..] if error.eq_ignore_ascii_case("errorframe") => Ok((number, self.error_frame()?, None)),
            [id, dir, kind, rest @ ..] => {
                let direction = direction(dir).ok_or(Skip::NotAFrame)?;
                let (id, extended) = self.id(id)?;
                let frame = match kind.to_ascii_lowercase().as_str() {
                    "d" => {
                        let dlc_text = rest.first().ok_or("data frame without a DLC".to_owned())?;
                        let dlc = self.number(dlc_text, "DLC")?;
                        if dlc > 15 {
                            return Err(format!("DLC {dlc_text} is above 15").into());
                        }
                        let len = dlc.min(8) as usize;
                        let data = self.bytes(&rest[1..], len)?;
                        let mut frame = Frame::can(id, extended, &data).map_err(|e| e.to_string())?;
                        if dlc > 8 {
                            frame.set_len8_dlc(dlc as u8).map_err(|e| e.to_string())?;
                        }
                        frame
                    }
                    "r" => {
                        // A DLC may follow; newer writers add it, older ones do not.
                        let len = match rest.first().and_then(|t| u32::from_str_radix(t, *self.radix).ok()) {
                            Some(dlc) => dlc.min(8) as usize,
                            None => 0,
                        };
                        Frame::remote(id, extended, len).map_err(|e| e.to_string())?
                    }
                    _ => return Err(format!("'{kind}' after the direction: expected d (data) or r (remote)").into()),
                };
                Ok((number, frame, Some(direction)))
            }
            _ => Err(Skip::NotAFrame),
        }
    }

    /// `CANFD <channel> <dir> <id> [name] <brs> <esi> <dlc> <len> <bytes>… [<duration> <length> <flags> …]`.
    fn fd_event(&mut self, fields: &[&str]) -> Result<(u32, Frame, Option<Direction>), Skip> {
        let [channel, dir, id, rest @ ..] = fields else {
            return Err(format!("'CANFD {}': too few fields", fields.join(" ")).into());
        };
        let number = channel_number(channel)?;
        let direction = direction(dir).ok_or(Skip::NotAFrame)?;
        if id.eq_ignore_ascii_case("errorframe") {
            return Ok((number, self.error_frame()?, Some(direction)));
        }
        let (id, extended) = self.id(id)?;
        // The symbolic message name is optional; BRS is always a lone digit.
        let rest = match rest.first() {
            Some(word) if !word.bytes().all(|b| b.is_ascii_digit()) => &rest[1..],
            _ => rest,
        };
        let [brs, esi, dlc_text, len_text, rest @ ..] = rest else {
            return Err("CANFD line without BRS, ESI, DLC and data length".to_owned().into());
        };
        let flag = |text: &str, what: &str| match text {
            "0" => Ok(false),
            "1" => Ok(true),
            _ => Err(format!("{what} '{text}' is not 0 or 1")),
        };
        let (brs, esi) = (flag(brs, "BRS")?, flag(esi, "ESI")?);
        let dlc = self.number(dlc_text, "DLC")?;
        let len: usize = len_text.parse().map_err(|_| format!("data length '{len_text}' is not a number"))?;
        let data = self.bytes(rest, len)?;
        let line_flags = match rest.get(len + 2) {
            Some(text) => Some(u32::from_str_radix(text, 16).map_err(|_| format!("flags '{text}' are not hex"))?),
            None => None,
        };
        let frame = if line_flags.is_some_and(|f| f & FD_FLAG_EDL == 0) {
            // A classic frame on a CAN FD channel.
            if line_flags.is_some_and(|f| f & FD_FLAG_RTR != 0) {
                Frame::remote(id, extended, dlc.min(8) as usize).map_err(|e| e.to_string())?
            } else {
                let mut frame = Frame::can(id, extended, &data).map_err(|e| e.to_string())?;
                if dlc > 8 {
                    frame.set_len8_dlc(dlc as u8).map_err(|e| e.to_string())?;
                }
                frame
            }
        } else {
            if FD_LENGTHS.get(dlc as usize).is_none_or(|&l| l as usize != len) {
                return Err(format!("DLC {dlc_text} does not match data length {len}").into());
            }
            let mut flags = FrameFlags::empty();
            if extended {
                flags = flags.union(FrameFlags::EXTENDED);
            }
            if brs {
                flags = flags.union(FrameFlags::BRS);
            }
            if esi {
                flags = flags.union(FrameFlags::ESI);
            }
            Frame::can_fd(id, flags, &data).map_err(|e| e.to_string())?
        };
        Ok((number, frame, Some(direction)))
    }

    fn id(&self, text: &str) -> Result<(u32, bool), String> {
        let (digits, extended) = match text.strip_suffix(['x', 'X']) {
            Some(digits) => (digits, true),
            None => (text, false),
        };
        let id = u32::from_str_radix(digits, *self.radix)
            .map_err(|_| format!("identifier '{text}' is not a {} number", radix_name(*self.radix)))?;
        Ok((id, extended))
    }

    fn number(&self, text: &str, what: &str) -> Result<u32, String> {
        u32::from_str_radix(text, *self.radix)
            .map_err(|_| format!("{what} '{text}' is not a {} number", radix_name(*self.radix)))
    }

    fn bytes(&self, words: &[&str], len: usize) -> Result<Vec<u8>, String> {
        if words.len() < len {
            return Err(format!("{len} data bytes expected, {} given", words.len()));
        }
        words[..len]
            .iter()
            .map(|w| {
                u8::from_str_radix(w, *self.radix)
                    .map_err(|_| format!("data byte '{w}' is not a {} byte", radix_name(*self.radix)))
            })
            .collect()
    }
}

fn radix_name(radix: u32) -> &'static str {
    if radix == 10 {
        "decimal"
    } else {
        "hex"
    }
}

fn channel_number(text: &str) -> Result<u32, String> {
    match text.parse::<u32>() {
        Ok(0) | Err(_) => Err(format!("channel '{text}': ASC channels are numbers from 1")),
        Ok(number) => Ok(number),
    }
}

fn direction(text: &str) -> Option<Direction> {
    match text.to_ascii_lowercase().as_str() {
        "rx" => Some(Direction::Rx),
        "tx" => Some(Direction::Tx),
        // TxRq (transmit request) and anything else: not a frame on the bus.
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UTC: DateZone = DateZone::Fixed(0);

    fn read(text: &str) -> Vec<Result<Record, String>> {
        AscReader::new(text.as_bytes(), UTC).map(|r| r.map_err(|e| e.to_string())).collect()
    }

    fn frames(text: &str) -> Vec<Record> {
        read(text).into_iter().map(|r| r.unwrap_or_else(|e| panic!("{e}"))).collect()
    }

    fn write(records: &[(u64, &str, &str, Direction)], channels: &[&str]) -> String {
        let channels: Vec<String> = channels.iter().map(|c| c.to_string()).collect();
        let mut writer = AscWriter::new(&channels, 0, UTC);
        let mut out = String::new();
        for (ts, channel, frame, direction) in records {
            writer.write_frame(&mut out, *ts, channel, &parse_cansend(frame).unwrap(), *direction);
        }
        writer.finish(&mut out);
        out
    }

    #[test]
    fn dates_parse_in_the_forms_canoe_and_python_can_write() {
        // 2023-11-14 22:13:20.123 UTC = 1699999999.123 + 1 s.
        let expected = 1_700_000_000_123_000_000i128;
        for text in [
            "Tue Nov 14 10:13:20.123 pm 2023",
            "Tue Nov 14 10:13:20.123 PM 2023",
            "Tue Nov 14 22:13:20.123 2023",
            "Di Nov 14 22:13:20.123 2023",
        ] {
            assert_eq!(parse_date(text, UTC), Ok(expected), "{text}");
        }
        assert_eq!(parse_date("Wed Jan 01 12:00:00 am 2020", UTC), Ok(1_577_836_800_000_000_000));
        assert_eq!(parse_date("Mo Mär 02 00:00:00 2020", UTC), Ok(1_583_107_200_000_000_000));
        assert_eq!(parse_date("Tue Nov 14 23:13:20.123 2023", DateZone::Fixed(3600)), Ok(expected));
        for bad in ["yesterday", "Tue Foo 14 22:13:20 2023", "Tue Nov 14 25:13:20 2023", "Tue Nov 14 13:00:00 pm 2023"]
        {
            assert!(parse_date(bad, UTC).unwrap_err().contains("cannot read the date"), "{bad}");
        }
    }

    #[test]
    fn dates_round_trip_through_the_written_form() {
        for zone in [UTC, DateZone::Fixed(-5 * 3600), DateZone::Local] {
            let ns = 1_700_000_000_123_000_000u64;
            assert_eq!(parse_date(&format_date(ns, zone), zone), Ok(i128::from(ns)), "{zone:?}");
        }
        assert_eq!(format_date(1_700_000_000_123_000_000, UTC), "Tue Nov 14 10:13:20.123 pm 2023");
    }

    #[test]
    fn writer_produces_the_documented_layout() {
        let text = write(
            &[
                (1_700_000_000_123_456_000, "can0", "123#DEADBEEF", Direction::Rx),
                (1_700_000_000_124_000_000, "can0", "1ABCDEF0#R8", Direction::Tx),
                (1_700_000_000_125_000_000, "can0", "20000004#0000000000000000", Direction::Rx),
                (1_700_000_001_500_000_000, "fd0", "123##100112233445566778899AABB", Direction::Rx),
            ],
            &["can0"],
        );
        let expected = "\
date Tue Nov 14 10:13:20.123 pm 2023
base hex  timestamps absolute
internal events logged
// fieldhub start 1700000000.123
// fieldhub channel 1 = can0
Begin Triggerblock Tue Nov 14 10:13:20.123 pm 2023
   0.000000 Start of measurement
   0.000456 1  123             Rx   d 4 DE AD BE EF
   0.001000 1  1ABCDEF0x       Tx   r 8
// fieldhub error frame 20000004#0000000000000000
   0.002000 1  ErrorFrame
// fieldhub channel 2 = fd0
   1.377000 CANFD   2 Rx        123 1 0 9 12 00 11 22 33 44 55 66 77 88 99 AA BB        0    0     3000        0        0        0        0        0
End TriggerBlock
";
        assert_eq!(text, expected);
    }

    #[test]
    fn every_frame_kind_round_trips() {
        let fd64 = format!("7FF##1{}", (0..64u8).map(|b| format!("{b:02X}")).collect::<String>());
        let kinds = [
            "123#DEADBEEF",
            "123#",
            "7FF#0011223344556677",
            "1ABCDEF0#0011",
            "00000001#",
            "123#R",
            "123#R4",
            "1ABCDEF0#R8",
            "123#1122334455667788_C",
            "20000004#0102030405060708",
            "20000080#0000000000000000",
            "123##0",
            "123##1DEADBEEF",
            "123##2DEADBEEF",
            "1ABCDEF0##3001122334455667788990011",
            &fd64,
        ];
        let mut records = Vec::new();
        for (i, frame) in kinds.iter().enumerate() {
            let channel = if frame.contains("##") { "fd0" } else { "can0" };
            let direction = if i % 3 == 0 { Direction::Tx } else { Direction::Rx };
            records.push((1_700_000_000_000_000_000 + i as u64 * 1_234_567_000, channel, *frame, direction));
        }
        let text = write(&records, &["can0", "fd0"]);
        let read = frames(&text);
        assert_eq!(read.len(), records.len(), "{text}");
        for (record, (ts, channel, frame, direction)) in read.iter().zip(&records) {
            assert_eq!(record.timestamp_ns, *ts, "{frame}");
            assert_eq!(record.channel, *channel);
            assert_eq!(record.frame, parse_cansend(frame).unwrap(), "{text}");
            let expected_direction =
                if record.frame.is_error() && !record.frame.is_fd() { None } else { Some(*direction) };
            assert_eq!(record.direction, expected_direction, "{frame}");
        }
    }

    #[test]
    fn an_empty_recording_is_a_complete_file() {
        let mut writer = AscWriter::new(&["can0".into()], 1_700_000_000_123_999_999, UTC);
        let mut out = String::new();
        writer.finish(&mut out);
        assert!(out.starts_with("date Tue Nov 14 10:13:20.123 pm 2023\n"), "{out}");
        assert!(out.contains("// fieldhub channel 1 = can0\n"));
        assert!(out.ends_with("Start of measurement\nEnd TriggerBlock\n"), "{out}");
        assert!(frames(&out).is_empty());
    }

    #[test]
    fn frames_before_the_first_one_get_negative_times_and_read_back() {
        let text = write(
            &[
                (1_700_000_000_500_000_000, "can0", "123#01", Direction::Rx),
                (1_700_000_000_499_000_000, "can1", "123#02", Direction::Rx),
            ],
            &[],
        );
        assert!(text.contains("  -0.001000 2  123"), "{text}");
        let read = frames(&text);
        assert_eq!(read[1].timestamp_ns, 1_700_000_000_499_000_000);
        assert_eq!(read[1].channel, "can1");
    }

    #[test]
    fn relative_timestamps_and_decimal_base_are_understood() {
        let text = "\
date Wed Jan 01 12:00:00.000 am 2020
base dec  timestamps relative
no internal events logged
Begin Triggerblock Wed Jan 01 12:00:00.000 am 2020
   0.000000 Start of measurement
   0.100000 1  291             Rx   d 2 222 173
   0.050000 2  305419896x      Tx   d 1 10
End TriggerBlock
";
        let read = frames(text);
        assert_eq!(read.len(), 2);
        assert_eq!(read[0].timestamp_ns, 1_577_836_800_100_000_000);
        assert_eq!(read[0].frame, parse_cansend("123#DEAD").unwrap());
        assert_eq!(read[1].timestamp_ns, 1_577_836_800_150_000_000);
        assert_eq!(read[1].channel, "can1");
        assert_eq!(read[1].frame, parse_cansend("12345678#0A").unwrap());
    }

    #[test]
    fn malformed_frame_events_name_their_line() {
        let header = "date Wed Jan 01 12:00:00.000 am 2020\nbase hex  timestamps absolute\n";
        for (event, reason) in [
            ("   0.1 1  123  Rx   d 4 DE AD", "4 data bytes expected, 2 given"),
            ("   0.1 1  12G  Rx   d 1 00", "identifier '12G' is not a hex number"),
            ("   0.1 1  800  Rx   d 1 00", "11-bit"),
            ("   0.1 1  123  Rx   q 1 00", "expected d (data) or r (remote)"),
            ("   0.1 1  123  Rx   d 1 0x", "data byte '0x'"),
            ("   0.1 0  123  Rx   d 1 00", "channels are numbers from 1"),
            ("   0.1.2 1  123  Rx   d 1 00", "not an event time"),
            ("   0.1 CANFD 1 Rx 123 1 0 9 8 00 00 00 00 00 00 00 00", "DLC 9 does not match data length 8"),
            ("   0.1 CANFD 1 Rx 123 2 0 1 1 00", "BRS '2' is not 0 or 1"),
            ("   0.1 CANFD 1 Rx", "too few fields"),
        ] {
            let text = format!("{header}{event}\n");
            let result = read(&text);
            let error = result.last().unwrap().as_ref().unwrap_err();
            assert!(error.starts_with("line 3: "), "{event}: {error}");
            assert!(error.contains(reason), "{event}: {error}");
        }
    }

    #[test]
    fn non_frame_lines_are_skipped() {
        let text = "\
date Wed Jan 01 12:00:00.000 am 2020
base hex  timestamps absolute
internal events logged
// version 13.0.0
Begin Triggerblock Wed Jan 01 12:00:00.000 am 2020
   0.000000 Start of measurement
   0.010000 1  Statistic: D 0 R 0 XD 0 XR 0 E 0 O 0 B 0.00%
   0.020000 CAN 1 Status:chip status error active
   0.030000 1  123             TxRq d 1 00
   0.040000 Log: trigger event
   0.050000 SV: 1 0 1 ::Sys::Var = 2
   0.060000 1  J1939TP FEE3p 6 0 0 - Rx d 23 A0 0F A6 60 3B D1 40 1F
   0.070000 1  123             Rx   d 1 42
End TriggerBlock
";
        let read = frames(text);
        assert_eq!(read.len(), 1);
        assert_eq!(read[0].frame, parse_cansend("123#42").unwrap());
    }
}
