//! `fieldhub replay`: play a candump log or Vector ASC file back onto a hub.
//!
//! The file is read once up front, so a malformed line or an unknown
//! channel is reported before the first frame goes out. With the recorded
//! timing the clock starts once the first frame is on the bus (a flush
//! round trip confirms it), and every later frame is due at `start + (its
//! timestamp - the first timestamp)`: lateness of one frame does not shift
//! the ones after it, and no gap after the first frame comes out shorter
//! than recorded. With `--synchronized` the replay is a participant of a
//! hub in virtual time instead and sends each frame at a bus time
//! (`replay_bus_time`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use fieldhub_client::Port;
use fieldhub_log::{open, Format, LogReader, ReadOptions};

use crate::replay_bus_time::{self, Anchor};
use crate::{HubSelect, PortSelect};

#[derive(clap::Args)]
pub struct ReplayArgs {
    #[command(flatten)]
    hub: HubSelect,
    /// Send the file's channel OLD on hub channel NEW (repeatable); unmapped channels keep their names.
    #[arg(long = "map", value_name = "OLD=NEW")]
    map: Vec<String>,
    /// Send as fast as the bus takes the frames instead of with the recorded timing (canplayer -t).
    #[arg(long, short = 't', conflicts_with = "synchronized")]
    fast: bool,
    /// With --fast: this gap between frames, in milliseconds (canplayer -g).
    #[arg(short = 'g', value_name = "MS", requires = "fast")]
    gap_ms: Option<u64>,
    /// Skip gaps in the timestamps longer than this many seconds: the frame after one goes out at once
    /// (canplayer -s).
    #[arg(short = 's', value_name = "SECONDS", conflicts_with = "synchronized", value_parser = clap::value_parser!(u64).range(1..))]
    skip_gaps: Option<u64>,
    /// Stop after this many frames (canplayer -n).
    #[arg(short = 'n', value_name = "COUNT", conflicts_with = "synchronized", value_parser = clap::value_parser!(u64).range(1..))]
    count: Option<u64>,
    /// Print each frame sent: hub channel, (file channel), then the frame as candump prints it (canplayer -v).
    #[arg(short = 'v', conflicts_with = "synchronized")]
    verbose: bool,
    /// Join a hub in virtual time as a synchronised participant and send each frame at the bus time that
    /// stamps it as recorded, the first one at the bus time the replay joined (docs/virtual-time.md).
    #[arg(long)]
    synchronized: bool,
    /// With --synchronized: the file's timestamps are bus times (a log a hub in virtual time recorded), and
    /// each frame goes out at its recorded time, so the hub's recording of the replay is the file again.
    #[arg(long, requires = "synchronized")]
    recorded_bus_time: bool,
    /// Play the file this many times; `i` for ever (canplayer -l).
    #[arg(long = "loop", short = 'l', value_name = "N|i", default_value = "1", value_parser = parse_loops)]
    loops: u64,
    /// File format [default: from the extension (.log, .asc, .blf), else from the first bytes].
    #[arg(short = 'f', long = "format", value_name = "candump|asc|blf")]
    format: Option<Format>,
    #[command(flatten)]
    port: PortSelect,
    /// The log to play, as canplayer -I (then every word after the options is an OUT=IN assignment).
    #[arg(short = 'I', value_name = "FILE")]
    input: Option<PathBuf>,
    /// The log to play (unless -I names it). ASC and BLF channels without fieldhub's channel names (a
    /// `// fieldhub channel` comment, a BLF text object) are named can0, can1, … (channel 1, 2, …).
    #[arg(required_unless_present = "input")]
    file: Option<PathBuf>,
    /// canplayer's interface assignments, OUT=IN: the file's channel IN goes out on hub channel OUT (the
    /// reverse of --map's order). With any given, as canplayer, only the assigned channels are played.
    #[arg(value_name = "OUT=IN")]
    assignments: Vec<String>,
}

impl ReplayArgs {
    /// The log to play: `-I FILE` or the positional one (clap requires one).
    fn file(&self) -> &std::path::Path {
        self.file.as_deref().unwrap_or_else(|| std::path::Path::new("-"))
    }
}

/// `--loop`/`-l`: a count of 1 or more, or `i` (for ever, as canplayer's).
fn parse_loops(text: &str) -> Result<u64, String> {
    match text {
        "i" => Ok(u64::MAX),
        _ => text
            .parse()
            .ok()
            .filter(|&n| n >= 1)
            .ok_or_else(|| format!("'{text}': give a count of 1 or more, or i (for ever)")),
    }
}

