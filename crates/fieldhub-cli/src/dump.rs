//! `fieldhub dump`: print frames like candump.

use std::collections::HashMap;
use std::io::{BufWriter, Write};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use fieldhub_client::fate::{ChannelCondition, ChannelEvent};
use fieldhub_client::{Client, Filter, Frame, PortConfig, CAN_INV_FILTER};
use fieldhub_proto::error_text::describe_error_frame;
use fieldhub_proto::text::{format_log_line, CAN_ERR_FLAG};
use fieldhub_proto::FrameFlags;

use crate::output::closed_pipe;
use crate::{HubSelect, PortSelect};

/// How long an idle dump waits for a frame before it looks for channel
/// events (`CHANNEL_STATE`), which wake no receiver.
const IDLE_LOOK: std::time::Duration = std::time::Duration::from_millis(200);

/// While frames keep coming, look for channel events every this many.
const EVENTS_EVERY: u64 = 256;

#[derive(clap::Args)]
pub struct DumpArgs {
    #[command(flatten)]
    hub: HubSelect,
    /// Log format, one frame a line: (SECONDS.MICROS) can0 123#DEADBEEF
    #[arg(short = 'L')]
    log: bool,
    /// Timestamps: a = absolute, d = delta to the previous frame, z = since the first frame.
    #[arg(short = 't', value_name = "a|d|z")]
    timestamps: Option<char>,
    /// Exit after this many frames.
    #[arg(short = 'n', value_name = "COUNT")]
    count: Option<u64>,
    /// Extra details after the channel, as candump -x: RX or TX (TX: this client's own
    /// frame), then B (bit rate switch) and E (error state indicator) of CAN FD frames or '-'.
    #[arg(short = 'x')]
    extra: bool,
    /// Explain error frames in words below their line, as candump -e:
    /// controller-problem{tx-error-passive}, error-counter-tx-rx{{136}{0}}, ...
    #[arg(short = 'e')]
    explain_errors: bool,
    /// Exit (status 0) when no frame has come for this many milliseconds, as candump -T.
    #[arg(short = 'T', value_name = "MS")]
    idle_exit_ms: Option<u64>,
    /// The frame's bytes as ASCII after its data ('.' for what is not printable), as candump -a.
    #[arg(short = 'a')]
    ascii: bool,
    /// The channel's name in a colour of its own (blue, red, green, bold, magenta, cyan in the
    /// order the channels are given), as candump -c.
    #[arg(short = 'c')]
    colour: bool,
    /// Never lose a frame: when this reader falls behind, the channel waits
    /// for it (block_on_overflow) instead of dropping and counting.
    #[arg(long)]
    lossless: bool,
    #[command(flatten)]
    port: PortSelect,
    #[command(flatten)]
    reconnect: crate::reconnect::Reconnect,
    /// Channels (`any`: every channel of the hub), each optionally with filters as in candump:
    /// can0,123:7FF,200:700 (ID:MASK passes matching ids, ID~MASK the others, #MASK error frames
    /// of those classes only; without #MASK every error frame is printed)
    #[arg(required = true, value_name = "CHANNEL[,ID:MASK|,ID~MASK|,#ERRMASK]...")]
    channels: Vec<String>,
}

/// What one channel's filters pass: candump's `<id>:<mask>` and inverted
/// `<id>~<mask>` acceptance filters (the client's SocketCAN filters, as
/// candump hands them to the kernel), and its `#<error mask>`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Filters {
    acceptance: Vec<Filter>,
    /// Error classes (`CAN_ERR_*` bits) to print; `None`: all.
    error_mask: Option<u32>,
}

impl Filters {
    fn accept(&self, frame: &Frame) -> bool {
        if frame.is_error() {
            return self.error_mask.is_none_or(|mask| frame.id() & mask != 0);
        }
        self.acceptance.is_empty() || self.acceptance.iter().any(|f| f.accepts(frame))
    }
}

fn parse_channel_spec(spec: &str) -> anyhow::Result<(String, Filters)> {
    let mut parts = spec.split(',');
    let channel = parts.next().unwrap_or_default().to_owned();
    if channel.is_empty() {
        bail!("'{spec}': missing channel name");
    }
    let mut filters = Filters::default();
    for f in parts {
        let parse = |s: &str| u32::from_str_radix(s, 16).with_context(|| format!("filter '{f}': '{s}' is not hex"));
        if let Some(mask) = f.strip_prefix('#') {
            filters.error_mask = Some(parse(mask)?);
        } else if let Some((id, mask)) = f.split_once(':') {
            filters.acceptance.push(Filter { can_id: parse(id)?, can_mask: parse(mask)? });
        } else if let Some((id, mask)) = f.split_once('~') {
            filters.acceptance.push(Filter { can_id: parse(id)? | CAN_INV_FILTER, can_mask: parse(mask)? });
        } else {
            bail!("filter '{f}' is not ID:MASK, ID~MASK or #ERRMASK (hex)");
        }
    }
    Ok((channel, filters))
}

