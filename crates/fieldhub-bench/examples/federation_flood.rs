//! Run the federation benchmark (`fieldhub_bench::federation`: an owner hub
//! in a network namespace of its own, a relay hub here, a veth pair between)
//! with a given `fieldhub` build, and print the floods' CPU per frame, thread
//! by thread, relayed against one hub's, with the cores the run kept busy
//! and those the machine left idle:
//!
//! `cargo run --release -p fieldhub-bench --example federation_flood -- FIELDHUB [SECONDS]`
//!
//! FIELDHUB is the `fieldhub` binary whose hubs to measure (default
//! SECONDS: 3, as the report's section 8). Needs root; run it under the
//! bench lock.

use fieldhub_bench::federation::{self, FederationRun};
use fieldhub_bench::thread_cpu::ThreadCpu;
use fieldhub_bench::Launcher;

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(exe) = args.next() else {
        eprintln!("federation_flood: usage: federation_flood FIELDHUB [SECONDS]");
        std::process::exit(2)
    };
    let seconds = args.next().map_or(3.0, |s| {
        s.parse().unwrap_or_else(|_| {
            eprintln!("federation_flood: SECONDS must be a number, not {s:?}");
            std::process::exit(2)
        })
    });
    let launcher = Launcher { exe: exe.into(), prefix: Vec::new() };
    let run = FederationRun { samples: 300, seconds };
    let figures = match federation::run(&launcher, &run, &mut |line| eprintln!("{line}")) {
        Ok(figures) => figures,
        Err(e) => {
            eprintln!("federation_flood: {e}");
            std::process::exit(1)
        }
    };
    let (relayed, one) = (&figures.relay_to_owner_rate, &figures.one_hub_rate);
    println!(
        "relay -> owner {:.0} frames/s, one hub {:.0} frames/s: {:.2}x",
        relayed.frames_per_s,
        one.frames_per_s,
        relayed.frames_per_s / one.frames_per_s
    );
    print(&figures.relayed_flood_cpu, "relayed", relayed.seconds);
    print(&figures.one_hub_flood_cpu, "one hub", one.seconds);
    let chained = &figures.chained_rate;
    println!(
        "two hubs chained by a forwarding client {:.0} frames/s: {:.2}x one hub",
        chained.frames_per_s,
        chained.frames_per_s / one.frames_per_s
    );
    print(&figures.chained_flood_cpu, "chained", chained.seconds);
    let sleeps = &figures.relayed_flood_sleeps;
    println!("relayed: sleeps a frame, clients' process {:.3}", sleeps.per_event(sleeps.clients));
    let mut threads: Vec<(&String, &u64)> = sleeps.by_thread.iter().collect();
    threads.sort_by(|a, b| b.1.cmp(a.1));
    for (name, &count) in threads.iter().take(10) {
        println!("  {name:<28}{:9.3} sleeps/frame", sleeps.per_event(count));
    }
}

fn print(cpu: &ThreadCpu, what: &str, seconds: f64) {
    println!(
        "{what}: {} frames in {seconds:.2} s; CPU {:.0} ns a frame (hubs {:.0}, clients' process {:.0}, of it the \
         sender's thread {:.0}); busy cores {:.2}; the machine's idle cores over the window ({:.2} s) {}",
        cpu.events,
        cpu.per_event_ns(cpu.total_ns()),
        cpu.per_event_ns(cpu.hubs_ns()),
        cpu.per_event_ns(cpu.clients_ns),
        cpu.per_event_ns(cpu.caller_ns),
        cpu.busy_cores(seconds),
        cpu.wall_s,
        cpu.idle_cores.map_or("unknown".into(), |c| format!("{c:.2}")),
    );
    let mut threads: Vec<(&String, &u64)> = cpu.by_thread.iter().collect();
    threads.sort_by(|a, b| b.1.cmp(a.1));
    for (name, &ns) in threads {
        let per_frame = cpu.per_event_ns(ns);
        if per_frame >= 1.0 {
            println!("  {name:<28}{per_frame:9.0} ns/frame");
        }
    }
}
