"""The demo pipeline (the README's main job after the quickstart) runs and writes its results."""

import glob
import os
import re
import subprocess
import sys

import pyarrow.parquet as pq

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_demo_ingests_and_writes_window_results(tmp_path):
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "strom.cli.main",
            "demo",
            "--dir",
            str(tmp_path),
            "--duration",
            "75",
            "--rate",
            "200",
            "--window",
            "10 seconds",
            "--watermark",
            "2 seconds",
            "--trigger-seconds",
            "2",
            "--refresh",
            "5",
        ],
        capture_output=True,
        text=True,
        timeout=400,
        stdin=subprocess.DEVNULL,
        env=env,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    files = glob.glob(str(tmp_path / "parquet" / "**" / "*.parquet"), recursive=True)
    assert files, f"no Parquet output; stdout: {result.stdout[-2000:]}"
    rows = sum(pq.read_metadata(f).num_rows for f in files)
    assert rows > 0
    # access-stats is written exactly once (transactions + batch markers) and read read_committed
    stats = re.search(r"access-stats \(read_committed\) holds (\d+) minute rows for (\d+) windows", result.stdout)
    assert stats is not None, result.stdout[-2000:]
    assert stats[1] == stats[2], stats[0]
