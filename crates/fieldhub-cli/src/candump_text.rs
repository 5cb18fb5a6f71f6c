//! The text `fieldhub dump` prints, as candump prints it (can-utils'
//! candump.c): the line layout, timestamps (`-t a|A|d|z`, `-N`), `-x`
//! details, `-a`'s ASCII column, `-c` colours, log lines (`-L`, `-l`),
//! `-d`'s drop counts and `-s 1`'s animation. CAN XL frames take can-utils'
//! XL layout (`lib.c`, `snprintf_long_canframe`): `PPP [LLLL] (VV|FF:SS:AAAAAAAA)`,
//! then at most 64 data bytes and ` ...` when there are more; raw frames,
//! which can-utils has no form for, the same with their 32-bit id and no
//! header: `RIIIIIIII [LLLL]`.
//!
//! Invariant: only formatting lives here — no I/O, no client — so every
//! layout is a unit test.

use fieldhub_client::Frame;
use fieldhub_proto::text::{write_cansend, CAN_ERR_FLAG};
use fieldhub_proto::FrameFlags;

/// candump's timestamps: `-t` and `-N`, with the previous frame's time
/// for the relative modes.
#[derive(Clone, Debug, Default)]
pub struct Stamps {
    /// `a` absolute, `A` absolute with local date and time, `d` delta to
    /// the previous frame, `z` since the first frame; `None`: no stamp.
    pub mode: Option<char>,
    /// `-N`: nanoseconds instead of microseconds.
    pub nanos: bool,
    /// The base of `d` and `z`: the previous (`d`) or first (`z`) frame's time.
    base_ns: Option<u64>,
}

impl Stamps {
    pub fn new(mode: Option<char>, nanos: bool) -> Self {
        Self { mode, nanos, base_ns: None }
    }

    /// The stamp of a frame received at `now_ns` (ns since the epoch) with
    /// its trailing blank, `"(1700000000.123456) "`, or `""` without `-t`.
    pub fn stamp(&mut self, now_ns: u64) -> String {
        let Some(mode) = self.mode else {
            return String::new();
        };
        let fraction = |ns: u64| match self.nanos {
            true => format!("{:09}", ns % 1_000_000_000),
            false => format!("{:06}", ns % 1_000_000_000 / 1_000),
        };
        match mode {
            'A' => {
                let local = crate::local_time::LocalTime::at(now_ns / 1_000_000_000);
                format!("({}.{}) ", local.date_time(), fraction(now_ns))
            }
            'd' | 'z' => {
                let base = *self.base_ns.get_or_insert(now_ns);
                if mode == 'd' {
                    self.base_ns = Some(now_ns);
                }
                let since = now_ns.saturating_sub(base);
                format!("({:03}.{}) ", since / 1_000_000_000, fraction(since))
            }
            _ => format!("({:010}.{}) ", now_ns / 1_000_000_000, fraction(now_ns)),
        }
    }
}

/// candump's screen line with its timestamp (from [`Stamps::stamp`]):
/// ` (1700000000.123456)  can0  123   [4]  DE AD BE EF`, the stamp after
/// the line's first blank, as candump prints it.
pub fn stamped(stamp: &str, line: &str) -> String {
    format!(" {stamp}{}", &line[1..])
}

/// A candump log line, as `-L` prints and `-l` writes it:
/// `(1700000000.123456) can0 123#DEADBEEF`, with ` R` or ` T` after it
/// when `extra` (`-x`) says which way the frame went.
pub fn log_line(stamp: &str, channel: &str, frame: &Frame, extra: bool) -> String {
    let mut line = format!("{stamp}{channel} ");
    write_cansend(&mut line, frame);
    if extra {
        line.push_str(if frame.flags().contains(FrameFlags::ECHO) { " T" } else { " R" });
    }
    line
}

/// `-d`'s line when a port lost frames since the last one:
/// `DROPCOUNT: dropped 3 CAN frames on 'can0' socket (total drops 5)`.
pub fn drop_line(channel: &str, new: u64, total: u64) -> String {
    let plural = if new > 1 { "s" } else { "" };
    format!("DROPCOUNT: dropped {new} CAN frame{plural} on '{channel}' socket (total drops {total})")
}

