"""dashboards/strom-grafana.json imports into Grafana 10 and asks only for what brokers export."""

from __future__ import annotations

import json
import re
from pathlib import Path

from strom.metrics import collector, dashboard

PATH = Path(__file__).resolve().parents[2] / "dashboards" / "strom-grafana.json"
METRIC = re.compile(r"\b((?:kafka|process|strom)_[a-z0-9_]+)\b(\{[^}]*\})?")
LABEL = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")
BY = re.compile(r"\bby\s*\(([^)]*)\)")
SCRAPER_LABELS = {"instance", "job"}  # added by Prometheus, not by the broker


def _exported_labels() -> dict[str, set[str]]:
    """metric name -> the label names its samples carry (from a snapshot holding one of everything)."""
    labels: dict[str, set[str]] = {}
    for family in collector.BrokerCollector.families(collector._sample_snapshot()):
        for sample in family.samples:
            labels.setdefault(sample.name, set()).update(sample.labels)
    for name in collector.exported_names():
        labels.setdefault(name, set())
    return labels


def _expressions(board: dict) -> list[str]:
    exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    exprs += [v["definition"] for v in board["templating"]["list"] if v["type"] == "query"]
    return exprs


def test_the_committed_dashboard_is_the_generated_one():
    assert PATH.read_text(encoding="utf-8") == dashboard.render(), (
        "run: python -m strom.metrics.dashboard --write dashboards/strom-grafana.json"
    )


def test_it_is_a_grafana_10_dashboard_with_a_prometheus_datasource_variable():
    board = json.loads(PATH.read_text(encoding="utf-8"))
    assert board["schemaVersion"] >= 36 and board["uid"] and board["title"]
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    occupied = set()
    for panel in board["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24 and grid["w"] > 0 and grid["h"] > 0
        cells = {
            (x, y) for x in range(grid["x"], grid["x"] + grid["w"]) for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not cells & occupied, f"panel {panel['title']!r} overlaps another"
        occupied |= cells
        if panel["type"] == "row":
            continue
        assert panel["type"] in ("stat", "timeseries")
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"] and all(t["datasource"] == panel["datasource"] for t in panel["targets"])
        assert len({t["refId"] for t in panel["targets"]}) == len(panel["targets"])


def test_every_expression_names_metrics_and_labels_the_broker_exports():
    board = json.loads(PATH.read_text(encoding="utf-8"))
    exported = _exported_labels()
    used = set()
    for expr in _expressions(board):
        found = METRIC.findall(expr)
        assert found, f"no metric in {expr!r}"
        known = set()
        for name, selector in found:
            assert name in exported, f"{name} (in {expr!r}) is not exported by a broker"
            used.add(name)
            known |= exported[name]
            for label in LABEL.findall(selector):
                assert label in exported[name] | SCRAPER_LABELS, f"{name} has no label {label!r} ({expr!r})"
        for group in BY.findall(expr):
            for label in (x.strip() for x in group.split(",")):
                assert label in known | SCRAPER_LABELS | {"le"}, f"'by ({group})' in {expr!r}: no label {label!r}"
    # the figures an operator looks at first are on it
    for name in (
        "kafka_server_brokertopicmetrics_messagesin_total",
        "kafka_server_replicamanager_underreplicatedpartitions",
        "kafka_network_requestmetrics_totaltimems_bucket",
        "kafka_consumergroup_lag",
        "kafka_controller_kafkacontroller_offlinepartitionscount",
        "process_cpu_seconds_total",
    ):
        assert name in used
