"""The ``fieldhub_hub`` fixture itself, exercised through pytest runs of a
user's test file in a directory of its own (the plugin comes from the
installed package's entry point, as for any user)."""

import subprocess
import sys
import textwrap


def run_pytest(directory, source, *options):
    """Run pytest on one test file with ``source``; returns (exit code, output)."""
    (directory / "test_user.py").write_text(textwrap.dedent(source))
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *options, "test_user.py"],
        cwd=directory, capture_output=True, text=True, timeout=300,
    )
    return run.returncode, run.stdout + run.stderr


def hub_is_gone(pid):
    """True when the process no longer runs (reaped, or a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_each_test_gets_its_own_hub_stopped_even_when_the_test_fails(tmp_path):
    record = tmp_path / "hubs.txt"
    code, output = run_pytest(
        tmp_path,
        f"""
        import can

        def remember(hub):
            with open({str(record)!r}, "a") as f:
                f.write(f"{{hub.pid}} {{hub.url}}\\n")

        def test_passes(fieldhub_hub):
            remember(fieldhub_hub)
            a, b = fieldhub_hub.bus("can0"), fieldhub_hub.bus("can0")
            a.send(can.Message(arbitration_id=1, is_extended_id=False))
            assert b.recv(5).arbitration_id == 1

        def test_fails(fieldhub_hub):
            remember(fieldhub_hub)
            fieldhub_hub.bus("can0")  # left open: the fixture shuts it down
            assert False, "this test fails on purpose"
        """,
    )
    assert code == 1 and "1 failed, 1 passed" in output, output
    hubs = [line.split() for line in record.read_text().splitlines()]
    assert len(hubs) == 2 and hubs[0][0] != hubs[1][0], "the two tests shared a hub"
    for pid, _ in hubs:
        assert hub_is_gone(int(pid)), f"hub process {pid} outlived its test"


def test_fieldhub_config_marker_configures_the_tests_hub(tmp_path):
    code, output = run_pytest(
        tmp_path,
        """
        import can
        import pytest

        @pytest.mark.fieldhub_config('[[channel]]\\nname = "body"\\n\\n[[channel]]\\nname = "fd0"\\nprotocol = "canfd"\\n')
        def test_configured(fieldhub_hub):
            assert [c["name"] for c in fieldhub_hub.channels()] == ["body", "fd0"]
            a, b = fieldhub_hub.bus("fd0", fd=True), fieldhub_hub.bus("fd0", fd=True)
            a.send(can.Message(arbitration_id=2, data=bytes(64), is_fd=True))
            assert b.recv(5).dlc == 64

        def test_default(fieldhub_hub):
            assert [c["name"] for c in fieldhub_hub.channels()] == ["can0", "can1"]
        """,
        "--strict-markers",
    )
    assert code == 0 and "2 passed" in output, output
