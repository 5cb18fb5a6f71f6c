//! `fieldhub bench report`: the whole measurement methodology in one run,
//! against hub processes it starts itself (and, optionally, a hub someone
//! else runs), written as a self-contained HTML page with inline plots and
//! as JSON and Markdown carrying the same figures.
//!
//! One module per section, each measuring (or reusing the benchmark that
//! does) and turning its figures into a [`Section`]:
//! 1. `round_trips`: round-trip distributions over shm, unix, tcp (and a
//!    remote path) against the raw primitive of each, with their shape.
//! 2. `throughput_series`: throughput second by second.
//! 3. `cpu_load`: CPU of hub and clients, idle and at 500 kbit/s.
//! 4. `call_times`: time inside `send` and `recv`.
//! 5. `footprint`: min/avg/max and memory as ring slots grow.
//! 6. `jitter`: periodic senders and the control-loop classes served.
//! 7. `bus_timing`: a timed channel against the closed-form bus
//!    [`model`]s.
//! 8. `paths`: every path of issue 35's table against its peer or raw
//!    baseline of the same run, its target and the measured floor
//!    (`path_rows` makes the rows).
//! 9. `machine`: where it ran, and how quiet the machine was.
//!
//! `html` and `markdown` render the [`document`]; `figure` draws the
//! plots; `progress` is the bar on stderr.

mod bus_timing;
mod call_times;
mod cpu_load;
pub mod document;
mod figure;
mod flood_cpu;
mod footprint;
mod html;
mod jitter;
mod machine;
mod markdown;
pub mod model;
mod path_rows;
mod paths;
mod progress;
mod round_trips;
mod throughput_series;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

pub use document::{Cell, Figure, Section, Table};

use crate::{BenchError, Launcher, Progress};

/// What to run.
#[derive(Clone, Debug)]
pub struct ReportRun {
    /// Small samples and short windows: under a minute, for checking the
    /// report, not for figures.
    pub quick: bool,
    /// A hub someone else runs, measured as one more round-trip path.
    pub remote: Option<RemotePath>,
}

/// A hub the report does not start: probe and echo both connect to it.
#[derive(Clone, Debug)]
pub struct RemotePath {
    pub url: String,
    pub channel: String,
    pub token: Option<String>,
}

/// Why a report could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Bench(#[from] BenchError),
    #[error("remote path {url}: {source}")]
    Remote { url: String, source: BenchError },
    #[error("cannot draw the plot '{figure}': {message}")]
    Plot { figure: String, message: String },
    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
    #[error("cannot encode the JSON report: {0}")]
    Json(#[from] serde_json::Error),
}

/// Sample counts and windows of one run.
pub(crate) struct Plan {
    pub round_trip_samples: usize,
    pub throughput_seconds: f64,
    pub cpu_seconds: f64,
    pub call_samples: usize,
    /// Idle shm clients on the channel while the footprint is measured.
    pub footprint_clients: usize,
    /// Their to-client ring sizes, one point each (`[hub] shm_ring_slots`).
    pub footprint_rings: Vec<u32>,
    pub footprint_samples: usize,
    pub jitter_window: Duration,
    pub timed_samples: usize,
    /// How long the machine is watched before the run.
    pub quiet_window: Duration,
}

impl Plan {
    fn of(quick: bool) -> Self {
        if quick {
            Self {
                round_trip_samples: 2_000,
                throughput_seconds: 1.0,
                cpu_seconds: 0.5,
                call_samples: 1_000,
                footprint_clients: 4,
                footprint_rings: vec![4_096, 32_768],
                footprint_samples: 300,
                jitter_window: Duration::from_millis(400),
                timed_samples: 300,
                quiet_window: Duration::from_millis(300),
            }
        } else {
            Self {
                round_trip_samples: 100_000,
                throughput_seconds: 60.0,
                cpu_seconds: 10.0,
                call_samples: 20_000,
                footprint_clients: 8,
                footprint_rings: vec![4_096, 32_768, 131_072],
                footprint_samples: 5_000,
                jitter_window: Duration::from_secs(10),
                timed_samples: 10_000,
                quiet_window: Duration::from_secs(2),
            }
        }
    }
}

