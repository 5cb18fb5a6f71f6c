//! `fieldhub dump -l` / `-f FILE`: the candump log file, as candump writes
//! it — `candump-YYYY-MM-DD_HHMMSS.log` (local time) in the current
//! directory unless named, announced on stderr, one log line per frame.
//!
//! Invariant: Ctrl-C or SIGTERM while logging ends the dump after the
//! file is complete (as `fieldhub record` does; a second one ends it at
//! once), so a log is never cut in the middle of a line.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Context;
use signal_hook::consts::{SIGINT, SIGTERM};

/// The open log file.
pub struct LogFile {
    path: PathBuf,
    out: BufWriter<File>,
    stop: Arc<AtomicBool>,
    handlers: Vec<signal_hook::SigId>,
}

impl LogFile {
    /// Create (or truncate, as candump's `fopen(…, "w")`) the log at `path`,
    /// saying so on stderr as candump does; `silent` is the dump's `-s`.
    pub fn create(path: PathBuf, silent: u8) -> anyhow::Result<Self> {
        if silent != 2 {
            eprintln!("Warning: Console output active while logging!");
        }
        eprintln!("Enabling Logfile '{}'", path.display());
        let file = File::create(&path).with_context(|| format!("cannot create the log file '{}'", path.display()))?;
        let stop = Arc::new(AtomicBool::new(false));
        let mut handlers = Vec::new();
        for signal in [SIGINT, SIGTERM] {
            // The second signal ends the dump at once (status 1).
            handlers.push(
                signal_hook::flag::register_conditional_shutdown(signal, 1, Arc::clone(&stop))
                    .context("cannot install signal handlers")?,
            );
            handlers.push(
                signal_hook::flag::register(signal, Arc::clone(&stop)).context("cannot install signal handlers")?,
            );
        }
        Ok(Self { path, out: BufWriter::new(file), stop, handlers })
    }

    /// Whether Ctrl-C or SIGTERM asked the dump to end.
    pub fn interrupted(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Append one line.
    pub fn line(&mut self, line: &str) -> anyhow::Result<()> {
        writeln!(self.out, "{line}").with_context(|| format!("cannot write the log file '{}'", self.path.display()))
    }

    /// Make what is written visible in the file (while the dump is idle).
    pub fn flush(&mut self) -> anyhow::Result<()> {
        self.out.flush().with_context(|| format!("cannot write the log file '{}'", self.path.display()))
    }

    /// Write the rest and close the file.
    pub fn finish(mut self) -> anyhow::Result<()> {
        self.flush()
    }
}

impl Drop for LogFile {
    fn drop(&mut self) {
        for id in self.handlers.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}
