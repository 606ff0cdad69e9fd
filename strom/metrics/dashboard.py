"""The Grafana dashboard in ``dashboards/strom-grafana.json``, built from the metric names brokers export.

    python -m strom.metrics.dashboard --write dashboards/strom-grafana.json

Written as code so that its panels are few lines each and a test can check every expression
against ``collector.exported_names()``. The JSON is a Grafana 10 dashboard (schemaVersion 38)
with a Prometheus data-source variable, so it imports as it is (Dashboards > New > Import) into
any Grafana that has a Prometheus scraping the brokers' ``metrics.listener``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
RATE = "[$__rate_interval]"
SEL = 'instance=~"$instance"'
TOPIC_SEL = f'{SEL},topic=~"$topic"'


class _Layout:
    """Places panels left to right in rows of 24 grid units, as Grafana's editor would."""

    def __init__(self) -> None:
        self.panels: list[dict[str, Any]] = []
        self.x = 0
        self.y = 0
        self.row_height = 0

    def _next_id(self) -> int:
        return len(self.panels) + 1

    def row(self, title: str) -> None:
        self.y += self.row_height
        self.x, self.row_height = 0, 0
        self.panels.append(
            {
                "type": "row",
                "title": title,
                "collapsed": False,
                "id": self._next_id(),
                "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y},
                "panels": [],
            }
        )
        self.y += 1

    def add(
        self,
        panel_type: str,
        title: str,
        targets: list[tuple[str, str]],
        *,
        unit: str = "short",
        width: int = 8,
        height: int = 8,
        description: str = "",
        options: dict | None = None,
    ) -> None:
        if self.x + width > 24:
            self.y += self.row_height
            self.x, self.row_height = 0, 0
        panel: dict[str, Any] = {
            "type": panel_type,
            "title": title,
            "id": self._next_id(),
            "datasource": DATASOURCE,
            "description": description,
            "gridPos": {"h": height, "w": width, "x": self.x, "y": self.y},
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "targets": [
                {
                    "datasource": DATASOURCE,
                    "expr": expr,
                    "legendFormat": legend,
                    "refId": chr(ord("A") + i),
                    "range": True,
                }
                for i, (expr, legend) in enumerate(targets)
            ],
        }
        if panel_type == "timeseries":
            panel["fieldConfig"]["defaults"]["custom"] = {
                "drawStyle": "line",
                "lineWidth": 1,
                "fillOpacity": 10,
                "showPoints": "never",
            }
            panel["options"] = {
                "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                "tooltip": {"mode": "multi", "sort": "desc"},
            }
        elif panel_type == "stat":
            panel["options"] = {
                "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                "colorMode": "background",
                "graphMode": "none",
                "textMode": "auto",
                "orientation": "auto",
                "justifyMode": "auto",
            }
            panel["fieldConfig"]["defaults"]["thresholds"] = {
                "mode": "absolute",
                "steps": [{"color": "green", "value": None}, {"color": "red", "value": 1}],
            }
        if options:
            panel["options"] = {**panel.get("options", {}), **options}
        self.panels.append(panel)
        self.x += width
        self.row_height = max(self.row_height, height)


def _query_variable(name: str, label: str, query: str) -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DATASOURCE,
        "definition": query,
        "query": {"query": query, "refId": f"{name}-variable"},
        "includeAll": True,
        "multi": True,
        "allValue": ".*",
        "refresh": 2,
        "sort": 1,
        "hide": 0,
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "options": [],
        "regex": "",
    }


def _mean(phase: str, request: str) -> str:
    name = f"kafka_network_requestmetrics_{phase}timems"
    return (
        f'sum(rate({name}_sum{{{SEL},request="{request}"}}{RATE})) / '
        f'sum(rate({name}_count{{{SEL},request="{request}"}}{RATE}))'
    )


def _quantile(q: float) -> str:
    requests = "Produce|FetchConsumer|FetchFollower|OffsetCommit|Metadata"
    return (
        f"histogram_quantile({q}, sum by (request, le) (rate(kafka_network_requestmetrics_totaltimems_bucket"
        f'{{{SEL},request=~"{requests}"}}{RATE})))'
    )


