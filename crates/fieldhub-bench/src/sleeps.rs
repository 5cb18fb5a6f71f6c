//! The sleeps a run's threads actually took: the kernel's count of
//! voluntary context switches (a thread blocked — on a futex, a timer, a
//! socket — and was woken again later), read before and after a window. A
//! floor built on them counts what happened in the run, not a model of it:
//! a reader that spun through the gap between two frames took no sleep and
//! cost no wake-up; one that slept took one.
//!
//! Where the counts come from: for the hub processes, each thread's
//! `voluntary_ctxt_switches` in `/proc/PID/task/TID/status`, split by the
//! thread's name into the bus thread (`fh-bus`) and the others; for this
//! process (where the benchmark's clients and applications run),
//! `getrusage(RUSAGE_SELF)`, which keeps the count of threads that ended
//! inside the window (their `/proc` files go with them).
//!
//! Invariant: a count is the difference of two kernel readings of the same
//! threads; a thread that began inside the window counts from zero, a hub
//! thread that ended inside it is missing — so a count is at most low,
//! never high, and a floor built on it stays a floor.

use std::collections::BTreeMap;

use fieldhub_shm::BUS_THREAD_NAME as BUS_THREAD;
use serde::Serialize;

use crate::BenchError;

/// Sleeps counted over a window, and the events (round trips, frames) it held.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Sleeps {
    /// Round trips or frames the window held.
    pub events: u64,
    /// The hubs' bus threads.
    pub hub_bus: u64,
    /// The hubs' other threads (sessions, reactor, federation links).
    pub hub_other: u64,
    /// The benchmark's process: every client's threads and the
    /// applications' (probe, echo, readers, the paced sender).
    pub clients: u64,
    /// The hubs' threads that slept, by hub and thread name ("relay
    /// fh-bus"): which hops a window's events crossed.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub by_thread: BTreeMap<String, u64>,
}

impl Sleeps {
    /// The hubs' sleeps, all threads.
    pub fn hub(&self) -> u64 {
        self.hub_bus + self.hub_other
    }

    /// Every process of the run.
    pub fn total(&self) -> u64 {
        self.hub() + self.clients
    }

    /// Sleeps per event by whom: the hubs' bus threads, their other threads,
    /// the clients' process.
    pub fn per_event_by_whom(&self) -> [f64; 3] {
        [self.hub_bus, self.hub_other, self.clients].map(|sleeps| self.per_event(sleeps))
    }

    /// `sleeps` per event of the window (0 for a window without events).
    pub fn per_event(&self, sleeps: u64) -> f64 {
        if self.events == 0 {
            0.0
        } else {
            sleeps as f64 / self.events as f64
        }
    }
}

