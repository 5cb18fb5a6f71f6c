//! `fieldhub record`: write channels' traffic to a candump log, Vector ASC or Vector BLF file.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use fieldhub_client::PortConfig;
use fieldhub_log::{Direction, Format, Recorder, RecorderOptions};
use signal_hook::consts::{SIGINT, SIGTERM};

use crate::{HubSelect, PortSelect};

/// How often an idle recorder looks for a stop signal.
const STOP_CHECK: Duration = Duration::from_millis(100);

#[derive(clap::Args)]
pub struct RecordArgs {
    #[command(flatten)]
    hub: HubSelect,
    /// File format [default: from the extension of -o (.log → candump, .asc → asc, .blf → blf); candump on stdout].
    #[arg(short = 'f', long = "format", value_name = "candump|asc|blf")]
    format: Option<Format>,
    /// Write to this file instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// Stop after this many frames (default: until Ctrl-C / SIGTERM).
    #[arg(short = 'n', value_name = "COUNT")]
    count: Option<u64>,
    /// candump format: append R (received) to each line, as newer candump and python-can do.
    #[arg(long = "direction")]
    mark_direction: bool,
    #[command(flatten)]
    port: PortSelect,
    /// Channels to record; in ASC and BLF they become channels 1, 2, … in this order.
    #[arg(required = true, value_name = "CHANNEL")]
    channels: Vec<String>,
}

fn format_for(args: &RecordArgs) -> anyhow::Result<Format> {
    if let Some(format) = args.format {
        return Ok(format);
    }
    match &args.output {
        None => Ok(Format::Candump),
        Some(path) => match Format::from_path(path) {
            Some(format) => Ok(format),
            None => bail!(
                "cannot tell the log format from '{}': name it .log, .asc or .blf, or pass -f candump|asc|blf",
                path.display()
            ),
        },
    }
}

pub fn run(args: RecordArgs) -> anyhow::Result<()> {
    let format = format_for(&args)?;
    if format == Format::Blf && args.output.is_none() {
        bail!("BLF is binary and its header is rewritten at the end: give a file with -o FILE.blf");
    }
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [SIGINT, SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop)).context("cannot install signal handlers")?;
    }
    let client = args.hub.connect("record")?;
    // Holding the bus rather than dropping keeps the recording complete
    // when the file is slower than the traffic.
    let config = PortConfig { block_on_overflow: true, ..args.port.config(args.channels.len())? };
    let mut channels = HashMap::new();
    for channel in &args.channels {
        let port = client.open_port_with(channel, &config).with_context(|| format!("cannot record '{channel}'"))?;
        channels.insert(port.handle, (channel.clone(), 0u64));
    }
    let (out, destination) = match &args.output {
        Some(path) => {
            let file = File::create(path).with_context(|| format!("cannot create '{}'", path.display()))?;
            (Output::File(file), path.display().to_string())
        }
        None => (Output::Stdout(std::io::stdout()), "stdout".into()),
    };
    let options = RecorderOptions {
        channels: args.channels.clone(),
        mark_direction: args.mark_direction,
        start_ns: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64),
        ..Default::default()
    };
    let mut recorder = Recorder::new(BufWriter::new(out), format, &options);
    eprintln!("recording {} to {destination} ({format})", args.channels.join(", "));

    // A BLF flush writes a container: only after a pause, not after every frame of sparse traffic.
    let flush_at_once = format != Format::Blf;
    let written = record(&client, &mut recorder, &mut channels, args.count, flush_at_once, &stop);
    let frames = recorder.frames();
    // A file's BLF header is rewritten with its statistics.
    let finished = match args.output {
        Some(_) => recorder.finish_file().map(drop),
        None => recorder.finish().map(drop),
    };
    let finished = finished.map_err(anyhow::Error::from);
    if let Err(e) = written.and(finished) {
        // A closed pipe (`| head`) ends a recording to stdout, as for dump.
        if args.output.is_none() && is_broken_pipe(&e) {
            return Err(crate::output::StdoutClosed.into());
        }
        return Err(e).with_context(|| format!("writing {destination}"));
    }
    let mut per_channel: Vec<_> = channels.into_values().collect();
    per_channel.sort();
    let summary: Vec<String> = per_channel.iter().map(|(name, n)| format!("{name}: {n}")).collect();
    eprintln!("recorded {frames} frames ({}) to {destination}", summary.join(", "));
    Ok(())
}

/// Where a recording goes: a file (which BLF seeks back in) or stdout.
enum Output {
    File(File),
    Stdout(std::io::Stdout),
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Self::File(file) => file.write(buf),
            Self::Stdout(stdout) => stdout.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Self::File(file) => file.flush(),
            Self::Stdout(stdout) => stdout.flush(),
        }
    }
}

impl Seek for Output {
    fn seek(&mut self, position: SeekFrom) -> std::io::Result<u64> {
        match self {
            Self::File(file) => file.seek(position),
            Self::Stdout(_) => Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "stdout cannot seek")),
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
}

fn record<W: Write>(
    client: &fieldhub_client::Client,
    recorder: &mut Recorder<W>,
    channels: &mut HashMap<u16, (String, u64)>,
    count: Option<u64>,
    flush_at_once: bool,
    stop: &AtomicBool,
) -> anyhow::Result<()> {
    while count.is_none_or(|n| recorder.frames() < n) && !stop.load(Ordering::Relaxed) {
        let received = match client.try_recv()? {
            Some(r) => r,
            None => {
                // Idle: make what we have visible, then wait a little for more.
                if flush_at_once {
                    recorder.flush()?;
                }
                match client.recv(Some(STOP_CHECK))? {
                    Some(r) => r,
                    None => {
                        recorder.flush()?;
                        continue;
                    }
                }
            }
        };
        let Some((channel, frames)) = channels.get_mut(&received.port) else { continue };
        let direction = if received.frame.is_echo() { Direction::Tx } else { Direction::Rx };
        recorder.record(received.meta.timestamp_ns, channel, &received.frame.with_echo(false), direction)?;
        *frames += 1;
    }
    Ok(())
}