pub fn run(args: DumpArgs) -> anyhow::Result<()> {
    if let Some(mode) = args.timestamps {
        if !"adz".contains(mode) {
            bail!("-t {mode}: use a (absolute), d (delta) or z (zero-based)");
        }
    }
    let specs = args.channels.iter().map(|s| parse_channel_spec(s)).collect::<anyhow::Result<Vec<_>>>()?;
    let (mut client, mut by_port) = args.reconnect.until_connected("dump", || listen(&args, specs.clone()))?;
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut printed = 0u64;
    let (mut first_ns, mut previous_ns) = (None, None);
    let mut taken = 0u64;
    let idle_limit = args.idle_exit_ms.map(Duration::from_millis);
    let mut last_frame = Instant::now();
    while args.count.is_none_or(|n| printed < n) {
        let look = match idle_limit {
            Some(limit) => match limit.checked_sub(last_frame.elapsed()) {
                Some(left) if !left.is_zero() => left.min(IDLE_LOOK),
                _ => break,
            },
            None => IDLE_LOOK,
        };
        let received = match next_frame(&client, &mut out, look) {
            Ok(Some(r)) => r,
            Ok(None) => continue,
            Err(e) => {
                args.reconnect.after("dump", e)?;
                (client, by_port) = args.reconnect.until_connected("dump", || listen(&args, specs.clone()))?;
                continue;
            }
        };
        taken += 1;
        if taken % EVENTS_EVERY == 0 {
            report_channel_events(&client);
        }
        let Some((channel, filters)) = by_port.get(&received.port) else {
            continue;
        };
        if !filters.accept(&received.frame) {
            continue;
        }
        last_frame = Instant::now();
        let line = if args.log {
            format_log_line(received.meta.timestamp_ns, channel, &received.frame)
        } else {
            let stamp = args.timestamps.map(|mode| {
                let now = received.meta.timestamp_ns;
                let base = match mode {
                    'd' => previous_ns.unwrap_or(now),
                    'z' => *first_ns.get_or_insert(now),
                    _ => 0,
                };
                previous_ns = Some(now);
                let ns = now - base;
                (ns / 1_000_000_000, (ns % 1_000_000_000) / 1_000)
            });
            let extra = args.extra.then(|| extra_info(received.frame.flags()));
            let shown = match args.colour {
                true => coloured(channel, received.port),
                false => channel.clone(),
            };
            let mut line = stamped(stamp, candump_line(&shown, extra.as_deref(), &received.frame));
            if args.ascii && !received.frame.is_remote() {
                line.push_str(&ascii_column(&received.frame));
            }
            if args.explain_errors {
                if let Some(words) = describe_error_frame(&received.frame, "\n\t") {
                    line.push_str("\n\t");
                    line.push_str(&words);
                }
            }
            line
        };
        writeln!(out, "{line}").map_err(closed_pipe)?;
        printed += 1;
    }
    out.flush().map_err(closed_pipe)
}

/// The ports of one session: a port's handle → its channel and filters.
type Listening = HashMap<u16, (String, Filters)>;

/// Connect and open a port on every channel of `specs` (`any`: every
/// channel of the hub, with the filters given for it, as candump's).
fn listen(args: &DumpArgs, mut specs: Vec<(String, Filters)>) -> anyhow::Result<(Client, Listening)> {
    let client = args.hub.connect("dump")?;
    if let Some(at) = specs.iter().position(|(channel, _)| channel == "any") {
        let (_, filters) = specs.remove(at);
        let stats = client.stats().context("cannot list the hub's channels for 'any'")?;
        for channel in stats.channels {
            if !specs.iter().any(|(c, _)| *c == channel.name) {
                specs.push((channel.name, filters.clone()));
            }
        }
    }
    let mut by_port = HashMap::new();
    let specs_len = specs.len();
    for (channel, filters) in specs {
        // As candump: CAN FD frames too (CAN_RAW_FD_FRAMES).
        let config = PortConfig { block_on_overflow: args.lossless, ..args.port.config(specs_len)? };
        let port = client.open_port_with(&channel, &config).with_context(|| format!("cannot listen on '{channel}'"))?;
        by_port.insert(port.handle, (channel, filters));
    }
    Ok((client, by_port))
}

/// The next frame; `None` after an idle look without one. Flushes `out`
/// while idle so a terminal or pipe sees frames promptly.
fn next_frame(
    client: &Client,
    out: &mut impl Write,
    look: Duration,
) -> anyhow::Result<Option<fieldhub_client::Received>> {
    if let Some(r) = client.try_recv()? {
        return Ok(Some(r));
    }
    out.flush().map_err(closed_pipe)?;
    report_channel_events(client);
    Ok(client.recv(Some(look))?)
}

/// Print what the hub reported about the dumped channels (a federation's
/// owner gone or back, frames this hub's sequence lacks) to stderr, a line
/// each, apart from the frames on stdout.
fn report_channel_events(client: &Client) {
    for event in client.channel_events() {
        eprintln!("{}", channel_event_line(&event));
    }
}

