//! Section 9: the machine the report ran on — CPU model, cores, kernel,
//! virtualisation — and how quiet it was: the share of CPU time the machine
//! spent busy while the report watched it before starting, the share other
//! work took while it ran (the machine's busy time less the report's own and
//! its reaped children's: hubs and raw peers), and the load average before,
//! during and after. A machine that was not quiet gets a warning: its
//! figures measure the neighbours too.

use std::cell::RefCell;
use std::time::Duration;

use serde::Serialize;

use super::document::{Cell, Section, Table};
use super::ReportError;

/// A machine counts as quiet when, before the run and (other work) during
/// it, less than this share of its CPU time was busy...
const QUIET_BUSY: f64 = 0.15;
/// ... and its one-minute load average was below this per logical CPU.
const QUIET_LOAD_PER_CPU: f64 = 0.5;

#[derive(Debug, Serialize)]
pub struct Machine {
    pub cpu_model: String,
    pub logical_cpus: usize,
    /// Physical cores per socket, as /proc/cpuinfo says (`cpu cores`).
    pub cores: Option<usize>,
    pub kernel: String,
    pub virtualisation: String,
    pub busy_before_percent: f64,
    /// CPU time other processes took during the run, percent of the machine.
    pub others_busy_during_percent: f64,
    pub load_before: f64,
    pub load_max_during: f64,
    pub load_after: f64,
    pub quiet: bool,
}

/// Watches the machine from before the run to its end.
pub struct LoadWatch {
    busy_before: f64,
    load_before: f64,
    load_max: RefCell<f64>,
    /// Machine busy and total jiffies and the report's own CPU ticks when the run began.
    at_start: Option<(u64, u64, u64)>,
}

impl LoadWatch {
    /// Watch the machine for `window` before anything runs.
    pub fn start(window: Duration) -> Self {
        let first = cpu_times();
        std::thread::sleep(window);
        let busy_before = match (first, cpu_times()) {
            (Some((busy0, total0)), Some((busy1, total1))) if total1 > total0 => {
                (busy1 - busy0) as f64 / (total1 - total0) as f64
            }
            _ => 0.0,
        };
        let load_before = load_average();
        let at_start = cpu_times().zip(own_ticks()).map(|((busy, total), own)| (busy, total, own));
        Self { busy_before, load_before, load_max: RefCell::new(load_before), at_start }
    }

    /// Note the load average between two sections.
    pub fn sample(&self) {
        let mut max = self.load_max.borrow_mut();
        *max = max.max(load_average());
    }

    pub fn finish(self) -> Machine {
        self.sample();
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let field = |name: &str| {
            cpuinfo
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        };
        let logical_cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let load_before = self.load_before;
        let others_busy_during = match (self.at_start, cpu_times(), own_ticks()) {
            (Some((busy0, total0, own0)), Some((busy1, total1)), Some(own1)) if total1 > total0 => {
                let others = (busy1 - busy0).saturating_sub(own1.saturating_sub(own0));
                others as f64 / (total1 - total0) as f64
            }
            _ => 0.0,
        };
        Machine {
            cpu_model: field("model name").unwrap_or_else(|| "unknown CPU".into()),
            logical_cpus,
            cores: field("cpu cores").and_then(|c| c.parse().ok()),
            kernel: read_trimmed("/proc/sys/kernel/osrelease").unwrap_or_else(|| "unknown".into()),
            virtualisation: virtualisation(&cpuinfo),
            busy_before_percent: self.busy_before * 100.0,
            others_busy_during_percent: others_busy_during * 100.0,
            load_before,
            load_max_during: *self.load_max.borrow(),
            load_after: load_average(),
            quiet: self.busy_before < QUIET_BUSY
                && others_busy_during < QUIET_BUSY
                && load_before < QUIET_LOAD_PER_CPU * logical_cpus as f64,
        }
    }
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_owned()).filter(|s| !s.is_empty())
}