/// `-s 1`'s animation: one of these and a backspace per frame.
pub const ANIMATION: [char; 4] = ['|', '/', '-', '\\'];

/// candump -c's colours, a channel's by the order it was opened in.
const COLOURS: [&str; 6] = ["\x1b[34m", "\x1b[31m", "\x1b[32m", "\x1b[1m", "\x1b[35m", "\x1b[36m"];

/// `channel` in the colour of the port it came in on (ports are numbered
/// in the order the channels were given), as candump -c prints it.
pub fn coloured(channel: &str, port: u16) -> String {
    format!("{}{channel}\x1b[0m", COLOURS[port as usize % COLOURS.len()])
}

/// candump -a's column: a classic frame's missing bytes as blanks up to 8,
/// then its bytes in quotes, '.' for those that are not printable ASCII.
pub fn ascii_column(frame: &Frame) -> String {
    if frame.is_xl() || frame.is_raw() {
        // can-utils prints no ASCII column for CAN XL frames.
        return String::new();
    }
    let blanks = if frame.is_fd() { 0 } else { 8usize.saturating_sub(frame.len()) };
    let text: String = frame.data().iter().map(|&b| if (0x20..0x7F).contains(&b) { b as char } else { '.' }).collect();
    format!("{}  '{text}'", "   ".repeat(blanks))
}

/// candump -x's details: direction, then bit rate switch and error state indicator.
pub fn extra_info(flags: FrameFlags) -> String {
    let direction = if flags.contains(FrameFlags::ECHO) { "TX" } else { "RX" };
    let brs = if flags.contains(FrameFlags::BRS) { 'B' } else { '-' };
    let esi = if flags.contains(FrameFlags::ESI) { 'E' } else { '-' };
    format!("{direction} {brs} {esi}")
}

/// candump's default line: `  can0  123   [4]  DE AD BE EF`, with `extra`
/// (candump -x) after the channel: `  can0  RX B -  123  [12]  ...`.
pub fn candump_line(channel: &str, extra: Option<&str>, frame: &Frame) -> String {
    if frame.is_xl() || frame.is_raw() {
        return long_line(channel, extra, frame);
    }
    let id = if frame.is_error() {
        format!("{:08X}", frame.id() | CAN_ERR_FLAG)
    } else if frame.is_lin() {
        format!(" {:02X}", frame.id())
    } else if frame.is_extended() {
        format!("{:08X}", frame.id())
    } else {
        format!("{:03X}", frame.id())
    };
    let len = if frame.is_fd() { format!("[{:02}]", frame.len()) } else { format!(" [{}]", frame.len()) };
    let mut line = match extra {
        Some(extra) => format!("  {channel}  {extra}  {id}  {len} "),
        None => format!("  {channel}  {id}  {len} "),
    };
    if frame.is_remote() {
        line.push_str(" remote request");
    } else {
        for byte in frame.data() {
            line.push_str(&format!(" {byte:02X}"));
        }
    }
    if frame.is_error() {
        line.push_str("   ERRORFRAME");
    }
    if frame.is_lin() {
        line.push_str(&lin_note(frame));
    }
    line
}

/// Most data bytes a CAN XL or raw frame's line shows (can-utils crops an
/// XL frame's to `CANFD_MAX_DLEN`).
const SHOWN_LONG_DATA: usize = 64;

/// The line of a CAN XL frame (can-utils' layout) or a raw frame (the same
/// without the XL header).
fn long_line(channel: &str, extra: Option<&str>, frame: &Frame) -> String {
    let head = if frame.is_xl() {
        // canxl_frame.flags: CANXL_XLF, which every XL frame has, SEC and RRS.
        let flags = 0x80 | frame.flags().bits() & (FrameFlags::XL_SEC | FrameFlags::XL_RRS).bits();
        let header = format!("({:02X}|{flags:02X}:{:02X}:{:08X})", frame.vcid(), frame.sdt(), frame.acceptance_field());
        format!("{:03X} [{:04}] {header}", frame.priority(), frame.len())
    } else {
        format!("R{:08X} [{:04}]", frame.id(), frame.len())
    };
    let mut line = match extra {
        Some(extra) => format!("  {channel}  {extra}  {head}"),
        None => format!("  {channel}  {head}"),
    };
    for byte in frame.data().iter().take(SHOWN_LONG_DATA) {
        line.push_str(&format!(" {byte:02X}"));
    }
    if frame.len() > SHOWN_LONG_DATA {
        line.push_str(" ...");
    }
    line
}