/// `dump: waiting: channel 'body' waits for …`, `dump: gap, 2 frames missed: …`.
fn channel_event_line(event: &ChannelEvent) -> String {
    let condition = match event.condition {
        Some(ChannelCondition::Gap) => format!("gap, {} frames missed", event.missed),
        Some(condition) => condition.name().to_owned(),
        None => "unknown channel condition".to_owned(),
    };
    format!("dump: {condition}: {}", event.text)
}

/// candump's line with its timestamp (seconds, microseconds) when one is
/// asked for: ` (1700000000.123456)  can0  123   [4]  DE AD BE EF`, the
/// stamp taking the first of the line's two leading spaces' place, as
/// candump prints it.
fn stamped(stamp: Option<(u64, u64)>, line: String) -> String {
    match stamp {
        Some((seconds, micros)) => format!(" ({seconds}.{micros:06}) {}", &line[1..]),
        None => line,
    }
}

/// candump -c's colours, a channel's by the order it was opened in.
const COLOURS: [&str; 6] = ["\x1b[34m", "\x1b[31m", "\x1b[32m", "\x1b[1m", "\x1b[35m", "\x1b[36m"];

/// `channel` in the colour of the port it came in on (ports are numbered
/// in the order the channels were given), as candump -c prints it.
fn coloured(channel: &str, port: u16) -> String {
    format!("{}{channel}\x1b[0m", COLOURS[port as usize % COLOURS.len()])
}

/// candump -a's column: a classic frame's missing bytes as blanks up to 8,
/// then its bytes in quotes, '.' for those that are not printable ASCII.
fn ascii_column(frame: &Frame) -> String {
    let blanks = if frame.is_fd() { 0 } else { 8usize.saturating_sub(frame.len()) };
    let text: String = frame.data().iter().map(|&b| if (0x20..0x7F).contains(&b) { b as char } else { '.' }).collect();
    format!("{}  '{text}'", "   ".repeat(blanks))
}

/// candump -x's details: direction, then bit rate switch and error state indicator.
fn extra_info(flags: FrameFlags) -> String {
    let direction = if flags.contains(FrameFlags::ECHO) { "TX" } else { "RX" };
    let brs = if flags.contains(FrameFlags::BRS) { 'B' } else { '-' };
    let esi = if flags.contains(FrameFlags::ESI) { 'E' } else { '-' };
    format!("{direction} {brs} {esi}")
}

/// candump's default line: `  can0  123   [4]  DE AD BE EF`, with `extra`
/// (candump -x) after the channel: `  can0  RX B -  123  [12]  ...`.
fn candump_line(channel: &str, extra: Option<&str>, frame: &Frame) -> String {
    let id = if frame.is_error() {
        format!("{:08X}", frame.id() | CAN_ERR_FLAG)
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
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use fieldhub_proto::text::parse_cansend;

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
        assert_eq!(stamped(None, line.clone()), "  can0  123   [4]  DE AD BE EF");
        assert_eq!(stamped(Some((1_700_000_000, 42)), line), " (1700000000.000042)  can0  123   [4]  DE AD BE EF");
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

    #[test]
    fn channel_events_are_one_line_each_with_the_condition_first() {
        let event = |condition, missed| ChannelEvent { port: 0, condition, missed, text: "channel 'body' …".into() };
        assert_eq!(channel_event_line(&event(Some(ChannelCondition::Waiting), 0)), "dump: waiting: channel 'body' …");
        assert_eq!(
            channel_event_line(&event(Some(ChannelCondition::Gap), 2)),
            "dump: gap, 2 frames missed: channel 'body' …"
        );
        assert_eq!(channel_event_line(&event(None, 0)), "dump: unknown channel condition: channel 'body' …");
    }

    #[test]
    fn channel_spec_parses_filters() {
        let (channel, filters) = parse_channel_spec("can0,123:7FF,200:700").unwrap();
        assert_eq!(channel, "can0");
        let plain = |can_id, can_mask| Filter { can_id, can_mask };
        assert_eq!(filters.acceptance, [plain(0x123, 0x7FF), plain(0x200, 0x700)]);
        assert_eq!(filters.error_mask, None);
        assert!(parse_channel_spec("can0,12").is_err());
    }

    #[test]
    fn inverted_filters_and_error_masks_work_as_in_candump() {
        let (_, filters) = parse_channel_spec("can0,123~7FF,#4").unwrap();
        let frame = |text: &str| parse_cansend(text).unwrap();
        assert!(!filters.accept(&frame("123#00")), "the inverted filter's own id");
        assert!(filters.accept(&frame("124#00")));
        // Error class 0x4 (lost arbitration) passes #4, class 0x40 (bus off) does not.
        assert!(filters.accept(&Frame::error(0x4, [0; 8]).unwrap()));
        assert!(!filters.accept(&Frame::error(0x40, [0; 8]).unwrap()));
        let (_, everything) = parse_channel_spec("can0").unwrap();
        assert!(everything.accept(&Frame::error(0x40, [0; 8]).unwrap()), "without #MASK every error frame");
    }
}
