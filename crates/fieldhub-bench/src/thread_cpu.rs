//! The CPU a window's threads spent, thread by thread: where a flood's
//! frames cost their time, and whether the machine's cores were full or
//! idle while they went.
//!
//! Where the figures come from:
//! - each thread of the hub processes: the first field of
//!   `/proc/PID/task/TID/schedstat` (ns on a CPU), by hub and thread name
//!   (`comm`), so a relay's and an owner's threads of one name are apart;
//! - this process (where the benchmark's clients and applications run):
//!   `getrusage(RUSAGE_SELF)`, which keeps the CPU of threads that ended
//!   inside the window, and the calling thread's own clock apart from it
//!   (the sender, in a flood that the caller drives);
//! - the machine: `/proc/stat`'s idle and iowait time of every core, so a
//!   window says how much of the cores nobody used — the run's processes or
//!   any other.
//!
//! Invariant: a figure is the difference of two kernel readings; a hub
//! thread that began inside the window counts from zero, one that ended
//! inside it is missing — a hub's CPU is at most low, never high.

use std::collections::BTreeMap;
use std::time::Instant;

use serde::Serialize;

use crate::cpu::thread_cpu_ns;
use crate::sleeps::{own_usage, tasks};
use crate::BenchError;

/// The CPU spent over a window, and the events (frames) it held.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ThreadCpu {
    /// Frames (or other events) the window held.
    pub events: u64,
    /// The window's wall time.
    pub wall_s: f64,
    /// Each hub thread's CPU by hub and thread name ("relay fh-bus"), ns.
    pub by_thread: BTreeMap<String, u64>,
    /// This process's CPU, every thread (ended ones included), ns.
    pub clients_ns: u64,
    /// Of it, the calling thread's, ns.
    pub caller_ns: u64,
    /// The machine's cores' time nobody used (idle, iowait) over the
    /// window, in cores (0 to the core count), when `/proc/stat` could be
    /// read.
    pub idle_cores: Option<f64>,
}

impl ThreadCpu {
    /// The hubs' threads, ns.
    pub fn hubs_ns(&self) -> u64 {
        self.by_thread.values().sum()
    }

    /// Every process of the run, ns.
    pub fn total_ns(&self) -> u64 {
        self.hubs_ns() + self.clients_ns
    }

    /// `ns` per event (0 for a window without events).
    pub fn per_event_ns(&self, ns: u64) -> f64 {
        if self.events == 0 {
            0.0
        } else {
            ns as f64 / self.events as f64
        }
    }

    /// The CPU of one hub's threads whose names start with `prefix`, ns.
    pub fn of(&self, hub: &str, prefix: &str) -> u64 {
        let key = format!("{hub} {prefix}");
        self.by_thread.iter().filter(|(name, _)| name.starts_with(&key)).map(|(_, &ns)| ns).sum()
    }

    /// The cores the run's processes kept busy on average over `seconds`.
    pub fn busy_cores(&self, seconds: f64) -> f64 {
        self.total_ns() as f64 / 1e9 / seconds.max(1e-9)
    }
}

/// Hub threads by (pid, tid): their name and CPU so far (ns).
type Threads = BTreeMap<(u32, u32), (String, u64)>;

