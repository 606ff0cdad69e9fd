"""The README's main command runs end to end: broker up, topic created, events produced and consumed."""

import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_quickstart_script_runs_the_seeds_quickstart():
    result = subprocess.run(
        ["bash", os.path.join(ROOT, "scripts", "quickstart.sh")],
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    assert "Created topic quickstart-events." in out
    assert "PartitionCount: 1\tReplicationFactor: 1" in out
    for offset, event in enumerate(["first", "second", "third"]):
        assert f"Offset:{offset}\tThis is my {event} event" in out
