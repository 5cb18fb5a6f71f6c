"""What the hub's CPU per frame goes to at 500 kbit/s, from two perf
recordings that bench/profile_500kbit.sh makes:

- `perf script -F tid,ip,sym` of cpu-clock samples with call chains: each
  sample goes to one category by its chain (the leaf says where, the
  callers why: a futex wake from the delivery's Bell::ring, the bus
  thread's own sleep, the adaptive spin, the bus's own work);
- `perf script -F comm,tid,cpu,time,event,trace` of every sched_wakeup and
  sched_switch on the machine: who woke whom and how each thread was
  switched out (S: it slept; R: it was preempted), per frame sent.

Run: python3 bench/profile_hub.py CPU_SCRIPT SCHED_SCRIPT BUS_TID FRAMES_PER_S CPU_SECONDS BENCH_COMM
(BENCH_COMM: the benchmark's thread name, the first 15 bytes of the
executable's name: its sender and its receivers carry it)
"""
import collections
import re
import sys

PREEMPTED = "preempted by the receiver it just woke (switched out right after its futex wake)"
WAKE = "futex wake of a receiver (the system call)"
SLEEP = "its own sleep and wake-up (futex wait, switched out and back in)"
SPIN = "spinning before it sleeps (the adaptive wait)"
BUS = "the bus's own work (take the frame, decode, serve the channel)"
DELIVERY = "delivery into the receivers' rings (user side)"
KERNEL = "other kernel work (interrupts, timers)"
OTHER = "other"


def samples(lines):
    """(tid, [leaf, caller, ...]) per sample of `perf script -F tid,ip,sym`."""
    current = None
    for line in lines:
        if not line.strip():
            if current:
                yield current
            current = None
        elif not line.startswith(("\t", " " * 8)) or current is None:
            current = (line.split()[0], [])
        else:
            parts = line.strip().split(None, 1)
            current[1].append(parts[1] if len(parts) > 1 else "?")
    if current:
        yield current


def category(chain):
    """What a sample of the bus thread was spent on, by its call chain."""
    text = " | ".join(chain)
    in_kernel = "entry_SYSCALL" in text or "do_syscall_64" in text or chain[0].startswith(
        ("finish_task_switch", "_raw_spin", "__schedule", "schedule"))
    if "Bell::ring" in text and in_kernel:
        return PREEMPTED if "exit_to_user_mode_loop" in text else WAKE
    if in_kernel and ("futex_do_wait" in text or "Bell::sleep" in text):
        return SLEEP
    if "bell::spin" in text or "ring_ready" in text or "Intake>::ready" in text:
        return SPIN
    if in_kernel or chain[0].startswith(("asm_", "irq", "sysvec", "__sysvec")):
        return KERNEL
    if "OutboxSink>::flush" in text or "ShmLink" in text or "Bell::ring" in text:
        return DELIVERY
    if "fieldhub_bus" in text or "fieldhub_proto" in text:
        return BUS
    return OTHER


EVENT = re.compile(r"\s*(.+?)\s+(\d+) \[(\d+)\]\s+([\d.]+): (sched:\w+): (.*)")


def waker(comm, bench_comm):
    """Who woke a thread: one of the hub's or the benchmark's threads, or an
    interrupt that came while something else ran (a timer's expiry)."""
    if comm == bench_comm:
        return "the benchmark's threads (the sender)"
    if comm.startswith("fh-"):
        return comm
    return "an interrupt (a timer)"


def wake_ups(lines, bus_tid, bench_comm):
    """Counts over a sched trace: (who woke the bus thread, whom it woke, how
    it was switched out) and the trace's length in seconds."""
    woke_bus, bus_woke, bus_out = collections.Counter(), collections.Counter(), collections.Counter()
    first = last = None
    for line in lines:
        m = EVENT.match(line)
        if not m:
            continue
        comm, tid, _cpu, at, event, trace = m.groups()
        first = float(at) if first is None else first
        last = float(at)
        if event == "sched:sched_wakeup":
            target = re.search(r" pid=(\d+)", trace).group(1)
            if target == bus_tid:
                woke_bus[waker(comm, bench_comm)] += 1
            if tid == bus_tid:
                bus_woke[re.search(r"comm=(.*?) pid=", trace).group(1)] += 1
        elif event == "sched:sched_switch" and re.search(r"prev_pid=(\d+)", trace).group(1) == bus_tid:
            bus_out[re.search(r"prev_state=(\S+)", trace).group(1)] += 1
    return woke_bus, bus_woke, bus_out, (last - first if first is not None else 0.0)


def main(cpu_script, sched_script, bus_tid, frames_per_s, cpu_seconds, bench_comm):
    with open(cpu_script) as f:
        by = collections.Counter(category(chain) for _tid, chain in samples(f))
    total = sum(by.values())
    print(f"{total} samples of the hub in {cpu_seconds:.0f} s")
    for what, n in by.most_common():
        print(f"  {100 * n / total:5.1f} %  {what}")
    with open(sched_script) as f:
        woke_bus, bus_woke, bus_out, seconds = wake_ups(f, bus_tid, bench_comm)
    frames = frames_per_s * seconds
    print(f"wake-ups per frame ({frames:.0f} frames in {seconds:.2f} s of trace)")
    for title, counts in [("the bus thread woken by", woke_bus), ("the bus thread wakes", bus_woke),
                          ("the bus thread switched out (S slept, R preempted)", bus_out)]:
        print(f"  {title}: " + ", ".join(f"{k} {v / frames:.3f}" for k, v in counts.most_common(5)))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5]), sys.argv[6])
