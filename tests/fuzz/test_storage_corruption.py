"""Storage recovery over arbitrary bytes, on real broker processes.

A data dir filled by a real client (two partitions, several segments, indexes, checkpoints,
meta.properties) is copied, damaged at random (truncation, flipped bits, garbage, zeroes,
deletion, emptied or extended files) after a clean stop or a kill -9, and the broker started
on it. It must either serve (a new record is acknowledged and read back by a consumer that
checks CRCs, with everything before it readable) or refuse with a one-line reason, never a
traceback or a hang. Seeded: a failure names the seed that replays it with
``python -m strom.fuzz storage-campaign``. The longer campaign runs outside the suite.
"""

from __future__ import annotations

from strom.fuzz.storage import run_campaign
from tests.broker_process import BrokerProcess

SEED = 14
RUNS = 8


def test_seeded_corruption_campaign(tmp_path):
    lines: list[str] = []
    results = run_campaign(tmp_path, RUNS, SEED, report=lines.append)
    findings = [r for r in results if r.outcome.startswith("FINDING")]
    assert not findings, "\n".join(lines) + "\n\n" + "\n\n".join(f"{r.outcome}\n{r.detail}" for r in findings)
    for result in results:
        assert result.outcome in ("served", "refused"), result
        if result.outcome == "refused":
            assert "strom server-start: cannot start:" in result.detail, result.detail


def test_damaged_meta_properties_is_refused_with_a_reason(tmp_path):
    data = tmp_path / "data"
    with BrokerProcess(data):
        pass
    (data / "meta.properties").write_bytes(b"#strom meta.properties\nversion=0\nbroker.id=\xff\xfe\n")
    broker = BrokerProcess(data)
    try:
        broker.start()
        raise AssertionError("the broker started on a meta.properties it cannot read")
    except RuntimeError:
        pass
    finally:
        broker.stop()
    log = broker.read_log()
    assert "Traceback" not in log, log
    assert "meta.properties is damaged" in log and "delete" in log, log
    assert broker.process.returncode == 1