/// `systemd-detect-virt` where installed; else the CPU's hypervisor flag
/// and the DMI vendor and product.
fn virtualisation(cpuinfo: &str) -> String {
    let detected = std::process::Command::new("systemd-detect-virt")
        .output()
        .ok()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .filter(|s| !s.is_empty());
    let flagged = cpuinfo.lines().any(|l| l.starts_with("flags") && l.split_whitespace().any(|f| f == "hypervisor"));
    let dmi: Vec<String> = ["/sys/class/dmi/id/sys_vendor", "/sys/class/dmi/id/product_name"]
        .iter()
        .filter_map(|p| read_trimmed(p))
        .collect();
    let mut parts = Vec::new();
    if let Some(detected) = detected {
        parts.push(format!("systemd-detect-virt: {detected}"));
    }
    parts.push(if flagged { "CPU hypervisor flag set".into() } else { "no CPU hypervisor flag".into() });
    if !dmi.is_empty() {
        parts.push(format!("DMI: {}", dmi.join(" ")));
    }
    parts.join("; ")
}

/// Busy and total jiffies of all CPUs, from the first line of /proc/stat.
fn cpu_times() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let fields: Vec<u64> = stat.lines().next()?.split_whitespace().skip(1).filter_map(|f| f.parse().ok()).collect();
    let total: u64 = fields.iter().take(8).sum();
    // idle and iowait are fields 4 and 5.
    let idle = fields.get(3).copied().unwrap_or(0) + fields.get(4).copied().unwrap_or(0);
    Some((total.saturating_sub(idle), total))
}

/// CPU ticks of this process and its reaped children (utime, stime,
/// cutime, cstime of /proc/self/stat), in the jiffies /proc/stat counts.
fn own_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let fields: Vec<u64> =
        stat.rsplit_once(')')?.1.split_whitespace().skip(11).take(4).filter_map(|f| f.parse().ok()).collect();
    (fields.len() == 4).then(|| fields.iter().sum())
}

fn load_average() -> f64 {
    read_trimmed("/proc/loadavg").and_then(|l| l.split_whitespace().next()?.parse().ok()).unwrap_or(0.0)
}

pub fn section(machine: &Machine) -> Result<Section, ReportError> {
    let mut table = Table::new("The machine", &["property", "value"]);
    let text = |name: &str, value: &str| vec![Cell::text(name), Cell::text(value)];
    table.rows.push(text("CPU model", &machine.cpu_model));
    table.rows.push(vec![Cell::text("logical CPUs"), Cell::of(machine.logical_cpus as f64, "CPUs")]);
    if let Some(cores) = machine.cores {
        table.rows.push(vec![Cell::text("cores per socket"), Cell::of(cores as f64, "cores")]);
    }
    table.rows.push(text("kernel", &machine.kernel));
    table.rows.push(text("virtualisation", &machine.virtualisation));
    table.rows.push(vec![Cell::text("CPU busy before the run"), Cell::of(machine.busy_before_percent, "%")]);
    table.rows.push(vec![
        Cell::text("CPU taken by other work during the run"),
        Cell::of(machine.others_busy_during_percent, "%"),
    ]);
    for (name, value) in [
        ("load average (1 min) before", machine.load_before),
        ("load average (1 min), highest during", machine.load_max_during),
        ("load average (1 min) after", machine.load_after),
    ] {
        table.rows.push(vec![Cell::text(name), Cell::of(value, "runnable tasks")]);
    }
    let mut notes = vec![
        "The benchmark itself keeps cores busy, so the load average during the run is high by design; the CPU time \
         other processes took before and during the run tells whether the machine was quiet."
            .to_owned(),
    ];
    if !machine.quiet {
        notes.push(format!(
            "Warning: the machine was not quiet — {:.0} % of its CPU time was busy before the run, other work took {:.0} % \
             of it during the run, and the load average was {:.2} on {} logical CPUs before it. Other work competed for \
             the cores: the tails (p99, p99.9, max) and the jitter measure that competition too. Repeat the report on a \
             quiet machine before quoting figures.",
            machine.busy_before_percent,
            machine.others_busy_during_percent,
            machine.load_before,
            machine.logical_cpus
        ));
    }
    Ok(Section {
        id: "machine",
        title: "9. The machine".into(),
        method:
            "CPU model and cores from /proc/cpuinfo, the kernel release, virtualisation (systemd-detect-virt where \
                 installed, the CPU's hypervisor flag, DMI vendor and product), the share of CPU time busy while the \
                 report watched the machine before starting, and the load average before, during and after the run."
                .into(),
        notes,
        tables: vec![table],
        figures: Vec::new(),
        data: serde_json::to_value(machine)?,
    })
}
