"""bench/profile_hub.py: a sample goes to the category its call chain says,
and a sched trace gives who woke the bus thread, whom it woke and how it was
switched out. The chains and events are written here in perf script's form;
these check the attribution, never speed.

Run: python3 -m unittest discover -s bench   (make test-bench)
"""
import unittest

import profile_hub as p

RING = ["fieldhub_shm::bell::Bell::ring",
        "<fieldhub_hub::transport::shm::ShmLink as fieldhub_bus::outbox::OutboxSink>::flush",
        "fieldhub_bus::bus::Bus::serve"]
SYSCALL = ["do_syscall_64", "entry_SYSCALL_64_after_hwframe"]


class Category(unittest.TestCase):
    def test_a_switch_on_the_way_out_of_a_bells_futex_wake_is_a_preemption_by_the_woken(self):
        chain = ["finish_task_switch.isra.0", "__schedule", "schedule", "exit_to_user_mode_loop"] + SYSCALL + RING
        self.assertEqual(p.category(chain), p.PREEMPTED)

    def test_the_wake_itself_is_the_futex_wake(self):
        chain = ["_raw_spin_unlock_irqrestore", "try_to_wake_up", "futex_wake"] + SYSCALL + RING
        self.assertEqual(p.category(chain), p.WAKE)

    def test_a_switch_inside_the_futex_wait_is_the_bus_threads_own_sleep(self):
        chain = ["finish_task_switch.isra.0", "__schedule", "schedule", "futex_do_wait"] + SYSCALL + [
            "fieldhub_shm::bell::Bell::sleep"]
        self.assertEqual(p.category(chain), p.SLEEP)

    def test_user_code_under_the_spin_is_spinning_and_the_rest_by_its_crate(self):
        self.assertEqual(p.category(["fieldhub_shm::bell::spin", "fieldhub_hub::bus_thread::run"]), p.SPIN)
        self.assertEqual(p.category(["fieldhub_bus::channel::Channel::begin", "fieldhub_bus::bus::Bus::serve"]), p.BUS)
        self.assertEqual(p.category(RING[1:]), p.DELIVERY)
        self.assertEqual(p.category(["asm_sysvec_apic_timer_interrupt"]), p.KERNEL)

    def test_samples_are_split_at_blank_lines_with_their_thread(self):
        text = [" 9223 \n", "\tffff finish_task_switch.isra.0\n", "\t15fa fieldhub_shm::bell::Bell::ring\n", "\n",
                " 9223 \n", "\t15fb fieldhub_shm::bell::spin\n", "\n"]
        got = list(p.samples(text))
        self.assertEqual(got, [("9223", ["finish_task_switch.isra.0", "fieldhub_shm::bell::Bell::ring"]),
                               ("9223", ["fieldhub_shm::bell::spin"])])


TRACE = """\
      fh-bench  9217 [000] 100.000000: sched:sched_wakeup: comm=fh-bus pid=9223 prio=120 target_cpu=000
      fh-bench  9217 [000] 100.000001: sched:sched_switch: prev_comm=fh-bench prev_pid=9217 prev_prio=120 prev_state=R ==> next_comm=fh-bus next_pid=9223 next_prio=120
        fh-bus  9223 [000] 100.000002: sched:sched_wakeup: comm=fh-bench pid=12088 prio=120 target_cpu=000
        fh-bus  9223 [000] 100.000003: sched:sched_switch: prev_comm=fh-bus prev_pid=9223 prev_prio=120 prev_state=R ==> next_comm=fh-bench next_pid=12088 next_prio=120
        fh-bus  9223 [000] 100.000004: sched:sched_switch: prev_comm=fh-bus prev_pid=9223 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120
           cc1  4242 [001] 100.000250: sched:sched_wakeup: comm=fh-bus pid=9223 prio=120 target_cpu=000
"""


class WakeUps(unittest.TestCase):
    def test_who_woke_the_bus_thread_whom_it_woke_and_how_it_was_switched_out(self):
        woke_bus, bus_woke, bus_out, seconds = p.wake_ups(TRACE.splitlines(), "9223", "fh-bench")
        self.assertEqual(dict(woke_bus), {"the benchmark's threads (the sender)": 1, "an interrupt (a timer)": 1})
        self.assertEqual(dict(bus_woke), {"fh-bench": 1})
        self.assertEqual(dict(bus_out), {"R": 1, "S": 1})
        self.assertAlmostEqual(seconds, 0.00025)


if __name__ == "__main__":
    unittest.main()