/// What the first pass learned about the file.
struct Survey {
    /// Channels in order of first appearance.
    channels: Vec<String>,
    first_timestamp_ns: u64,
    frames: u64,
}

fn reader(args: &ReplayArgs) -> anyhow::Result<LogReader<std::io::BufReader<std::fs::File>>> {
    open(args.file(), args.format, &ReadOptions::default())
        .with_context(|| format!("cannot read '{}'", args.file().display()))
}

fn survey(args: &ReplayArgs) -> anyhow::Result<Survey> {
    let mut survey = Survey { channels: Vec::new(), first_timestamp_ns: 0, frames: 0 };
    for record in reader(args)? {
        let record = record.with_context(|| format!("'{}'", args.file().display()))?;
        if survey.frames == 0 {
            survey.first_timestamp_ns = record.timestamp_ns;
        }
        if !survey.channels.contains(&record.channel) {
            survey.channels.push(record.channel);
        }
        survey.frames += 1;
    }
    Ok(survey)
}

/// The file's channels → hub channels, from `--map OLD=NEW` and
/// canplayer's `OUT=IN` assignments.
fn parse_map(args: &ReplayArgs, channels: &[String]) -> anyhow::Result<HashMap<String, String>> {
    let mut map = HashMap::new();
    let given = args.map.iter().map(|entry| (format!("--map {entry}"), entry.split_once('=')));
    let assigned = args.assignments.iter().map(|entry| (entry.clone(), entry.split_once('=').map(|(o, i)| (i, o))));
    for (entry, pair) in given.chain(assigned) {
        let Some((old, new)) = pair.filter(|(o, n)| !o.is_empty() && !n.is_empty()) else {
            bail!("{entry}: expected --map OLD=NEW (file channel = hub channel) or canplayer's OUT=IN, e.g. --map can0=can1 or can1=can0");
        };
        if !channels.iter().any(|c| c == old) {
            bail!("{entry}: '{}' has no channel '{old}' (it has: {})", args.file().display(), channels.join(", "));
        }
        if map.insert(old.to_owned(), new.to_owned()).is_some() {
            bail!("{entry}: '{old}' is mapped twice");
        }
    }
    Ok(map)
}

pub fn run(mut args: ReplayArgs) -> anyhow::Result<()> {
    if let Some(input) = args.input.take() {
        // `-I FILE can1=can0`: what stood in the file's place is an assignment.
        if let Some(first) = args.file.replace(input) {
            args.assignments.insert(0, first.to_string_lossy().into_owned());
        }
    }
    let survey = survey(&args)?;
    let map = parse_map(&args, &survey.channels)?;
    if survey.frames == 0 {
        // An empty or unreadable trace is a mistake to report, not a
        // replay that succeeded: a script must not go on as if it ran.
        bail!(
            "'{}' holds no frames to replay (expected candump log lines like \
             `(1700000000.000000) can0 123#DEADBEEF`, or a Vector ASC trace)",
            args.file().display()
        );
    }
    let client =
        if args.synchronized { args.hub.connect_synchronized("replay")? } else { args.hub.connect("replay")? };
    let mut ports: HashMap<String, Port> = HashMap::new();
    let mut targets: HashMap<String, (Port, u64)> = HashMap::new();
    // canplayer plays only the assigned channels when there are assignments.
    let played = |channel: &String| args.assignments.is_empty() || map.contains_key(channel);
    for channel in survey.channels.iter().filter(|c| played(c)) {
        let target = map.get(channel).unwrap_or(channel);
        let port = match ports.get(target) {
            Some(port) => port.clone(),
            None => {
                let mut config = args.port.config(ports.len() + 1)?;
                // In bus time the replay stays until its frames come back.
                config.receive_own = args.synchronized;
                let port = client.open_port_with(target, &config).with_context(|| {
                    format!("cannot replay '{channel}' onto hub channel '{target}' (use --map {channel}=OTHER)")
                })?;
                ports.insert(target.clone(), port.clone());
                port
            }
        };
        targets.insert(channel.clone(), (port, 0));
    }

    let sent = if args.synchronized {
        let mut records =
            reader(&args)?.collect::<Result<Vec<_>, _>>().with_context(|| format!("'{}'", args.file().display()))?;
        records.retain(|r| !survey.channels.contains(&r.channel) || played(&r.channel));
        if let Some(record) = records.iter().find(|r| !targets.contains_key(&r.channel)) {
            bail!("'{}' changed while replaying: new channel '{}'", args.file().display(), record.channel);
        }
        let anchor = if args.recorded_bus_time { Anchor::Recorded } else { Anchor::Joined };
        let ports: HashMap<String, Port> = targets.into_iter().map(|(channel, (port, _))| (channel, port)).collect();
        let sent = replay_bus_time::play(&args.hub, &client, &ports, records, anchor, args.loops)?;
        ports
            .into_iter()
            .map(|(channel, port)| (channel.clone(), (port, sent.get(&channel).copied().unwrap_or(0))))
            .collect()
    } else {
        play_wall_clock(&args, &survey, &client, targets)?
    };

    let mut total = 0;
    for channel in survey.channels.iter().filter(|c| played(c)) {
        let (port, sent) = &sent[channel];
        total += sent;
        if port.channel == *channel {
            crate::output::outln!("{channel}: {sent} frames")?;
        } else {
            crate::output::outln!("{channel} -> {}: {sent} frames", port.channel)?;
        }
    }
    crate::output::outln!("replayed {total} frames from {}", args.file().display())
}