/// The finished report.
#[derive(Debug, Serialize)]
pub struct Report {
    pub title: String,
    /// One line: when, how long, quick or full.
    pub summary: String,
    pub quick: bool,
    pub generated_unix_s: u64,
    pub duration_s: f64,
    pub sections: Vec<Section>,
}

/// Sections, in the order they run.
const SECTIONS: usize = 9;

/// Run every section.
pub fn run(launcher: &Launcher, spec: &ReportRun, progress: Progress<'_>) -> Result<Report, ReportError> {
    let plan = Plan::of(spec.quick);
    let started = std::time::Instant::now();
    let mut stages = progress::Stages::new(progress, SECTIONS);
    stages.report("watching the machine");
    let watch = machine::LoadWatch::start(plan.quiet_window);
    stages.begin("round trips");
    let round_trips = round_trips::measure(launcher, &plan, spec.remote.as_ref(), &mut stages)?;
    watch.sample();
    stages.begin("throughput");
    let throughput = throughput_series::measure(launcher, &plan, &mut stages)?;
    watch.sample();
    stages.begin("CPU");
    let cpu = cpu_load::measure(launcher, &plan, &mut stages)?;
    watch.sample();
    stages.begin("call times");
    let calls = call_times::measure(launcher, &plan, &mut stages)?;
    watch.sample();
    stages.begin("footprint");
    let footprint = footprint::measure(launcher, &plan, &mut stages)?;
    watch.sample();
    stages.begin("jitter");
    let jitter = jitter::measure(launcher, &plan, &mut stages)?;
    watch.sample();
    stages.begin("models");
    let models = bus_timing::measure(launcher, &plan, &mut stages)?;
    watch.sample();
    stages.begin("paths");
    let paths = paths::measure(launcher, &plan, &mut stages)?;
    let machine = watch.finish();
    stages.done();
    let sections = vec![
        round_trips::section(&round_trips)?,
        throughput_series::section(&throughput)?,
        cpu_load::section(&cpu)?,
        call_times::section(&calls)?,
        footprint::section(&footprint)?,
        jitter::section(&jitter)?,
        bus_timing::section(&models)?,
        paths::section(&paths)?,
        machine::section(&machine)?,
    ];
    let generated_unix_s = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let duration_s = started.elapsed().as_secs_f64();
    let kind =
        if spec.quick { "quick run (small samples: checks the report, not figures to quote)" } else { "full run" };
    Ok(Report {
        title: "fieldhub measurement report".into(),
        summary: format!(
            "A {kind} of fieldhub {} on {}, taken in {duration_s:.0} s (generated at Unix time {generated_unix_s} s). \
             Every hub figure comes with the raw primitive measured in the same run.",
            env!("CARGO_PKG_VERSION"),
            machine.cpu_model
        ),
        quick: spec.quick,
        generated_unix_s,
        duration_s,
        sections,
    })
}

/// Write `report.html`, `report.json`, `report.md` and one SVG per figure
/// into `dir` (created if missing); the paths written.
pub fn write(report: &Report, dir: &Path) -> Result<Vec<PathBuf>, ReportError> {
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|source| ReportError::Write { path: path.clone(), source })?;
        Ok::<_, ReportError>(path)
    };
    std::fs::create_dir_all(dir).map_err(|source| ReportError::Write { path: dir.to_owned(), source })?;
    let mut written = vec![
        write("report.html", &html::render(report))?,
        write("report.json", &serde_json::to_string_pretty(report)?)?,
        write("report.md", &markdown::render(report))?,
    ];
    for figure in report.sections.iter().flat_map(|s| &s.figures) {
        written.push(write(&figure.file, &figure.svg)?);
    }
    Ok(written)
}
