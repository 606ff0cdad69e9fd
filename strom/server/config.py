"""BrokerConfig: the broker's settings, read from Kafka's server.properties keys with Kafka's defaults.

One frozen dataclass, assembled from one class of keys per area, each in its own module:
identity, listeners and metadata store (``config_listeners``), TLS, SASL and authorization
(``config_security``), sockets and connection limits (``config_connections``), topics and the log.*
defaults (``config_log``), replication (``config_replication``), groups, offsets and transactions
(``config_coordinators``), and the metrics, Schema Registry and Iceberg services
(``config_services``). Each field carries its Kafka key, parser, default and a one-line doc
(``config_keys.config_key``), so the parser, ``items()`` (DescribeConfigs) and the generated
reference page cannot drift apart. A field is named after its key (``log.retention.ms`` ->
``log_retention_ms``).

This module holds what needs every key at once: reading a mapping of keys (with the
``listener.name.<listener>.*`` values), resolving the keys Kafka derives from other keys,
the rules between keys of different areas, and the per-listener security views.

Keys that Kafka derives from other keys (``log.retention.ms`` from minutes or hours,
``log.roll.ms`` from hours, ``log.dirs`` from ``log.dir``, ``advertised.listeners`` from
``listeners`` ...) default to None and are resolved once at construction, so readers always see
the effective value. Change such a config by building a new one with ``from_mapping``, not with
``dataclasses.replace`` (which would keep the already-resolved value).

Unknown keys are logged and ignored rather than fatal, so an existing Kafka server.properties
can be used as it is.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

from strom.server.config_connections import LISTENER_LIMIT_KEYS, ConnectionKeys
from strom.server.config_coordinators import CoordinatorKeys
from strom.server.config_keys import HOUR_MS, MINUTE_MS, csv_list, long_range, require
from strom.server.config_listeners import Listener, ListenerKeys
from strom.server.config_log import LogKeys
from strom.server.config_properties import read_properties
from strom.server.config_replication import ReplicationKeys
from strom.server.config_security import SASL_MECHANISMS, SecurityKeys
from strom.server.config_services import ServiceKeys
from strom.storage.log_config import did_you_mean, warn_ignored

log = logging.getLogger("strom.config")

# listener.name.<listener>.<key>: a per-listener value of an ssl.*/sasl.* key, or <mechanism>.sasl.jaas.config
_LISTENER_KEY = re.compile(r"^listener\.name\.([A-Za-z0-9_]+)\.(.+)$")
_JAAS_KEY = re.compile(r"^(plain|scram-sha-256|scram-sha-512|gssapi|oauthbearer)\.sasl\.jaas\.config$", re.I)
# listener.name.<listener>.oauthbearer.<key>: the OAUTHBEARER validator's settings (strom.security.oauthbearer)
_OAUTHBEARER_KEY = re.compile(r"^oauthbearer\.(sasl\.server\.callback\.handler\.class|sasl\.oauthbearer\..+)$", re.I)
_REAUTH_KEY = re.compile(
    r"^(plain|scram-sha-256|scram-sha-512|gssapi|oauthbearer)\.connections\.max\.reauth\.ms$", re.IGNORECASE
)


# A dataclass takes its bases' fields from the last base to the first: keys are listed (DescribeConfigs,
# the reference table) listeners first, then security, connections, log, replication, coordinators, services.
@dataclass(frozen=True)
class BrokerConfig(ServiceKeys, CoordinatorKeys, ReplicationKeys, LogKeys, ConnectionKeys, SecurityKeys, ListenerKeys):
    """One broker's configuration; every field is one Kafka key with Kafka's default.

    Deliberate differences from Kafka: broker.id defaults to 0 (one broker needs no id setup),
    listeners to 127.0.0.1 (not every interface), log.dir to ./strom-data, and
    zookeeper.connect may be unset (the embedded metadata store is used). The internal topics'
    replication factors keep Kafka's 3 but are clamped to the number of live brokers when the
    topic is created, so a single broker works without editing them.

    num.io.threads, num.network.threads, num.recovery.threads.per.data.dir and background.threads
    are accepted and ignored: a strom broker is one asyncio process; there are no thread pools
    to size.

    Derived keys default to None but are annotated with their resolved type: __post_init__ fills
    them in, so no instance a reader gets holds None there.
    """

    def __post_init__(self) -> None:
        resolved: dict[str, Any] = {}
        if self.log_dirs is None:
            resolved["log_dirs"] = csv_list("log.dir", self.log_dir)
        if self.log_roll_ms is None:
            resolved["log_roll_ms"] = self.log_roll_hours * HOUR_MS
        if self.log_roll_jitter_ms is None:
            resolved["log_roll_jitter_ms"] = self.log_roll_jitter_hours * HOUR_MS
        retention = self.log_retention_ms
        if retention is None:  # Kafka's precedence: ms > minutes > hours
            if self.log_retention_minutes is not None:
                retention = self.log_retention_minutes * MINUTE_MS
            else:
                retention = self.log_retention_hours * HOUR_MS
        resolved["log_retention_ms"] = -1 if retention < 0 else retention  # any negative: unlimited
        if self.log_flush_interval_ms is None:
            resolved["log_flush_interval_ms"] = self.log_flush_scheduler_interval_ms
        if self.delegation_token_secret_key is None and self.delegation_token_master_key is not None:
            resolved["delegation_token_secret_key"] = self.delegation_token_master_key  # Kafka's fallback
        if self.zookeeper_connection_timeout_ms is None:
            resolved["zookeeper_connection_timeout_ms"] = self.zookeeper_session_timeout_ms
        advertised = self.advertised_listeners if self.advertised_listeners is not None else self.listeners
        resolved["advertised_listeners"] = advertised
        if self.inter_broker_listener_name is None and self.security_inter_broker_protocol is not None:
            resolved["inter_broker_listener_name"] = self.security_inter_broker_protocol  # Kafka: the listener so named
        elif self.inter_broker_listener_name is None and advertised:
            names = [listener.name for listener in advertised]
            resolved["inter_broker_listener_name"] = "PLAINTEXT" if "PLAINTEXT" in names else names[0]
        for name, value in resolved.items():
            object.__setattr__(self, name, value)
        self._check_cross_key_rules()

    # listener name -> {key: (value, the key it came from)}: the listener.name.<listener>.* values, which
    # from_mapping sets (they are not keys of their own, so not fields: DescribeConfigs lists fields)
    listener_overrides: ClassVar[Mapping[str, Mapping[str, tuple[Any, str]]]] = MappingProxyType({})
    # the raw key -> value mapping the config was built from (from_mapping sets it): the dynamic
    # broker configs are laid over it (strom.server.dynamic_broker_config)
    originals: ClassVar[Mapping[str, str]] = MappingProxyType({})

    def _check_cross_key_rules(self) -> None:
        require(
            self.group_min_session_timeout_ms <= self.group_max_session_timeout_ms,
            "group.min.session.timeout.ms",
            f"{self.group_min_session_timeout_ms} exceeds "
            f"group.max.session.timeout.ms {self.group_max_session_timeout_ms}",
        )
        require(
            self.group_consumer_heartbeat_interval_ms < self.group_consumer_session_timeout_ms,
            "group.consumer.heartbeat.interval.ms",
            f"{self.group_consumer_heartbeat_interval_ms} must be less "
            f"than group.consumer.session.timeout.ms {self.group_consumer_session_timeout_ms}",
        )
        require(
            self.replica_fetch_wait_max_ms <= self.replica_socket_timeout_ms,
            "replica.socket.timeout.ms",
            f"{self.replica_socket_timeout_ms} is below "
            f"replica.fetch.wait.max.ms {self.replica_fetch_wait_max_ms}: fetches would time out",
        )
        require(
            self.replica_fetch_wait_max_ms <= self.replica_lag_time_max_ms,
            "replica.fetch.wait.max.ms",
            f"{self.replica_fetch_wait_max_ms} exceeds "
            f"replica.lag.time.max.ms {self.replica_lag_time_max_ms}: idle followers would leave the ISR",
        )
        require(
            self.log_cleaner_min_compaction_lag_ms <= self.log_cleaner_max_compaction_lag_ms,
            "log.cleaner.min.compaction.lag.ms",
            f"{self.log_cleaner_min_compaction_lag_ms} exceeds "
            f"log.cleaner.max.compaction.lag.ms {self.log_cleaner_max_compaction_lag_ms}",
        )
        require(
            self.iceberg_catalog_type != "rest" or self.iceberg_rest_catalog_uri is not None,
            "iceberg.rest.catalog.uri",
            "is required with iceberg.catalog.type=rest",
        )
        require(bool(self.log_dirs), "log.dirs", "at least one directory is required")
        require(bool(self.listeners), "listeners", "at least one listener is required")
        ports = [listener.port for listener in self.listeners if listener.port != 0]
        require(len(ports) == len(set(ports)), "listeners", "two listeners share a port")
        protocols = dict(self.listener_security_protocol_map)
        for listener in self.listeners:
            protocol = protocols.get(listener.name)
            require(
                protocol is not None, "listeners", f"listener {listener.name} is not in listener.security.protocol.map"
            )
        names = {listener.name for listener in self.listeners}
        for listener in self.advertised_listeners:
            require(listener.name in names, "advertised.listeners", f"{listener.name} is not in listeners")
            # As Kafka: clients cannot connect to a wildcard address, so it must not be published.
            require(
                listener.host not in ("0.0.0.0", "::"),
                "advertised.listeners",
                f"{listener} is not routable; advertise an address clients can reach",
            )
        require(
            self.security_inter_broker_protocol in (None, self.inter_broker_listener_name),
            "security.inter.broker.protocol",
            "set inter.broker.listener.name or security.inter.broker.protocol, not both",
        )
        require(
            self.advertised_listener(self.inter_broker_listener_name) is not None,
            "inter.broker.listener.name",
            f"{self.inter_broker_listener_name} is not an advertised listener",
        )

    # --- construction

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any]) -> BrokerConfig:
        """Kafka key -> raw value (strings as in server.properties); unknown keys are warned about."""
        values: dict[str, Any] = {}
        per_listener: dict[str, dict[str, tuple[Any, str]]] = {}
        for key, raw in mapping.items():
            spec = _FIELDS_BY_KEY.get(key)
            prefixed = _LISTENER_KEY.match(key) if spec is None else None
            if prefixed is not None:
                name, rest = prefixed.group(1).upper(), prefixed.group(2)
                base = _FIELDS_BY_KEY.get(rest)
                if base is not None and (rest.startswith(("ssl.", "sasl.")) or rest in LISTENER_LIMIT_KEYS):
                    per_listener.setdefault(name, {})[rest] = (base.metadata["parse"](key, raw), key)
                    continue
                if _JAAS_KEY.match(rest):
                    per_listener.setdefault(name, {})[rest.lower()] = (str(raw).strip(), key)
                    continue
                oauthbearer = _OAUTHBEARER_KEY.match(rest)
                if oauthbearer is not None:
                    inner_key = oauthbearer.group(1).lower()
                    inner = _FIELDS_BY_KEY.get(inner_key)
                    value = inner.metadata["parse"](key, raw) if inner is not None else str(raw).strip()
                    per_listener.setdefault(name, {})[f"oauthbearer.{inner_key}"] = (value, key)
                    continue
                if _REAUTH_KEY.match(rest):
                    per_listener.setdefault(name, {})[rest.lower()] = (long_range(0)(key, raw), key)
                    continue
            if spec is None:
                log.warning("%s: unknown broker config, ignored%s", key, did_you_mean(key, _FIELDS_BY_KEY))
                continue
            values[spec.name] = spec.metadata["parse"](key, raw)
            if spec.metadata["ignored"]:
                warn_ignored(key, str(raw).strip(), spec.metadata["ignored"])
        config = cls(**values)
        if per_listener:
            object.__setattr__(config, "listener_overrides", MappingProxyType(per_listener))
        object.__setattr__(config, "originals", MappingProxyType({key: str(raw) for key, raw in mapping.items()}))
        config.check_security()
        return config

    @classmethod
    def from_properties(cls, path: str | None, overrides: Mapping[str, str] | None = None) -> BrokerConfig:
        """server.properties at ``path`` (None: none), then ``overrides`` on top (e.g. --override)."""
        values = read_properties(path) if path is not None else {}
        values.update(overrides or {})
        return cls.from_mapping(values)

    # --- views

    def items(self) -> dict[str, str | None]:
        """Every key's effective value in Kafka's notation (None where Kafka reports null)."""
        return {
            f.metadata["key"]: None if f.metadata["sensitive"] else _to_text(getattr(self, f.name))
            for f in dataclasses.fields(self)
        }

    # --- per-listener views (listener.name.<listener>.*)

    def listener_setting(self, listener_name: str, key: str) -> tuple[Any, str]:
        """(value, key it came from): ``listener.name.<listener>.<key>`` if set, else the broker-wide key, as Kafka."""
        found = self.listener_overrides.get(listener_name, {}).get(key)
        if found is not None:
            return found
        return getattr(self, _FIELDS_BY_KEY[key].name), key

    def listener_limit(self, listener_name: str, key: str) -> int | None:
        """``listener.name.<listener>.<key>`` of LISTENER_LIMIT_KEYS, or None where it is not set."""
        found = self.listener_overrides.get(listener_name, {}).get(key)
        return int(found[0]) if found is not None else None

    def jaas_config(self, listener_name: str, mechanism: str) -> tuple[str, str] | None:
        """(text, key) of ``listener.name.<listener>.<mechanism>.sasl.jaas.config``, or None."""
        return self.listener_overrides.get(listener_name, {}).get(f"{mechanism.lower()}.sasl.jaas.config")

    def max_reauth_ms(self, listener_name: str, mechanism: str) -> int:
        """``listener.name.<l>.<mechanism>.connections.max.reauth.ms`` if set, else connections.max.reauth.ms."""
        found = self.listener_overrides.get(listener_name, {}).get(f"{mechanism.lower()}.connections.max.reauth.ms")
        return int(found[0]) if found is not None else self.connections_max_reauth_ms

    def sasl_mechanisms(self, listener_name: str) -> tuple[str, ...]:
        """The mechanisms a SASL listener offers: those of sasl.enabled.mechanisms that strom serves."""
        mechanisms, key = self.listener_setting(listener_name, "sasl.enabled.mechanisms")
        dropped = [m for m in mechanisms if m not in SASL_MECHANISMS]
        if dropped:
            warn_ignored(
                key,
                ",".join(mechanisms),
                f"strom serves {', '.join(SASL_MECHANISMS)}; {', '.join(dropped)} is not offered",
            )
        return tuple(m for m in mechanisms if m in SASL_MECHANISMS)

    def check_security(self) -> None:
        """What TLS and SASL listeners need, checked before anything is read from disk.

        Certificates themselves are loaded at startup (strom.security.tls), which names the key of
        a missing or unreadable file the same way.
        """
        from strom.security.jaas import PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE, parse_jaas

        for listener in self.listeners:
            name, protocol = listener.name, self.protocol_of(listener.name)
            prefix = f"listener.name.{name.lower()}."
            if protocol in ("SSL", "SASL_SSL"):
                chain = (
                    self.listener_setting(name, "ssl.keystore.location")[0]
                    or self.listener_setting(name, "ssl.keystore.certificate.chain")[0]
                )
                require(
                    bool(chain),
                    "ssl.keystore.location",
                    f"listener {name} uses {protocol} and needs a certificate: set ssl.keystore.location "
                    f"(or {prefix}ssl.keystore.location), or ssl.keystore.certificate.chain and ssl.keystore.key",
                )
            if not protocol.startswith("SASL"):
                continue
            mechanisms = self.sasl_mechanisms(name)
            require(
                bool(mechanisms),
                self.listener_setting(name, "sasl.enabled.mechanisms")[1],
                f"listener {name} uses {protocol} but offers none of {', '.join(SASL_MECHANISMS)}",
            )
            if "OAUTHBEARER" in mechanisms:
                from strom.security.oauthbearer import validator_for

                validator_for(self, name, read_files=False)  # JAAS options, validator class, JWKS URL
            for mechanism in mechanisms:
                if mechanism == "OAUTHBEARER":
                    continue
                found = self.jaas_config(name, mechanism)
                expected = PLAIN_LOGIN_MODULE if mechanism == "PLAIN" else SCRAM_LOGIN_MODULE
                if found is None:
                    require(
                        mechanism != "PLAIN",
                        f"{prefix}plain.sasl.jaas.config",
                        f'listener {name} offers PLAIN, whose users are the user_<name>="<password>" '
                        f"options of {PLAIN_LOGIN_MODULE}",
                    )
                    continue
                module = parse_jaas(found[1], found[0])
                require(
                    module.class_name == expected, found[1], f"{mechanism} needs {expected}, not {module.class_name}"
                )
        inter = self.inter_broker_listener_name
        if self.protocol_of(inter).startswith("SASL"):
            mechanism = self.sasl_mechanism_inter_broker_protocol
            require(
                mechanism != "OAUTHBEARER",
                "sasl.mechanism.inter.broker.protocol",
                "strom brokers log in to each other with PLAIN or SCRAM; OAUTHBEARER serves clients only",
            )
            require(
                mechanism in self.sasl_mechanisms(inter),
                "sasl.mechanism.inter.broker.protocol",
                f"{mechanism} is not offered by the inter-broker listener {inter} "
                f"({', '.join(self.sasl_mechanisms(inter)) or 'none'})",
            )
            found = self.jaas_config(inter, mechanism)
            key = f"listener.name.{inter.lower()}.{mechanism.lower()}.sasl.jaas.config"
            login = parse_jaas(found[1], found[0]) if found is not None else None
            require(
                login is not None and bool(login.options.get("username")) and login.options.get("password") is not None,
                key,
                "the inter-broker listener uses SASL: its login module needs the username and password "
                "this broker logs in to other brokers with",
            )


_FIELDS_BY_KEY: dict[str, dataclasses.Field] = {f.metadata["key"]: f for f in dataclasses.fields(BrokerConfig)}


def broker_field(key: str) -> dataclasses.Field | None:
    """The BrokerConfig field of a Kafka key, or None for a key strom has no field for."""
    return _FIELDS_BY_KEY.get(key)


def accepts_key(key: str) -> bool:
    """Whether ``from_mapping`` takes ``key``: a field's key, or a listener's value of a key it
    takes per listener (other keys it would warn about and ignore)."""
    if key in _FIELDS_BY_KEY:
        return True
    prefixed = _LISTENER_KEY.match(key)
    if prefixed is None:
        return False
    rest = prefixed.group(2)
    if rest in _FIELDS_BY_KEY:
        return rest.startswith(("ssl.", "sasl.")) or rest in LISTENER_LIMIT_KEYS
    return bool(_JAAS_KEY.match(rest) or _OAUTHBEARER_KEY.match(rest) or _REAUTH_KEY.match(rest))


def _to_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        # Listeners print as NAME://host:port, protocol map pairs as NAME:PROTOCOL.
        return ",".join(str(v) if isinstance(v, (str, Listener)) else ":".join(v) for v in value)
    return str(value)


def config_reference_markdown() -> str:
    """A Markdown table of every key, its default and meaning, for the README."""
    rows = ["| Key | Default | Meaning |", "| --- | --- | --- |"]
    for f in dataclasses.fields(BrokerConfig):
        default = _to_text(f.default)
        shown = "null" if default is None else default
        doc = f.metadata["doc"].replace("|", "\\|")
        rows.append(f"| `{f.metadata['key']}` | `{shown}` | {doc} |")
    return "\n".join(rows) + "\n"
