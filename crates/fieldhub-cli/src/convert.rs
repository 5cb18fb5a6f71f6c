//! `fieldhub convert IN OUT`: a log from one format to another — candump
//! log, Vector ASC and BLF, and ASAM MDF4 — like can-utils' `log2asc` / `asc2log`
//! and python-can's `can.logconvert`.
//!
//! Every frame is carried over with its time, channel and direction; a
//! record without a direction (a candump line without ` R`/` T`) is written
//! as received. MDF4 is read and written whole (`fieldhub_log::mdf4`).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use fieldhub_log::mdf4::{self, Mdf4Writer};
use fieldhub_log::{DateZone, Direction, Format, LogFormat, ReadOptions, Record, Recorder, RecorderOptions};

#[derive(clap::Args)]
pub struct ConvertArgs {
    /// The input's format [default: from its extension: .log candump, .asc asc, .blf blf, .mf4 mf4; else its first
    /// bytes].
    #[arg(long = "from", value_name = "candump|asc|blf|mf4")]
    from: Option<LogFormat>,
    /// The output's format [default: from its extension].
    #[arg(long = "to", value_name = "candump|asc|blf|mf4")]
    to: Option<LogFormat>,
    /// candump output: append R or T to each line for the direction (newer candump and python-can read it).
    #[arg(long = "direction")]
    mark_direction: bool,
    /// The log to read.
    #[arg(value_name = "IN")]
    input: PathBuf,
    /// The file to write; - writes candump or ASC text to stdout.
    #[arg(value_name = "OUT")]
    output: PathBuf,
}

pub fn run(args: ConvertArgs) -> anyhow::Result<()> {
    let to = match args.to.or_else(|| LogFormat::from_path(&args.output)) {
        Some(format) => format,
        None if args.output == Path::new("-") => LogFormat::Streamed(Format::Candump),
        None => bail!(
            "cannot tell the output format from '{}': name it .log, .asc, .blf or .mf4, or pass --to candump|asc|blf|mf4",
            args.output.display()
        ),
    };
    let to_stdout = args.output == Path::new("-");
    if to_stdout && to == LogFormat::Mf4 {
        bail!("MDF4 is binary and written whole: give a file name, not -");
    }
    if to_stdout && to == LogFormat::Streamed(Format::Blf) {
        bail!("BLF is binary and its header is rewritten at the end: give a file name, not -");
    }
    let records = read(&args.input, args.from)?;
    let frames = records.len();
    match write(&args, to, records) {
        // A reader that closed the pipe (`convert x.mf4 - | head`) ends the command quietly.
        Err(error) if to_stdout => return Err(crate::output::closed_pipe(error)),
        Err(error) => {
            return Err(anyhow::Error::new(error).context(format!("cannot write '{}'", args.output.display())))
        }
        Ok(()) if to_stdout => {}
        Ok(()) => eprintln!("{frames} frames from {} to {}", args.input.display(), args.output.display()),
    }
    Ok(())
}

fn read(path: &Path, format: Option<LogFormat>) -> anyhow::Result<Vec<Record>> {
    let context = || format!("cannot read '{}'", path.display());
    match format.or_else(|| LogFormat::from_path(path)) {
        Some(LogFormat::Mf4) => {
            let bytes = std::fs::read(path).with_context(context)?;
            Ok(mdf4::read(&bytes, DateZone::Local).with_context(context)?)
        }
        Some(LogFormat::Streamed(format)) => {
            collect(fieldhub_log::open(path, Some(format), &ReadOptions::default()), path)
        }
        None => {
            // Only MDF4 is told here: fieldhub_log::open tells BLF ("LOGG") from text.
            let mut head = [0u8; 8];
            let is_mdf = File::open(path)
                .and_then(|mut file| std::io::Read::read_exact(&mut file, &mut head))
                .is_ok_and(|()| LogFormat::sniff(&head) == LogFormat::Mf4);
            if is_mdf {
                return read(path, Some(LogFormat::Mf4));
            }
            collect(fieldhub_log::open(path, None, &ReadOptions::default()), path)
        }
    }
}

fn collect<R: std::io::BufRead>(
    reader: Result<fieldhub_log::LogReader<R>, fieldhub_log::LogError>,
    path: &Path,
) -> anyhow::Result<Vec<Record>> {
    let context = || format!("cannot read '{}'", path.display());
    reader.with_context(context)?.collect::<Result<Vec<_>, _>>().with_context(context)
}

fn write(args: &ConvertArgs, to: LogFormat, records: Vec<Record>) -> std::io::Result<()> {
    let start_ns = records.first().map_or(0, |r| r.timestamp_ns);
    let format = match to {
        LogFormat::Mf4 => {
            let mut writer = Mdf4Writer::new(BufWriter::new(File::create(&args.output)?), &[], start_ns);
            for r in &records {
                writer.record(r.timestamp_ns, &r.channel, &r.frame, r.direction.unwrap_or(Direction::Rx))?;
            }
            writer.finish()?;
            return Ok(());
        }
        LogFormat::Streamed(format) => format,
    };
    let options = RecorderOptions { mark_direction: args.mark_direction, start_ns, ..Default::default() };
    if args.output == Path::new("-") {
        let out: Box<dyn Write> = Box::new(std::io::stdout().lock());
        record_all(Recorder::new(BufWriter::new(out), format, &options), &records)?.finish()?;
    } else {
        // A file: finish_file rewrites a BLF header with the file's statistics.
        let out = BufWriter::new(File::create(&args.output)?);
        record_all(Recorder::new(out, format, &options), &records)?.finish_file()?;
    }
    Ok(())
}

fn record_all<W: Write>(mut recorder: Recorder<W>, records: &[Record]) -> std::io::Result<Recorder<W>> {
    for r in records {
        recorder.record(r.timestamp_ns, &r.channel, &r.frame, r.direction.unwrap_or(Direction::Rx))?;
    }
    Ok(recorder)
}
