"""The keys of the services a broker may run beside the Kafka protocol: the Prometheus endpoint
(``metrics.*``), the Schema Registry's HTTP listener (``schema.registry.listeners``) and Iceberg
topics (``iceberg.*``).
"""

from __future__ import annotations

from dataclasses import dataclass

from strom.server.config_keys import choice, config_key, int_range, long_range, optional_text
from strom.storage.log_config import parse_bool


def parse_metrics_listener(key: str, raw: str) -> str | None:
    if not str(raw).strip():
        return None
    from strom.metrics.server import parse_listener

    parse_listener(key, str(raw))  # validated now; the broker parses it again when it binds
    return str(raw).strip()


def parse_schema_registry_listener(key: str, raw: str) -> str | None:
    if not str(raw).strip():
        return None
    from strom.server.schema_registry_http import parse_listener

    parse_listener(key, str(raw))  # validated now; the broker parses it again when it binds
    return str(raw).strip()


@dataclass(frozen=True)
class ServiceKeys:
    """The metrics endpoint, the Schema Registry's listener and Iceberg topics."""

    # --- metrics, Schema Registry and Iceberg topics
    metrics_listener: str | None = config_key(
        "metrics.listener",
        None,
        parse_metrics_listener,
        "http://host:port of the Prometheus /metrics endpoint (port 0 picks a free one); null: not served.",
    )
    schema_registry_listeners: str | None = config_key(
        "schema.registry.listeners",
        None,
        parse_schema_registry_listener,
        "strom's own: http://host:port or https://host:port (with the broker's ssl.keystore.* and "
        "ssl.truststore.* keys) of this broker's Schema Registry (Confluent's REST API, state in the "
        "compacted topic _schemas; port 0 picks a free one); null: not served.",
    )
    iceberg_enabled: bool = config_key(
        "iceberg.enabled",
        False,
        parse_bool,
        "Iceberg topics (Redpanda's key): the leader of each partition of a topic with iceberg.mode=key_value "
        "writes its committed records to an Iceberg table, exactly once (strom.iceberg).",
    )
    iceberg_catalog_type: str = config_key(
        "iceberg.catalog.type",
        "sql",
        choice("sql"),
        "sql: an Iceberg SQL catalog through pyiceberg (iceberg.catalog.uri); rest is not implemented yet.",
    )
    iceberg_catalog_uri: str | None = config_key(
        "iceberg.catalog.uri",
        None,
        optional_text,
        "strom's own: the SQL catalog's SQLAlchemy URL (brokers of one cluster must share it); null: a SQLite "
        "file iceberg-catalog.db in the first log dir.",
    )
    iceberg_warehouse: str | None = config_key(
        "iceberg.warehouse",
        None,
        optional_text,
        "Where new tables' Parquet and metadata files go (a path or a URI pyiceberg's file IO takes); "
        "null: iceberg-warehouse beside the first log dir.",
    )
    iceberg_target_lag_ms: int = config_key(
        "iceberg.target.lag.ms",
        60000,
        long_range(1),
        "How often each partition's committed records are translated to its Iceberg table.",
    )
    iceberg_target_file_size_bytes: int = config_key(
        "iceberg.target.file.size.bytes",
        536870912,
        long_range(1),
        "Target size of the Parquet files a translation writes (the table's write.target-file-size-bytes).",
    )
    metrics_request_timing_samples_per_second: int = config_key(
        "metrics.request.timing.samples.per.second",
        512,
        int_range(0),
        "strom's own: about how many requests a second get the latency histograms and phase times "
        "(reading the clock costs 5-10% of a small Produce); above it they hold an even sample, the request "
        "counts stay exact. 0: time every request.",
    )
