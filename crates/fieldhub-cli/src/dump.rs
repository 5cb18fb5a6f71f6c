//! `fieldhub dump`: print frames like candump — its options, filters and
//! line layouts (can-utils' candump.c is the reference; the text itself is
//! `candump_text.rs`'s, the ports `dump_session.rs`'s, the `-l` file
//! `dump_log.rs`'s).

use std::io::{BufWriter, Write};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use fieldhub_client::fate::{ChannelCondition, ChannelEvent};
use fieldhub_client::{Client, Filter, Frame, CAN_INV_FILTER};
use fieldhub_proto::error_text::describe_error_frame;

use crate::candump_text::{self as text, Stamps};
use crate::dump_log::LogFile;
use crate::dump_session::Session;
use crate::output::closed_pipe;
use crate::{HubSelect, PortSelect};

/// How long an idle dump waits for a frame before it looks for channel
/// events (`CHANNEL_STATE`), which wake no receiver.
const IDLE_LOOK: std::time::Duration = std::time::Duration::from_millis(200);

/// While frames keep coming, look for channel events (and `any`'s new
/// channels) every this many.
const EVENTS_EVERY: u64 = 256;

/// `-s`: candump's silent levels.
const SILENT_OFF: u8 = 0;
const SILENT_ANIMATION: u8 = 1;
const SILENT_ON: u8 = 2;

#[derive(clap::Args)]
pub struct DumpArgs {
    #[command(flatten)]
    hub: HubSelect,
    /// Log format, one frame a line: (SECONDS.MICROS) can0 123#DEADBEEF
    #[arg(short = 'L')]
    log: bool,
    /// Log frames to candump-YYYY-MM-DD_HHMMSS.log (local time) in the current directory, as candump -l;
    /// stdout stays silent unless -s says otherwise.
    #[arg(short = 'l')]
    log_file: bool,
    /// Log frames to FILE, as candump -f (`-f -` is -L).
    #[arg(short = 'f', value_name = "FILE")]
    log_name: Option<std::path::PathBuf>,
    /// Silent mode, as candump -s: 0 off (the default), 1 an animation, 2 silent (the default with -l/-f).
    #[arg(short = 's', value_name = "LEVEL", value_parser = clap::value_parser!(u8).range(0..=2))]
    silent: Option<u8>,
    /// Timestamps: a = absolute, A = absolute with local date and time, d = delta to the previous frame,
    /// z = since the first frame.
    #[arg(short = 't', value_name = "a|A|d|z")]
    timestamps: Option<char>,
    /// Nanoseconds instead of microseconds in timestamps and log lines, as candump -N.
    #[arg(short = 'N')]
    nanos: bool,
    /// Don't exit when the hub goes away (candump: "if a detected can device goes down"): wait for it
    /// and go on, as --reconnect.
    #[arg(short = 'D')]
    stay: bool,
    /// Monitor dropped frames, as candump -d: a DROPCOUNT line when this dump's ports lost frames
    /// because it read too slowly (on stdout and in the -l file).
    #[arg(short = 'd')]
    drops: bool,
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
    /// Channels (`any`: every channel of the hub, also those added later), each optionally with filters as in candump:
    /// can0,123:7FF,200:700 (ID:MASK passes matching ids, ID~MASK the others, #MASK error frames
    /// of those classes only; without #MASK every error frame is printed)
    #[arg(required = true, value_name = "CHANNEL[,ID:MASK|,ID~MASK|,#ERRMASK]...")]
    channels: Vec<String>,
}

/// What one channel's filters pass: candump's `<id>:<mask>` and inverted
/// `<id>~<mask>` acceptance filters (the client's SocketCAN filters, as
/// candump hands them to the kernel), and its `#<error mask>`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filters {
    acceptance: Vec<Filter>,
    /// Error classes (`CAN_ERR_*` bits) to print; `None`: all.
    error_mask: Option<u32>,
}