/// What candump's line adds for a LIN frame: its checksum, that no slave
/// answered its header, or that the answers to it collided.
fn lin_note(frame: &Frame) -> String {
    let flags = frame.flags();
    if flags.contains(FrameFlags::LIN_NO_RESPONSE) {
        return "   LIN no response".into();
    }
    if frame.is_lin_wake_up() {
        return "   LIN WAKE-UP".into();
    }
    if frame.is_lin_go_to_sleep() {
        return format!("   LIN GO-TO-SLEEP, classic checksum {:02X}", frame.len8_dlc());
    }
    if flags.contains(FrameFlags::LIN_COLLISION) {
        return format!("   LIN collision, checksum read {:02X}", frame.len8_dlc());
    }
    let model = if flags.contains(FrameFlags::LIN_CLASSIC) { "classic" } else { "enhanced" };
    let wrong = if flags.contains(FrameFlags::LIN_CHECKSUM_ERROR) { " (wrong)" } else { "" };
    format!("   LIN {model} checksum {:02X}{wrong}", frame.len8_dlc())
}

#[cfg(test)]
mod tests {
    use super::*;
    use fieldhub_proto::text::parse_cansend;

    #[test]
    fn lin_lines_say_the_checksum_a_missing_response_or_a_collision() {
        let line = |text| candump_line("lin0", None, &parse_cansend(text).unwrap());
        assert_eq!(line("L10#4A5593E5"), "  lin0   10   [4]  4A 55 93 E5   LIN enhanced checksum 96");
        assert_eq!(line("L22#-"), "  lin0   22   [0]    LIN no response");
        assert_eq!(line("L30#1000/X!78"), "  lin0   30   [2]  10 00   LIN collision, checksum read 78");
        assert_eq!(line("LW#-"), "  lin0   00   [0]    LIN WAKE-UP");
        assert_eq!(
            line("L3C#00FFFFFFFFFFFFFF/C"),
            "  lin0   3C   [8]  00 FF FF FF FF FF FF FF   LIN GO-TO-SLEEP, classic checksum 00"
        );
    }

    #[test]
    fn candump_line_matches_can_utils_layout() {
        let frame = parse_cansend("123#DEADBEEF").unwrap();
        assert_eq!(candump_line("can0", None, &frame), "  can0  123   [4]  DE AD BE EF");
        let fd = parse_cansend("123##1112233445566778899AABBCC").unwrap();
        assert_eq!(candump_line("can0", None, &fd), "  can0  123  [12]  11 22 33 44 55 66 77 88 99 AA BB CC");
        let remote = parse_cansend("12345678#R").unwrap();
        assert_eq!(candump_line("can1", None, &remote), "  can1  12345678   [0]  remote request");
    }

    #[test]
    fn can_xl_lines_are_can_utils_xl_layout_and_raw_lines_fieldhubs() {
        let xl = parse_cansend("42123#81:03:12345678#A5B6").unwrap();
        assert_eq!(candump_line("xl0", None, &xl), "  xl0  123 [0002] (42|81:03:12345678) A5 B6");
        assert_eq!(ascii_column(&xl), "", "no ASCII column for XL frames");
        let long = parse_cansend(&format!("00123#80:00:00000000#{}", "55".repeat(100))).unwrap();
        let line = candump_line("xl0", Some("RX - -"), &long);
        assert!(line.starts_with("  xl0  RX - -  123 [0100] (00|80:00:00000000) 55 55"), "{line}");
        assert!(line.ends_with(&format!("{} ...", " 55".repeat(64))), "at most 64 bytes: {line}");
        let raw = parse_cansend("R00000011#0A0B").unwrap();
        assert_eq!(candump_line("field", None, &raw), "  field  R00000011 [0002] 0A 0B");
    }