def build() -> dict[str, Any]:
    g = _Layout()
    g.row("Cluster health")
    for title, expr, width in [
        ("Active controllers", f"sum(kafka_controller_kafkacontroller_activecontrollercount{{{SEL}}})", 4),
        ("Under-replicated partitions", f"sum(kafka_server_replicamanager_underreplicatedpartitions{{{SEL}}})", 4),
        ("Under min ISR", f"sum(kafka_server_replicamanager_underminisrpartitioncount{{{SEL}}})", 4),
        ("Offline partitions", f"sum(kafka_controller_kafkacontroller_offlinepartitionscount{{{SEL}}})", 4),
        ("Brokers up", f"count(kafka_server_replicamanager_partitioncount{{{SEL}}})", 4),
        ("Partitions (leaders)", f"sum(kafka_server_replicamanager_leadercount{{{SEL}}})", 4),
    ]:
        healthy_is_one = title == "Active controllers"
        g.add("stat", title, [(expr, "")], width=width, height=4)
        if healthy_is_one or title.startswith(("Brokers", "Partitions")):  # not an alarm when non-zero
            g.panels[-1]["fieldConfig"]["defaults"]["thresholds"]["steps"] = [{"color": "blue", "value": None}]

    g.row("Throughput")
    g.add(
        "timeseries",
        "Messages in per second",
        [
            (
                f"sum by (topic) (rate(kafka_server_brokertopicmetrics_messagesin_total{{{TOPIC_SEL}}}{RATE}))",
                "{{topic}}",
            ),
        ],
        unit="short",
    )
    g.add(
        "timeseries",
        "Bytes in per second",
        [
            (f"sum by (topic) (rate(kafka_server_brokertopicmetrics_bytesin_total{{{TOPIC_SEL}}}{RATE}))", "{{topic}}"),
        ],
        unit="Bps",
    )
    g.add(
        "timeseries",
        "Bytes out per second (consumers)",
        [
            (
                f"sum by (topic) (rate(kafka_server_brokertopicmetrics_bytesout_total{{{TOPIC_SEL}}}{RATE}))",
                "{{topic}}",
            ),
        ],
        unit="Bps",
    )
    g.add(
        "timeseries",
        "Failed produce and fetch per second",
        [
            (
                f"sum by (topic) (rate(kafka_server_brokertopicmetrics_failedproducerequests_total{{{TOPIC_SEL}}}{RATE}))",
                "produce {{topic}}",
            ),
            (
                f"sum by (topic) (rate(kafka_server_brokertopicmetrics_failedfetchrequests_total{{{TOPIC_SEL}}}{RATE}))",
                "fetch {{topic}}",
            ),
        ],
        unit="reqps",
    )
    g.add(
        "timeseries",
        "Replication bytes per second",
        [
            (
                f"sum by (instance) (rate(kafka_server_brokertopicmetrics_replicationbytesin_total{{{SEL}}}{RATE}))",
                "in {{instance}}",
            ),
            (
                f"sum by (instance) (rate(kafka_server_brokertopicmetrics_replicationbytesout_total{{{SEL}}}{RATE}))",
                "out {{instance}}",
            ),
        ],
        unit="Bps",
    )
    g.add(
        "timeseries",
        "Messages in per broker",
        [
            (
                f'sum by (instance) (rate(kafka_server_brokertopicmetrics_messagesin_total{{{SEL},topic=""}}{RATE}))',
                "{{instance}}",
            ),
        ],
        unit="short",
    )

    g.row("Requests")
    g.add(
        "timeseries",
        "Requests per second by API",
        [
            (f"sum by (request) (rate(kafka_network_requestmetrics_requests_total{{{SEL}}}{RATE}))", "{{request}}"),
        ],
        unit="reqps",
    )
    g.add(
        "timeseries",
        "99th percentile total time",
        [
            (_quantile(0.99), "{{request}}"),
        ],
        unit="ms",
    )
    g.add(
        "timeseries",
        "Median total time",
        [
            (_quantile(0.5), "{{request}}"),
        ],
        unit="ms",
    )
    for request in ("Produce", "FetchConsumer"):
        g.add(
            "timeseries",
            f"{request}: mean time by phase",
            [(_mean(phase, request), phase) for phase in ("queue", "local", "remote", "responsesend")],
            unit="ms",
            width=12,
            options={"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True}},
            description="Stacked means per request: queue, handler (local), waiting (remote: acks=all or "
            "long poll), encoding and handing to the socket (response send).",
        )
        g.panels[-1]["fieldConfig"]["defaults"]["custom"]["stacking"] = {"mode": "normal", "group": "A"}

    g.row("Replication and controller")
    g.add(
        "timeseries",
        "ISR shrinks and expands per second",
        [
            (f"sum(rate(kafka_server_replicamanager_isrshrinks_total{{{SEL}}}{RATE}))", "shrinks"),
            (f"sum(rate(kafka_server_replicamanager_isrexpands_total{{{SEL}}}{RATE}))", "expands"),
        ],
        unit="short",
    )
    g.add(
        "timeseries",
        "Leader elections per second",
        [
            (
                f"sum(rate(kafka_controller_controllerstats_leaderelectionrateandtimems_count{{{SEL}}}{RATE}))",
                "elections",
            ),
            (f"sum(rate(kafka_controller_controllerstats_uncleanleaderelections_total{{{SEL}}}{RATE}))", "unclean"),
        ],
        unit="short",
    )
    g.add(
        "timeseries",
        "Leaders and partitions per broker",
        [
            (f"kafka_server_replicamanager_leadercount{{{SEL}}}", "leaders {{instance}}"),
            (f"kafka_server_replicamanager_partitioncount{{{SEL}}}", "replicas {{instance}}"),
        ],
        unit="short",
    )

    g.row("Logs")
    g.add(
        "timeseries",
        "Log size by topic (all replicas)",
        [
            (f"sum by (topic) (kafka_log_log_size{{{TOPIC_SEL}}})", "{{topic}}"),
        ],
        unit="bytes",
    )
    g.add(
        "timeseries",
        "Log end offset by partition",
        [
            (f"max by (topic, partition) (kafka_log_log_logendoffset{{{TOPIC_SEL}}})", "{{topic}}-{{partition}}"),
        ],
        unit="short",
    )
    g.add(
        "timeseries",
        "Retained messages by partition (log end - log start)",
        [
            (
                (
                    f"max by (topic, partition) (kafka_log_log_logendoffset{{{TOPIC_SEL}}}) - "
                    f"max by (topic, partition) (kafka_log_log_logstartoffset{{{TOPIC_SEL}}})"
                ),
                "{{topic}}-{{partition}}",
            ),
        ],
        unit="short",
    )

    g.row("Consumer groups")
    g.add(
        "timeseries",
        "Consumer lag by group and topic",
        [
            (
                f'sum by (consumergroup, topic) (kafka_consumergroup_lag_sum{{{SEL},consumergroup=~"$group"}})',
                "{{consumergroup}} {{topic}}",
            ),
        ],
        unit="short",
        width=12,
    )
    g.add(
        "timeseries",
        "Consumer lag by partition",
        [
            (
                f'kafka_consumergroup_lag{{{SEL},consumergroup=~"$group",topic=~"$topic"}}',
                "{{consumergroup}} {{topic}}-{{partition}}",
            ),
        ],
        unit="short",
        width=12,
    )
    g.add(
        "timeseries",
        "Groups by state",
        [
            (f"sum(kafka_coordinator_group_groupmetadatamanager_numgroups{state}{{{SEL}}})", state)
            for state in ("stable", "preparingrebalance", "completingrebalance", "empty", "dead")
        ],
        unit="short",
        width=12,
    )
    g.add(
        "timeseries",
        "Rebalances completed per second",
        [
            (
                f"sum(rate(kafka_server_group_coordinator_metrics_completed_rebalance_total{{{SEL}}}{RATE}))",
                "rebalances",
            ),
        ],
        unit="short",
        width=12,
    )

    g.row("Iceberg topics")
    g.add(
        "timeseries",
        "Translation lag (records)",
        [(f"sum by (topic) (strom_iceberg_translation_lag_records{{{TOPIC_SEL}}})", "{{topic}}")],
        width=6,
        description="Committed records not in the topic's Iceberg table yet, summed over its partitions' leaders.",
    )
    g.add(
        "timeseries",
        "Translation lag (seconds)",
        [(f"max by (topic) (strom_iceberg_translation_lag_seconds{{{TOPIC_SEL}}})", "{{topic}}")],
        unit="s",
        width=6,
        description="How long the oldest committed record not in the table has waited, the worst partition.",
    )
    g.add(
        "timeseries",
        "Compaction (files per second)",
        [
            (f"sum by (topic) (rate(strom_iceberg_compaction_input_files_total{{{TOPIC_SEL}}}{RATE}))", "{{topic}} in"),
            (
                f"sum by (topic) (rate(strom_iceberg_compaction_output_files_total{{{TOPIC_SEL}}}{RATE}))",
                "{{topic}} out",
            ),
        ],
        width=6,
        description="Small data files compacted (in) and the files written in their place (out).",
    )
    g.add(
        "timeseries",
        "Expiry: files deleted, failures, conflicts",
        [
            (
                f"sum by (topic, kind) (increase(strom_iceberg_files_deleted_total{{{TOPIC_SEL}}}{RATE}))",
                "{{topic}} {{kind}} deleted",
            ),
            (
                f"sum by (topic) (increase(strom_iceberg_maintenance_failures_total{{{TOPIC_SEL}}}{RATE}))",
                "{{topic}} maintenance failures",
            ),
            (
                f"sum by (topic, writer) (increase(strom_iceberg_commit_conflicts_total{{{TOPIC_SEL}}}{RATE}))",
                "{{topic}} {{writer}} conflicts",
            ),
        ],
        width=6,
        description="Files deleted because only expired snapshots referenced them, maintenance runs that failed, "
        "and commits that lost a race and were planned again.",
    )

    g.row("Connections and process")
    g.add(
        "timeseries",
        "Connections by listener",
        [
            (f"sum by (listener) (kafka_server_socket_server_metrics_connection_count{{{SEL}}})", "{{listener}}"),
        ],
        unit="short",
        width=6,
    )
    g.add(
        "timeseries",
        "New connections per second",
        [
            (
                f"sum by (listener) (rate(kafka_server_socket_server_metrics_connection_creation_total{{{SEL}}}{RATE}))",
                "{{listener}}",
            ),
        ],
        unit="short",
        width=6,
    )
    g.add(
        "timeseries",
        "CPU per broker",
        [
            (f"rate(process_cpu_seconds_total{{{SEL}}}{RATE})", "{{instance}}"),
        ],
        unit="percentunit",
        width=6,
    )
    g.add(
        "timeseries",
        "Resident memory",
        [
            (f"process_resident_memory_bytes{{{SEL}}}", "{{instance}}"),
        ],
        unit="bytes",
        width=6,
    )
    g.add(
        "timeseries",
        "Open file descriptors",
        [
            (f"process_open_fds{{{SEL}}}", "{{instance}}"),
        ],
        unit="short",
        width=12,
    )
    g.add(
        "timeseries",
        "Event-loop lag (max over 10 s)",
        [
            (f"strom_eventloop_lag_max_seconds{{{SEL}}}", "{{instance}}"),
        ],
        unit="s",
        width=12,
        description="How late the broker's single event loop ran a timer: every request waits at least this long.",
    )

    return {
        "annotations": {
            "list": [
                {
                    "builtIn": 1,
                    "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                    "enable": True,
                    "hide": True,
                    "iconColor": "rgba(0, 211, 255, 1)",
                    "name": "Annotations & Alerts",
                    "type": "dashboard",
                }
            ]
        },
        "description": "strom brokers (Kafka metric names, JMX-exporter style) scraped from metrics.listener",
        "editable": True,
        "fiscalYearStartMonth": 0,
        "graphTooltip": 1,
        "links": [],
        "liveNow": False,
        "panels": g.panels,
        "refresh": "10s",
        "schemaVersion": 38,
        "tags": ["kafka", "strom"],
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "label": "Data source",
                    "type": "datasource",
                    "query": "prometheus",
                    "current": {},
                    "hide": 0,
                    "includeAll": False,
                    "multi": False,
                    "options": [],
                    "refresh": 1,
                    "regex": "",
                },
                _query_variable(
                    "instance", "Broker", "label_values(kafka_server_replicamanager_partitioncount, instance)"
                ),
                _query_variable("topic", "Topic", "label_values(kafka_log_log_size, topic)"),
                _query_variable("group", "Consumer group", "label_values(kafka_consumergroup_members, consumergroup)"),
            ]
        },
        "time": {"from": "now-1h", "to": "now"},
        "timepicker": {},
        "timezone": "",
        "title": "strom / Kafka overview",
        "uid": "strom-kafka-overview",
        "version": 1,
        "weekStart": "",
    }


def render() -> str:
    return json.dumps(build(), indent=2) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", metavar="PATH", help="write the dashboard here instead of printing it")
    args = parser.parse_args(argv)
    if args.write:
        with open(args.write, "w", encoding="utf-8") as handle:
            handle.write(render())
    else:
        print(render(), end="")


if __name__ == "__main__":
    main()