impl Filters {
    pub fn accept(&self, frame: &Frame) -> bool {
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
        if !"aAdz".contains(mode) {
            bail!("-t {mode}: use a (absolute), A (absolute with date), d (delta) or z (zero-based)");
        }
    }
    let specs = args.channels.iter().map(|s| parse_channel_spec(s)).collect::<anyhow::Result<Vec<_>>>()?;
    // candump: "-f -" is -L.
    let to_stdout = args.log_name.as_deref().is_some_and(|name| name.as_os_str() == "-");
    let log_format = args.log || to_stdout;
    let log_path = match &args.log_name {
        Some(name) if !to_stdout => Some(name.clone()),
        _ => args.log_file.then(|| crate::local_time::LocalTime::now().candump_log_name().into()),
    };
    let silent = match (args.silent, &log_path) {
        (Some(level), _) => level,
        (None, Some(_)) => {
            eprintln!("Disabled standard output while logging.");
            SILENT_ON
        }
        (None, None) => SILENT_OFF,
    };
    let mut log_file = log_path.map(|path| LogFile::create(path, silent)).transpose()?;
    let reconnect = crate::reconnect::Reconnect { reconnect: args.reconnect.reconnect || args.stay };
    let connect = || -> anyhow::Result<Session> {
        Session::listen(args.hub.connect("dump")?, specs.clone(), &args.port, args.lossless)
    };
    let mut session = reconnect.until_connected("dump", connect)?;
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut screen_stamps = Stamps::new(args.timestamps, args.nanos);
    // candump's log lines carry absolute stamps, or -t z's.
    let mut log_stamps = Stamps::new(Some(if args.timestamps == Some('z') { 'z' } else { 'a' }), args.nanos);
    let mut printed = 0u64;
    let mut taken = 0u64;
    let idle_limit = args.idle_exit_ms.map(Duration::from_millis);
    let mut last_frame = Instant::now();
    while args.count.is_none_or(|n| printed < n) {
        if log_file.as_ref().is_some_and(LogFile::interrupted) {
            break;
        }
        let look = match idle_limit {
            Some(limit) => match limit.checked_sub(last_frame.elapsed()) {
                Some(left) if !left.is_zero() => left.min(IDLE_LOOK),
                _ => break,
            },
            None => IDLE_LOOK,
        };
        let next = next_frame(&mut session, &mut out, log_file.as_mut(), look).and_then(|received| {
            taken += u64::from(received.is_some());
            let busy_look = received.is_some() && taken % EVENTS_EVERY == 0;
            if busy_look {
                report_channel_events(&session.client);
            }
            if received.is_none() || busy_look {
                session.look_for_new_channels()?;
            }
            Ok(received)
        });
        let received = match next {
            Ok(Some(r)) => r,
            Ok(None) => {
                if args.drops {
                    for handle in session.handles() {
                        tell_drops(&mut session, handle, silent, &mut out, log_file.as_mut())?;
                    }
                }
                continue;
            }
            Err(e) => {
                reconnect.after("dump", e)?;
                session = reconnect.until_connected("dump", connect)?;
                continue;
            }
        };
        if args.drops {
            tell_drops(&mut session, received.port, silent, &mut out, log_file.as_mut())?;
        }
        let Some(listened) = session.port(received.port) else {
            continue;
        };
        if !listened.filters.accept(&received.frame) {
            continue;
        }
        let channel = &listened.port.channel;
        last_frame = Instant::now();
        printed += 1;
        let frame = &received.frame;
        let now_ns = received.meta.timestamp_ns;
        if log_file.is_some() || (log_format && silent == SILENT_OFF) {
            let line = text::log_line(&log_stamps.stamp(now_ns), channel, frame, args.extra);
            if let Some(file) = &mut log_file {
                file.line(&line)?;
            }
            if log_format && silent == SILENT_OFF {
                writeln!(out, "{line}").map_err(closed_pipe)?;
                continue;
            }
        }
        if silent != SILENT_OFF {
            if silent == SILENT_ANIMATION {
                let turn = text::ANIMATION[((printed - 1) % 4) as usize];
                write!(out, "{turn}\x08").map_err(closed_pipe)?;
            }
            continue;
        }
        let extra = args.extra.then(|| text::extra_info(frame.flags()));
        let shown = match args.colour {
            true => text::coloured(channel, received.port),
            false => channel.clone(),
        };
        let mut line =
            text::stamped(&screen_stamps.stamp(now_ns), &text::candump_line(&shown, extra.as_deref(), frame));
        if args.ascii && !frame.is_remote() {
            line.push_str(&text::ascii_column(frame));
        }
        if args.explain_errors {
            if let Some(words) = describe_error_frame(frame, "\n\t") {
                line.push_str("\n\t");
                line.push_str(&words);
            }
        }
        writeln!(out, "{line}").map_err(closed_pipe)?;
    }
    out.flush().map_err(closed_pipe)?;
    match log_file {
        Some(file) => file.finish(),
        None => Ok(()),
    }
}

/// `-d`: say the frames the port of `handle` lost since the last time, as
/// candump's DROPCOUNT line (on stdout unless silent, and in the log file).
fn tell_drops(
    session: &mut Session,
    handle: u16,
    silent: u8,
    out: &mut impl Write,
    log_file: Option<&mut LogFile>,
) -> anyhow::Result<()> {
    let Some((new, total)) = session.new_drops(handle) else {
        return Ok(());
    };
    let Some(listened) = session.port(handle) else {
        return Ok(());
    };
    let line = text::drop_line(&listened.port.channel, new, total);
    if silent != SILENT_ON {
        writeln!(out, "{line}").map_err(closed_pipe)?;
    }
    if let Some(file) = log_file {
        file.line(&line)?;
    }
    Ok(())
}

/// The next frame; `None` after an idle look without one. Flushes `out`
/// (and the log file) while idle so a terminal, pipe or file sees frames
/// promptly.
fn next_frame(
    session: &mut Session,
    out: &mut impl Write,
    log_file: Option<&mut LogFile>,
    look: Duration,
) -> anyhow::Result<Option<fieldhub_client::Received>> {
    if let Some(r) = session.client.try_recv()? {
        return Ok(Some(r));
    }
    out.flush().map_err(closed_pipe)?;
    if let Some(file) = log_file {
        file.flush()?;
    }
    report_channel_events(&session.client);
    Ok(session.client.recv(Some(look))?)
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

#[cfg(test)]
mod tests {
    use super::*;
    use fieldhub_proto::text::parse_cansend;

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
