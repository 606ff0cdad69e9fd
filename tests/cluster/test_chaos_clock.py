"""The fault campaign's clock faults, short and fixed: one broker's wall clock stepped hours either way.

``python -m strom.chaos --faults clock-forward,clock-backward`` runs them randomized and long;
here partition 0's leader has its clock stepped 3 h forward, then (after it is stepped back)
3 h back, and a follower's 5 h forward, under the queue workload on a LogAppendTime topic with
small segments and retention checked every second. Nothing acknowledged may be lost (retention
counts from each segment's largest timestamp, and no jump is as long as retention.ms) or
duplicated (no producer or session expires: those are measured on the monotonic clock), and
ListOffsets by timestamp must answer the first offset at or after each timestamp asked, around
every place where the leader's timestamps went backwards.
"""

import re

from strom.chaos import clock as clock_faults
from strom.chaos import faults
from strom.chaos.__main__ import Fault, run_once

HOUR_S = 3600.0


def test_clock_steps_on_one_broker_lose_and_duplicate_nothing_and_list_offsets_stays_exact(tmp_path):
    schedule = [
        Fault("clock-forward", 1, 3.0, 5.0, 3 * HOUR_S),  # pick 1: partition 0's leader
        Fault("clock-backward", 1, 11.0, 5.0, -3 * HOUR_S),
        Fault("clock-forward", 2, 19.0, 4.0, 5 * HOUR_S),  # pick 2: a follower
    ]
    lines: list[str] = []
    seen: list[faults.Observation] = []
    verdict, injected = run_once(tmp_path, schedule, 26, unclean=False, log=lines.append, observations=seen)
    assert injected == {"clock-forward": 2, "clock-backward": 1}
    assert [o.target.split()[0] for o in seen] == ["leader", "leader", "follower"], [o.target for o in seen]
    assert verdict.acknowledged > 1000, verdict.summary()
    assert verdict.ok, (
        verdict.summary(),
        verdict.lost[:5],
        verdict.duplicated[:5],
        verdict.moved[:5],
        verdict.out_of_order[:5],
        verdict.replica_differences,
        verdict.anomalies[:5],
        verdict.group and verdict.group.failures(),
        lines,
    )
    checked = next(line for line in lines if "ListOffsets by timestamp" in line)
    asked, wrong, steps_back = map(int, re.findall(r"\d+", checked))
    assert wrong == 0 and asked > 0, checked
    # the leader's records went 3 h back when its clock was stepped home, and again when stepped back
    assert steps_back >= 2, (checked, lines)
    assert clock_faults.RETENTION_MS > 5 * HOUR_S * 1000