    #[test]
    fn the_ascii_column_and_colours_are_candumps() {
        let frame = parse_cansend("123#31323334").unwrap();
        let line = candump_line("can0", None, &frame) + &ascii_column(&frame);
        // Four missing bytes of three columns each, then two blanks.
        assert_eq!(line, format!("  can0  123   [4]  31 32 33 34{}'1234'", " ".repeat(14)));
        let binary = parse_cansend("123#00414243FF").unwrap();
        assert_eq!(ascii_column(&binary), format!("{}'.ABC.'", " ".repeat(11)));
        assert_eq!(coloured("can1", 1), "\x1b[31mcan1\x1b[0m");
    }

    #[test]
    fn a_timestamp_stands_where_candump_prints_it() {
        let line = candump_line("can0", None, &parse_cansend("123#DEADBEEF").unwrap());
        let mut absolute = Stamps::new(Some('a'), false);
        let stamp = absolute.stamp(1_700_000_000_000_042_999);
        assert_eq!(stamped(&stamp, &line), " (1700000000.000042)  can0  123   [4]  DE AD BE EF");
        assert_eq!(stamped(&Stamps::new(None, false).stamp(5), &line), line);
    }

    #[test]
    fn relative_stamps_have_three_second_digits_and_n_gives_nanoseconds() {
        let mut delta = Stamps::new(Some('d'), false);
        assert_eq!(delta.stamp(10_000_000_000), "(000.000000) ");
        assert_eq!(delta.stamp(10_250_000_000), "(000.250000) ");
        assert_eq!(delta.stamp(10_260_000_000), "(000.010000) ");
        let mut zero = Stamps::new(Some('z'), true);
        assert_eq!(zero.stamp(10_000_000_000), "(000.000000000) ");
        assert_eq!(zero.stamp(1_010_000_000_007), "(1000.000000007) ");
        assert_eq!(Stamps::new(Some('a'), true).stamp(1_700_000_000_000_000_042), "(1700000000.000000042) ");
    }

    #[test]
    fn t_capital_a_gives_the_local_date_and_time() {
        let stamp = Stamps::new(Some('A'), false).stamp(1_700_000_000_123_456_000);
        let local = crate::local_time::LocalTime::at(1_700_000_000).date_time();
        assert_eq!(stamp, format!("({local}.123456) "));
        assert_eq!(local.len(), "2023-11-14 22:13:20".len(), "{local}");
    }

    #[test]
    fn log_lines_are_candumps_with_r_or_t_under_x() {
        let frame = parse_cansend("123#DEADBEEF").unwrap();
        let stamp = Stamps::new(Some('a'), false).stamp(1_700_000_000_000_001_000);
        assert_eq!(log_line(&stamp, "can0", &frame, false), "(1700000000.000001) can0 123#DEADBEEF");
        assert_eq!(log_line(&stamp, "can0", &frame, true), "(1700000000.000001) can0 123#DEADBEEF R");
        assert_eq!(drop_line("can0", 1, 1), "DROPCOUNT: dropped 1 CAN frame on 'can0' socket (total drops 1)");
        assert_eq!(drop_line("can1", 3, 5), "DROPCOUNT: dropped 3 CAN frames on 'can1' socket (total drops 5)");
    }

    #[test]
    fn extra_details_follow_the_channel_as_candump_x_prints_them() {
        let fd = parse_cansend("123##3DEAD").unwrap();
        let extra = extra_info(fd.flags());
        assert_eq!(candump_line("can0", Some(&extra), &fd), "  can0  RX B E  123  [02]  DE AD");
        let classic = parse_cansend("123#01").unwrap();
        let extra = extra_info(classic.flags() | FrameFlags::ECHO);
        assert_eq!(candump_line("can0", Some(&extra), &classic), "  can0  TX - -  123   [1]  01");
    }
}
