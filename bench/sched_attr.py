"""Set one thread's scheduling the way bench/wakes_500kbit.sh compares them:
an EEVDF custom slice (sched_setattr's sched_runtime for SCHED_OTHER, Linux
>= 6.12, clamped by the kernel to 0.1-100 ms), a nice value, or SCHED_BATCH.
`show` prints what the kernel holds for the thread (policy, nice, slice).

    python3 bench/sched_attr.py TID slice NS | nice N | batch | show

Lowering nice below 0 needs CAP_SYS_NICE (or RLIMIT_NICE); the error says so.
"""
import ctypes
import os
import platform
import struct
import sys

# x86_64 and aarch64 system call numbers; the script is for the bench machine.
SYSCALLS = {"x86_64": (314, 315), "aarch64": (274, 275)}
SCHED_OTHER, SCHED_BATCH = 0, 3
# u32 size, u32 policy, u64 flags, s32 nice, u32 priority, u64 runtime, deadline, period
LAYOUT = "<IIQiIQQQ"
SIZE = struct.calcsize(LAYOUT)


def syscalls():
    machine = platform.machine()
    if machine not in SYSCALLS:
        sys.exit(f"sched_attr.py: no sched_setattr number known for {machine}; add it to SYSCALLS")
    return SYSCALLS[machine]


def get(tid):
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(SIZE)
    if libc.syscall(syscalls()[1], tid, buf, SIZE, 0) != 0:
        err = ctypes.get_errno()
        sys.exit(f"sched_getattr({tid}): {os.strerror(err)}")
    _, policy, _, nice, _, runtime, _, _ = struct.unpack(LAYOUT, buf.raw)
    return policy, nice, runtime


def set_attr(tid, policy, nice, runtime):
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(struct.pack(LAYOUT, SIZE, policy, 0, nice, 0, runtime, 0, 0), SIZE)
    if libc.syscall(syscalls()[0], tid, buf, 0) != 0:
        err = ctypes.get_errno()
        sys.exit(f"sched_setattr({tid}, policy {policy}, nice {nice}, runtime {runtime} ns): {os.strerror(err)}")


def main(argv):
    if len(argv) < 2 or argv[1] not in ("slice", "nice", "batch", "show"):
        sys.exit(__doc__)
    tid = int(argv[0])
    policy, nice, runtime = get(tid)
    what = argv[1]
    if what == "slice":
        # A runtime of 0 gives the thread the default slice back.
        set_attr(tid, SCHED_OTHER, nice, int(argv[2]))
    elif what == "nice":
        # setpriority with a thread id sets that thread's nice (Linux).
        try:
            os.setpriority(os.PRIO_PROCESS, tid, int(argv[2]))
        except PermissionError as e:
            sys.exit(f"setpriority({tid}, {argv[2]}): {e} (a negative nice needs CAP_SYS_NICE: run as root)")
    elif what == "batch":
        set_attr(tid, SCHED_BATCH, nice, 0)
    policy, nice, runtime = get(tid)
    print(f"thread {tid}: policy {policy}, nice {nice}, slice {runtime} ns")


if __name__ == "__main__":
    main(sys.argv[1:])
