"""The keys of the services a broker may run beside the Kafka protocol: the Prometheus endpoint
(``metrics.*``), the Schema Registry's HTTP listener (``schema.registry.listeners``) and Iceberg
topics (``iceberg.*``, with the Iceberg REST catalog the brokers may use, ``iceberg.rest.catalog.*``,
and the one a broker may serve, ``iceberg.rest.catalog.listeners``).
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


def parse_rest_catalog_uri(key: str, raw: str) -> str | None:
    """An Iceberg REST catalog's base URL: http(s)://host[:port][/path], the client adding /v1/..."""
    from urllib.parse import urlsplit

    from strom.storage.log_config import ConfigError

    value = str(raw).strip()
    if not value:
        return None
    parts = urlsplit(value)
    try:
        parts.port
    except ValueError:
        raise ConfigError(key, f"{value!r} has no valid port") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise ConfigError(key, f"{value!r} is not http(s)://host[:port][/path] of an Iceberg REST catalog")
    return value


def parse_client_credential(key: str, raw: str) -> str | None:
    """OAuth2 client credentials as pyiceberg takes them: ``client_id:client_secret``."""
    from strom.storage.log_config import ConfigError

    value = str(raw).strip()
    if value and (":" not in value or not value.partition(":")[0]):
        raise ConfigError(key, "must be client_id:client_secret")  # the value itself is a secret: not shown
    return value or None


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
        choice("sql", "rest"),
        "sql: an Iceberg SQL catalog through pyiceberg (iceberg.catalog.uri); rest: an Iceberg REST catalog "
        "(iceberg.rest.catalog.uri and its credentials), such as the one a strom broker serves with "
        "iceberg.rest.catalog.listeners.",
    )
    iceberg_catalog_uri: str | None = config_key(
        "iceberg.catalog.uri",
        None,
        optional_text,
        "strom's own: the SQL catalog's SQLAlchemy URL (brokers of one cluster must share it); null: a SQLite "
        "file iceberg-catalog.db in the first log dir.",
    )
    iceberg_rest_catalog_uri: str | None = config_key(
        "iceberg.rest.catalog.uri",
        None,
        parse_rest_catalog_uri,
        "With iceberg.catalog.type=rest (which requires it): the REST catalog's base URL, "
        "http(s)://host:port[/path] (the client adds /v1/...).",
    )
    iceberg_rest_catalog_credential: str | None = config_key(
        "iceberg.rest.catalog.credential",
        None,
        parse_client_credential,
        "OAuth2 client credentials client_id:client_secret, exchanged for a bearer token at the catalog's "
        "/v1/oauth/tokens (pyiceberg's credential); against a strom catalog on SASL brokers, a SCRAM user and "
        "its password. null: none.",
        sensitive=True,
    )
    iceberg_rest_catalog_token: str | None = config_key(
        "iceberg.rest.catalog.token",
        None,
        optional_text,
        "A bearer token sent to the REST catalog (pyiceberg's token); null: none.",
        sensitive=True,
    )
    iceberg_rest_catalog_warehouse: str | None = config_key(
        "iceberg.rest.catalog.warehouse",
        None,
        optional_text,
        "The warehouse asked of the REST catalog's /v1/config (pyiceberg's warehouse); null: the catalog's "
        "default. With a REST catalog the catalog, not iceberg.warehouse, places new tables.",
    )
    iceberg_rest_catalog_ssl_ca_location: str | None = config_key(
        "iceberg.rest.catalog.ssl.ca.location",
        None,
        optional_text,
        "strom's own: PEM CA certificates an https REST catalog's certificate is checked against (the "
        "environment's REQUESTS_CA_BUNDLE and proxies are then not used); null: the system's.",
    )
    iceberg_rest_catalog_listeners: str | None = config_key(
        "iceberg.rest.catalog.listeners",
        None,
        parse_schema_registry_listener,
        "strom's own: http://host:port or https://host:port (with the broker's ssl.keystore.* keys) where this "
        "broker serves an Iceberg REST catalog over its SQL catalog (iceberg.catalog.uri, iceberg.warehouse; "
        "port 0 picks a free one); with SASL/SCRAM on the brokers it takes HTTP Basic of a SCRAM user or a "
        "bearer token from its /v1/oauth/tokens. null: not served.",
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