/// Play with the recorded timing on the wall clock (or `--fast`); returns
/// each file channel's port and frames sent.
fn play_wall_clock(
    args: &ReplayArgs,
    survey: &Survey,
    client: &fieldhub_client::Client,
    mut targets: HashMap<String, (Port, u64)>,
) -> anyhow::Result<HashMap<String, (Port, u64)>> {
    let mut total = 0u64;
    let gap = Duration::from_millis(args.gap_ms.unwrap_or(0));
    'replay: for _ in 0..args.loops {
        let mut start = None;
        // -s: the skipped gaps so far; each frame is due that much earlier.
        let (mut skipped_ns, mut previous_ns) = (0u64, None);
        for record in reader(args)? {
            let record = record.with_context(|| format!("'{}'", args.file().display()))?;
            let Some((port, sent)) = targets.get_mut(&record.channel) else {
                if survey.channels.contains(&record.channel) {
                    // Not assigned (canplayer's OUT=IN): not played.
                    continue;
                }
                bail!("'{}' changed while replaying: new channel '{}'", args.file().display(), record.channel);
            };
            if let (Some(limit), Some(previous)) = (args.skip_gaps, previous_ns) {
                let gap_ns = record.timestamp_ns.saturating_sub(previous);
                if gap_ns > limit.saturating_mul(1_000_000_000) {
                    skipped_ns += gap_ns;
                }
            }
            previous_ns = Some(record.timestamp_ns);
            if args.fast && !gap.is_zero() && total > 0 {
                std::thread::sleep(gap);
            }
            if let Some(start) = start.filter(|_| !args.fast) {
                let since_first = record.timestamp_ns.saturating_sub(survey.first_timestamp_ns);
                let due = start + Duration::from_nanos(since_first.saturating_sub(skipped_ns));
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
            }
            client
                .send(port, &record.frame)
                .with_context(|| format!("sending {:?} on '{}'", record.frame, port.channel))?;
            *sent += 1;
            total += 1;
            if args.verbose {
                // canplayer -v: "can1 (can0) 123   [4]  DE AD BE EF".
                let line = crate::candump_text::candump_line("", None, &record.frame);
                crate::output::outln!("{} ({}) {}", port.channel, record.channel, &line[4..])?;
            }
            if start.is_none() && !args.fast {
                confirm(client)?;
                start = Some(Instant::now());
            }
            if args.count.is_some_and(|n| total >= n) {
                break 'replay;
            }
        }
    }
    // The hub reports refused frames (CAN FD onto a classic channel…) by the time it answers this.
    confirm(client)?;
    Ok(targets)
}

/// Wait until every frame sent so far is on the bus: the hub's refusals
/// become errors, and a confirmation that does not come in time says so
/// rather than calling the frames refused.
pub(crate) fn confirm(client: &fieldhub_client::Client) -> anyhow::Result<()> {
    match client.flush() {
        Ok(_) => Ok(()),
        Err(fieldhub_client::ClientError::Timeout(waited)) => bail!(
            "the hub did not confirm the replayed frames within {} s: they are queued, not refused (a \
             federated channel's owner far away, a busy timed channel or a lossless receiver that reads slowly \
             holds them); give --timeout SECONDS to wait longer",
            waited.as_secs_f64()
        ),
        Err(e) => Err(e).context("the hub refused a replayed frame"),
    }
}