/// The readings at the start of a window.
pub struct CpuWindow {
    hubs: Vec<(&'static str, u32)>,
    threads: Threads,
    own_ns: u64,
    caller_ns: u64,
    machine: Option<MachineTimes>,
    started: Instant,
}

impl CpuWindow {
    /// Start reading the CPU of the hub processes `hubs` (each named:
    /// "relay", "owner") and of this process.
    pub fn open(hubs: &[(&'static str, u32)]) -> Result<Self, BenchError> {
        let pids: Vec<u32> = hubs.iter().map(|&(_, pid)| pid).collect();
        Ok(Self {
            hubs: hubs.to_vec(),
            threads: hub_threads(&pids)?,
            own_ns: own_cpu_ns()?,
            caller_ns: thread_cpu_ns(),
            machine: MachineTimes::now(),
            started: Instant::now(),
        })
    }

    /// The CPU since [`CpuWindow::open`], over `events` events.
    pub fn close(self, events: u64) -> Result<ThreadCpu, BenchError> {
        let (caller, own, machine) = (thread_cpu_ns(), own_cpu_ns()?, MachineTimes::now());
        let wall_s = self.started.elapsed().as_secs_f64();
        let pids: Vec<u32> = self.hubs.iter().map(|&(_, pid)| pid).collect();
        let mut by_thread = BTreeMap::new();
        for (key, (name, ns)) in hub_threads(&pids)? {
            let before = self.threads.get(&key).map_or(0, |(_, ns)| *ns);
            let hub = self.hubs.iter().find(|&&(_, pid)| pid == key.0).map_or("hub", |&(name, _)| name);
            let spent = ns.saturating_sub(before);
            if spent > 0 {
                *by_thread.entry(format!("{hub} {name}")).or_insert(0) += spent;
            }
        }
        let idle_cores = match (self.machine, machine) {
            (Some(before), Some(after)) => after.idle_cores_since(&before),
            _ => None,
        };
        Ok(ThreadCpu {
            events,
            wall_s,
            by_thread,
            clients_ns: own.saturating_sub(self.own_ns),
            caller_ns: caller.saturating_sub(self.caller_ns),
            idle_cores,
        })
    }
}

/// Every thread of the processes `pids` with its name and CPU so far (ns).
fn hub_threads(pids: &[u32]) -> Result<Threads, BenchError> {
    let mut threads = BTreeMap::new();
    for (pid, tid, dir) in tasks(pids)? {
        // A thread that ended between the listing and the read is not
        // counted (a figure stays low, not high).
        let (Ok(name), Ok(schedstat)) =
            (std::fs::read_to_string(dir.join("comm")), std::fs::read_to_string(dir.join("schedstat")))
        else {
            continue;
        };
        let ns = parse_schedstat(&schedstat).ok_or_else(|| BenchError::Proc {
            path: format!("{}/schedstat", dir.display()),
            source: std::io::Error::other("no time on the CPU as its first field"),
        })?;
        threads.insert((pid, tid), (name.trim_end().to_owned(), ns));
    }
    Ok(threads)
}

/// The ns a thread ran, the first of `schedstat`'s three fields.
fn parse_schedstat(schedstat: &str) -> Option<u64> {
    schedstat.split_whitespace().next()?.parse().ok()
}

/// This process's CPU so far, every thread it has had (ns).
fn own_cpu_ns() -> Result<u64, BenchError> {
    let usage = own_usage()?;
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    Ok(ns(usage.ru_utime) + ns(usage.ru_stime))
}

/// The machine's cores' time from `/proc/stat`'s `cpu` line, in clock ticks.
#[derive(Clone, Copy, Debug, PartialEq)]
struct MachineTimes {
    idle: u64,
    total: u64,
    cores: usize,
}

impl MachineTimes {
    fn now() -> Option<Self> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        Self::parse(&stat, std::thread::available_parallelism().map_or(1, usize::from))
    }

    /// The `cpu` line's fields: user nice system idle iowait irq softirq steal.
    fn parse(stat: &str, cores: usize) -> Option<Self> {
        let line = stat.lines().find(|l| l.starts_with("cpu "))?;
        let fields: Vec<u64> = line.split_whitespace().skip(1).take(8).map_while(|f| f.parse().ok()).collect();
        if fields.len() < 5 {
            return None;
        }
        Some(Self { idle: fields[3] + fields[4], total: fields.iter().sum(), cores })
    }

    /// The cores nobody used on average since `before`.
    fn idle_cores_since(&self, before: &Self) -> Option<f64> {
        let total = self.total.checked_sub(before.total).filter(|&t| t > 0)?;
        let idle = self.idle.saturating_sub(before.idle);
        Some(idle as f64 / total as f64 * self.cores as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schedstat_line_gives_the_time_on_a_cpu_not_the_time_waiting_for_one() {
        assert_eq!(parse_schedstat("89228306 35513927 269\n"), Some(89_228_306));
        assert_eq!(parse_schedstat(""), None);
    }

    #[test]
    fn the_machines_idle_cores_are_idle_and_iowait_over_every_core_s_time() {
        let before = MachineTimes::parse("cpu  100 0 100 700 100 0 0 0 0 0\ncpu0 1 2 3\n", 2).unwrap();
        let after = MachineTimes::parse("cpu  200 0 200 900 100 0 0 0 0 0\n", 2).unwrap();
        // 400 ticks passed, 200 of them idle: one core of two.
        assert_eq!(after.idle_cores_since(&before), Some(1.0));
        assert_eq!(before.idle_cores_since(&before), None, "no time passed");
    }

    #[test]
    fn a_busy_hub_thread_and_this_process_are_counted_by_name_and_the_caller_apart() {
        let (spun, has_spun) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        // This process stands in for a hub: a thread of its own spins 20 ms
        // and stays alive until read.
        let window = CpuWindow::open(&[("this", std::process::id())]).unwrap();
        let busy = std::thread::Builder::new()
            .name("fh-spin".into())
            .spawn(move || {
                let until = Instant::now() + std::time::Duration::from_millis(20);
                while Instant::now() < until {
                    std::hint::spin_loop();
                }
                spun.send(()).unwrap();
                let _ = released.recv();
            })
            .unwrap();
        has_spun.recv().unwrap();
        let cpu = window.close(4).unwrap();
        release.send(()).unwrap();
        busy.join().unwrap();
        let spin = cpu.of("this", "fh-spin");
        assert!(spin >= 15_000_000, "20 ms of spinning, counted {spin} ns: {cpu:?}");
        assert!(cpu.clients_ns >= spin, "the same CPU, seen as this process's: {cpu:?}");
        assert!(cpu.caller_ns < spin, "the caller waited meanwhile: {cpu:?}");
        assert_eq!(cpu.per_event_ns(spin), spin as f64 / 4.0);
    }
}