/// The counts at the start of a window.
pub struct SleepWindow {
    hubs: Vec<(&'static str, u32)>,
    hub_threads: BTreeMap<(u32, u32), ThreadSleeps>,
    own: u64,
}

/// One thread's name and count.
#[derive(Clone, Debug, PartialEq)]
struct ThreadSleeps {
    name: String,
    voluntary: u64,
}

impl SleepWindow {
    /// Start counting the sleeps of the hub processes `hubs` (each named,
    /// "relay", "owner": how its threads are listed) and of this one.
    pub fn open(hubs: &[(&'static str, u32)]) -> Result<Self, BenchError> {
        let pids: Vec<u32> = hubs.iter().map(|&(_, pid)| pid).collect();
        Ok(Self { hubs: hubs.to_vec(), hub_threads: hub_threads(&pids)?, own: own_voluntary_switches()? })
    }

    /// The sleeps since [`SleepWindow::open`], over `events` events.
    pub fn close(self, events: u64) -> Result<Sleeps, BenchError> {
        let own = own_voluntary_switches()?;
        let pids: Vec<u32> = self.hubs.iter().map(|&(_, pid)| pid).collect();
        let now = hub_threads(&pids)?;
        let (mut hub_bus, mut hub_other, mut by_thread) = (0, 0, BTreeMap::new());
        for (key, thread) in &now {
            // A thread born in the window counts from zero.
            let before = self.hub_threads.get(key).map_or(0, |t| t.voluntary);
            let slept = thread.voluntary.saturating_sub(before);
            if thread.name == BUS_THREAD {
                hub_bus += slept;
            } else {
                hub_other += slept;
            }
            let hub = self.hubs.iter().find(|&&(_, pid)| pid == key.0).map_or("hub", |&(name, _)| name);
            if slept > 0 {
                *by_thread.entry(format!("{hub} {}", thread.name)).or_insert(0) += slept;
            }
        }
        Ok(Sleeps { events, hub_bus, hub_other, clients: own.saturating_sub(self.own), by_thread })
    }
}

/// Every thread of the processes `pids`, keyed by (pid, tid).
fn hub_threads(pids: &[u32]) -> Result<BTreeMap<(u32, u32), ThreadSleeps>, BenchError> {
    let mut threads = BTreeMap::new();
    for (pid, tid, dir) in tasks(pids)? {
        // A thread that ended between the listing and the read has no
        // file any more: it is not counted (a count stays low, not high).
        let Ok(status) = std::fs::read_to_string(dir.join("status")) else {
            continue;
        };
        let thread = parse_status(&status).ok_or_else(|| BenchError::Proc {
            path: format!("{}/status", dir.display()),
            source: std::io::Error::other("no Name or voluntary_ctxt_switches line"),
        })?;
        threads.insert((pid, tid), thread);
    }
    Ok(threads)
}

/// Every thread of the processes `pids` as (pid, tid, its `/proc`
/// directory), as listed now.
pub(crate) fn tasks(pids: &[u32]) -> Result<Vec<(u32, u32, std::path::PathBuf)>, BenchError> {
    let mut tasks = Vec::new();
    for &pid in pids {
        let dir = format!("/proc/{pid}/task");
        let proc_error = |source| BenchError::Proc { path: dir.clone(), source };
        for task in std::fs::read_dir(&dir).map_err(proc_error)? {
            let task = task.map_err(proc_error)?;
            if let Some(tid) = task.file_name().to_str().and_then(|t| t.parse::<u32>().ok()) {
                tasks.push((pid, tid, task.path()));
            }
        }
    }
    Ok(tasks)
}

/// A thread's name and voluntary context switches from its `status` file.
fn parse_status(status: &str) -> Option<ThreadSleeps> {
    let field = |key: &str| status.lines().find_map(|l| l.strip_prefix(key)).map(str::trim);
    Some(ThreadSleeps { name: field("Name:")?.to_owned(), voluntary: field("voluntary_ctxt_switches:")?.parse().ok()? })
}

/// Voluntary context switches of every thread this process has had,
/// those that ended included.
fn own_voluntary_switches() -> Result<u64, BenchError> {
    Ok(u64::try_from(own_usage()?.ru_nvcsw).unwrap_or(0))
}

/// This process's resource use so far, every thread it has had (those
/// that ended included): `getrusage(RUSAGE_SELF)`.
pub(crate) fn own_usage() -> Result<libc::rusage, BenchError> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::uninit();
    // SAFETY: `usage` is a valid, writable rusage the call fills in; it
    // reads no other memory.
    let done = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    if done != 0 {
        return Err(BenchError::Proc {
            path: "getrusage(RUSAGE_SELF)".into(),
            source: std::io::Error::last_os_error(),
        });
    }
    // SAFETY: getrusage returned 0, so it filled `usage` in.
    Ok(unsafe { usage.assume_init() })
}

/// Voluntary context switches of the threads of another process, summed
/// (the threads alive now).
pub(crate) fn process_voluntary_switches(pid: u32) -> Result<u64, BenchError> {
    Ok(hub_threads(&[pid])?.values().map(|t| t.voluntary).sum())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_status_file_gives_the_threads_name_and_voluntary_switches_not_the_involuntary_ones() {
        let status = "Name:\tfh-bus\nUmask:\t0022\nState:\tS (sleeping)\nvoluntary_ctxt_switches:\t4096\n\
                      nonvoluntary_ctxt_switches:\t17\n";
        assert_eq!(parse_status(status), Some(ThreadSleeps { name: "fh-bus".into(), voluntary: 4096 }));
        assert_eq!(parse_status("Name:\tx\n"), None);
    }

    #[test]
    fn sleeps_per_event_divide_by_the_events_of_the_window() {
        let sleeps =
            Sleeps { events: 2_000, hub_bus: 4_000, hub_other: 10, clients: 250_000, by_thread: BTreeMap::new() };
        assert_eq!(sleeps.hub(), 4_010);
        assert_eq!(sleeps.total(), 254_010);
        assert_eq!(sleeps.per_event(sleeps.clients), 125.0);
        assert_eq!(Sleeps { events: 0, ..sleeps }.per_event(5), 0.0);
    }

    #[test]
    fn a_thread_that_sleeps_and_then_ends_inside_the_window_is_counted() {
        let window = SleepWindow::open(&[]).unwrap();
        std::thread::spawn(|| {
            for _ in 0..20 {
                std::thread::sleep(Duration::from_millis(1));
            }
        })
        .join()
        .unwrap();
        let sleeps = window.close(20).unwrap();
        assert!(sleeps.clients >= 20, "20 sleeps of an ended thread, counted {}", sleeps.clients);
        assert_eq!(sleeps.hub(), 0);
    }

    #[test]
    fn a_hub_thread_named_fh_bus_counts_as_the_bus_thread_with_every_sleep_it_took() {
        let (slept, has_slept) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        // This process stands in for a hub: its thread named as the hub's
        // bus thread sleeps 20 times and stays alive until read.
        let window = SleepWindow::open(&[("this", std::process::id())]).unwrap();
        let bus = std::thread::Builder::new()
            .name(BUS_THREAD.into())
            .spawn(move || {
                for _ in 0..20 {
                    std::thread::sleep(Duration::from_millis(1));
                }
                slept.send(()).unwrap();
                let _ = released.recv();
            })
            .unwrap();
        has_slept.recv().unwrap();
        let sleeps = window.close(20).unwrap();
        release.send(()).unwrap();
        bus.join().unwrap();
        assert!(sleeps.hub_bus >= 20, "20 sleeps of the bus thread, counted {}", sleeps.hub_bus);
        assert!(sleeps.clients >= sleeps.hub_bus, "the same sleeps, seen as this process's: {sleeps:?}");
        assert_eq!(sleeps.by_thread.get("this fh-bus"), Some(&sleeps.hub_bus), "listed by hub and name: {sleeps:?}");
    }
}
