"""A run whose history cannot be checked is a failed run that says why, and the campaign goes on.

Seed 1105 of a 50-run campaign ended the whole campaign with "could not read partitions [0, 1, 2]
to their end within 90.0s" and nothing else: no replay line, no end offsets, no error.
"""

from __future__ import annotations

import pytest

from strom.chaos import __main__ as campaign
from strom.chaos.workload import read_everything
from strom.testing import Broker


def test_the_final_read_names_what_it_could_not_read_and_why(tmp_path):
    with Broker(tmp_path, in_process=True) as broker:
        broker.create_topic("one", partitions=1)
        broker.produce("one", [b"0:0", b"0:1"], partition=0)
        with pytest.raises(RuntimeError) as failed:
            read_everything(broker.bootstrap_servers, "one", partitions=2, timeout_s=3.0)
    message = str(failed.value)
    # asking for the end offsets took the whole time: partition 0's was known, 1 never answered
    assert "could not read partitions [0, 1] to their end within 3.0s: end offsets {0: 2}" in message
    assert "last errors {1: " in message and "Unknown partition" in message


def test_a_run_that_cannot_be_checked_fails_and_the_next_run_still_runs(tmp_path, monkeypatch, capsys):
    seeds: list[int] = []

    def unreadable(root, faults, seconds, unclean, log, workload):  # stands in for the cluster run
        seeds.append(int(root.name.split("-")[1]))
        root.mkdir(parents=True)
        raise RuntimeError("could not read partitions [0] to their end within 90.0s")

    monkeypatch.setattr(campaign, "run_once", unreadable)
    code = campaign.main(["--runs", "2", "--minutes", "1", "--seed", "7", "--dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1
    assert seeds == [7, 8]
    assert out.count("ERROR: the run could not be checked: RuntimeError: could not read partitions [0]") == 2
    assert f"kept in {tmp_path / 'run-8'}; replay: python -m strom.chaos --runs 1 --seed 8 --minutes 1" in out
    assert (tmp_path / "run-7").is_dir() and (tmp_path / "run-8").is_dir()
    assert "runs 2, anomalous 2" in out
