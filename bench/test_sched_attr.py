"""bench/sched_attr.py sets what it says on the thread it names, as the kernel
then reports it (sched_getattr), on a `sleep` process of the test's own. The
EEVDF slice needs Linux >= 6.12.

Run: python3 -m unittest discover -s bench   (make test-bench)
"""
import contextlib
import io
import subprocess
import unittest

import sched_attr


class SchedAttr(unittest.TestCase):
    def setUp(self):
        self.sleeper = subprocess.Popen(["sleep", "30"])
        self.addCleanup(self.sleeper.wait)
        self.addCleanup(self.sleeper.kill)
        self.tid = self.sleeper.pid

    def run_tool(self, *args):
        with contextlib.redirect_stdout(io.StringIO()) as out:
            sched_attr.main([str(self.tid), *args])
        return out.getvalue()

    def test_a_slice_set_is_the_slice_the_kernel_reports(self):
        printed = self.run_tool("slice", "200000")
        self.assertEqual(sched_attr.get(self.tid), (sched_attr.SCHED_OTHER, 0, 200000))
        self.assertIn("slice 200000 ns", printed)

    def test_a_slice_below_a_tenth_of_a_millisecond_is_raised_to_it_by_the_kernel(self):
        self.run_tool("slice", "50")
        self.assertEqual(sched_attr.get(self.tid)[2], 100000)

    def test_slice_zero_gives_the_default_slice_back(self):
        default = sched_attr.get(self.tid)[2]
        self.run_tool("slice", "3000000")
        self.run_tool("slice", "0")
        self.assertEqual(sched_attr.get(self.tid)[2], default)

    def test_nice_changes_the_nice_value_and_keeps_the_slice(self):
        self.run_tool("slice", "300000")
        self.run_tool("nice", "5")
        self.assertEqual(sched_attr.get(self.tid), (sched_attr.SCHED_OTHER, 5, 300000))

    def test_batch_sets_sched_batch_and_keeps_the_nice_value(self):
        self.run_tool("nice", "3")
        self.run_tool("batch")
        policy, nice, _ = sched_attr.get(self.tid)
        self.assertEqual((policy, nice), (sched_attr.SCHED_BATCH, 3))

    def test_an_unknown_change_is_refused_with_the_usage(self):
        with self.assertRaises(SystemExit) as refused:
            sched_attr.main([str(self.tid), "fifo"])
        self.assertIn("slice NS | nice N | batch | show", str(refused.exception.code))


if __name__ == "__main__":
    unittest.main()
