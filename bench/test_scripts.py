"""bench/silkit.py reads SIL Kit's result line; bench/median.py prints the SIL
Kit comparison and the scaling series from run.sh's JSON files. Figures here
are made up: these check parsing and arithmetic, never speed.

Run: python3 -m unittest discover -s bench   (make test-bench)
"""
import contextlib
import io
import json
import os
import tempfile
import unittest

import median
import silkit

RESULT = "SIL Kit CAN RTT chain (n=500): min 23.2 p50 29.1 p95 45.3 p99 67.8 max 137.5 mean 31.0 us\n"


class SilKitLine(unittest.TestCase):
    def test_the_result_line_is_found_among_sil_kit_log_lines(self):
        output = "[2026-11-24 02:00:00.000] [warning] registry slow\n" + RESULT + "trailing noise\n"
        scenario = silkit.parse(output)
        self.assertEqual((scenario["mode"], scenario["samples"]), ("chain", 500))
        self.assertEqual((scenario["p50_us"], scenario["p99_us"], scenario["mean_us"]), (29.1, 67.8, 31.0))
        self.assertIn("SIL Kit CAN, chain", scenario["scenario"])

    def test_a_run_without_a_result_line_gives_nothing(self):
        self.assertIsNone(silkit.parse("no echo peer\n"))
        self.assertIsNone(silkit.parse(""))

    def test_a_result_line_without_p99_gives_nothing(self):
        self.assertIsNone(silkit.parse("SIL Kit CAN RTT ping (n=5): min 1.0 p50 2.0 us\n"))


def distribution(p50, p99):
    return {"p50_us": p50, "p99_us": p99}


def point(series, clients, channels, p50, p99, first_p50, first_p99, **extra):
    return {
        "series": series,
        # As `fieldhub bench scaling` names them: without the series.
        "scenario": f"{clients} clients, {channels} channels",
        "clients": clients,
        "channels": channels,
        "hub": distribution(p50, p99),
        "ratio": {"p50": p50 / first_p50, "p99": p99 / first_p99},
        **extra,
    }


class Tables(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def write(self, name, content):
        with open(os.path.join(self.dir.name, name), "w") as f:
            json.dump(content, f)

    def printed(self, table):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            table(self.dir.name)
        return out.getvalue()

    def test_sil_kit_is_set_next_to_the_shm_round_trip_of_the_same_runs(self):
        for run, (hub, peer) in enumerate([(80.0, 40.0), (90.0, 60.0), (100.0, 50.0)], start=1):
            shm = [{"scenario": "shm adaptive, 8-byte CAN", "payload_bytes": 8, "hub": distribution(hub, 2 * hub)},
                   {"scenario": "shm adaptive, 64-byte CAN FD", "payload_bytes": 64, "hub": distribution(1.0, 1.0)}]
            self.write(f"latency-shm-{run}.json", shm)
            self.write(f"silkit-{run}.json", [silkit.parse(RESULT) | {"p50_us": peer, "p99_us": peer}])
        # A run without SIL Kit pairs with nothing.
        self.write("latency-shm-4.json", [{"scenario": "shm adaptive, 8-byte CAN", "payload_bytes": 8,
                                           "hub": distribution(1000.0, 1000.0)}])
        rows = self.printed(median.silkit).splitlines()
        self.assertEqual(len(rows), 5, rows)
        hub, peer = rows[2].split(" | "), rows[3].split(" | ")
        # Medians of the three paired runs; ratios are medians of per-run ratios (2.0, 1.5, 2.0).
        self.assertEqual(hub[1:5], ["3", "90.0", "180.0", "**2.00**"])
        self.assertEqual(hub[5], "**4.00** |")
        self.assertEqual(peer[1:4], ["3", "50.0", "50.0"])

    def test_no_sil_kit_files_print_no_table(self):
        self.write("latency-shm-1.json", [{"scenario": "s", "payload_bytes": 8, "hub": distribution(1.0, 1.0)}])
        self.assertEqual(self.printed(median.silkit), "")

    def test_the_scaling_series_are_tables_with_ratios_to_their_first_row(self):
        for run, slow in enumerate([1.0, 2.0, 3.0], start=1):
            self.write(f"scaling-{run}.json", [
                point("clients", 2, 1, 100.0 * slow, 200.0, 100.0 * slow, 200.0),
                point("clients", 256, 1, 1000.0 * slow, 4000.0, 100.0 * slow, 200.0,
                      extra_clients={"count": 254, "order_kept": True, "frames_dropped": run}),
                point("channels", 2, 1, 50.0, 100.0, 50.0, 100.0),
                point("channels", 2, 100, 75.0, 300.0, 50.0, 100.0,
                      background={"channels": 99, "frames_per_s_per_channel": 100.0,
                                  "frames_sent": 10, "frames_received": 9}),
            ])
        lines = self.printed(median.scaling).splitlines()
        clients = [line for line in lines if line.startswith("| 256 |")]
        self.assertEqual(clients, ["| 256 | 3 | 2000.0 | 4000.0 | **10.00** | **20.00** | "
                                   "order kept: True; frames dropped: 6 |"])
        channels = [line for line in lines if line.startswith("| 100 |")]
        self.assertEqual(channels, ["| 100 | 3 | 75.0 | 300.0 | **1.50** | **3.00** | "
                                    "100 frames/s on each of 99; not received: 3 |"])
        # The shared first point is the first row of each table, from its own series.
        self.assertEqual([line for line in lines if line.startswith("| 2 |")],
                         ["| 2 | 3 | 200.0 | 200.0 | **1.00** | **1.00** |  |"])
        self.assertEqual([line for line in lines if line.startswith("| 1 |")],
                         ["| 1 | 3 | 50.0 | 100.0 | **1.00** | **1.00** |  |"])


if __name__ == "__main__":
    unittest.main()
