"""BrokerConfig: the broker's settings, read from Kafka's server.properties keys with Kafka's defaults.

The dataclass below *is* the key table: each field carries its Kafka key, parser, default and a
one-line doc, so the parser, ``items()`` (DescribeConfigs) and ``config_reference_markdown()``
(the README) cannot drift apart. A field is named after its key (``log.retention.ms`` ->
``log_retention_ms``).

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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar, NamedTuple

from strom import KAFKA_VERSION
from strom.storage.log_config import (
    COMPRESSION_TYPES,
    INT_MAX,
    LONG_MAX,
    TIMESTAMP_TYPES,
    ConfigError,
    LogConfig,
    did_you_mean,
    parse_bool,
    parse_choice,
    parse_cleanup_policy,
    parse_compression_level,
    parse_float,
    parse_int,
    parse_metadata_version,
    warn_ignored,
)

log = logging.getLogger("strom.config")

MINUTE_MS = 60 * 1000
HOUR_MS = 60 * MINUTE_MS
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")  # GSSAPI is not served
# listener.name.<listener>.<key>: a per-listener value of an ssl.*/sasl.* key, or <mechanism>.sasl.jaas.config
_LISTENER_KEY = re.compile(r"^listener\.name\.([A-Za-z0-9_]+)\.(.+)$")
_JAAS_KEY = re.compile(r"^(plain|scram-sha-256|scram-sha-512|gssapi|oauthbearer)\.sasl\.jaas\.config$", re.I)
# listener.name.<listener>.oauthbearer.<key>: the OAUTHBEARER validator's settings (strom.security.oauthbearer)
_OAUTHBEARER_KEY = re.compile(r"^oauthbearer\.(sasl\.server\.callback\.handler\.class|sasl\.oauthbearer\..+)$", re.I)
_REAUTH_KEY = re.compile(
    r"^(plain|scram-sha-256|scram-sha-512|gssapi|oauthbearer)\.connections\.max\.reauth\.ms$", re.IGNORECASE
)

Parser = Callable[[str, str], Any]


class Listener(NamedTuple):
    name: str
    host: str  # "" binds every interface, as in Kafka
    port: int  # 0 picks a free port (tests)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


# --- value parsers: (key, raw string) -> typed value, raising ConfigError naming the key --------


def _int(minimum: int | None = None, maximum: int = INT_MAX) -> Parser:
    return lambda key, raw: parse_int(key, raw, minimum, maximum)


def _long(minimum: int | None = None) -> Parser:
    return lambda key, raw: parse_int(key, raw, minimum, LONG_MAX)


def _ratio(key: str, raw: str) -> float:
    return parse_float(key, raw, 0.0, 1.0)


def _choice(*choices: str) -> Parser:
    return lambda key, raw: parse_choice(key, raw, choices)


def _choice_int(*choices: int) -> Parser:
    def parse(key: str, raw: str) -> int:
        value = parse_int(key, raw)
        if value not in choices:
            raise ConfigError(key, f"{value} is not one of {', '.join(map(str, choices))}")
        return value

    return parse


def _text(key: str, raw: str) -> str:
    text = str(raw).strip()
    if not text:
        raise ConfigError(key, "must not be empty")
    return text


def _optional_text(key: str, raw: str) -> str | None:
    return str(raw).strip() or None


def _csv(key: str, raw: str) -> tuple[str, ...]:
    items = tuple(part.strip() for part in str(raw).split(",") if part.strip())
    if not items:
        raise ConfigError(key, "must list at least one value")
    return items


_LISTENER = re.compile(r"^([A-Za-z0-9_]+)://(\[[^\]]*\]|[^:/\[\]]*):(\d+)$")


def _listeners(key: str, raw: str) -> tuple[Listener, ...]:
    listeners: list[Listener] = []
    for item in _csv(key, raw):
        match = _LISTENER.match(item)
        if not match:
            raise ConfigError(key, f"{item!r} is not NAME://host:port")
        name, host, port = match.group(1).upper(), match.group(2).strip("[]"), int(match.group(3))
        if port > 65535:
            raise ConfigError(key, f"port {port} in {item!r} is above 65535")
        if any(other.name == name for other in listeners):
            raise ConfigError(key, f"listener name {name} appears twice")
        listeners.append(Listener(name, host, port))
    return tuple(listeners)


def _protocol_map(key: str, raw: str) -> tuple[tuple[str, str], ...]:
    pairs = []
    for item in _csv(key, raw):
        name, sep, protocol = item.partition(":")
        protocol = protocol.strip().upper()
        if not sep or not name.strip() or protocol not in SECURITY_PROTOCOLS:
            choices = ", ".join(SECURITY_PROTOCOLS)
            raise ConfigError(key, f"{item!r} is not NAME:PROTOCOL with PROTOCOL one of {choices}")
        pairs.append((name.strip().upper(), protocol))
    return tuple(pairs)


def _per_ip_overrides(key: str, raw: str) -> tuple[tuple[str, int], ...]:
    """``host-or-ip:count,...`` (an IPv6 address keeps its colons: the count is after the last)."""
    overrides: list[tuple[str, int]] = []
    if not str(raw).strip():
        return ()
    for item in _csv(key, raw):
        host, sep, count = item.rpartition(":")
        if not sep or not host.strip():
            raise ConfigError(key, f"{item!r} is not host:count")
        overrides.append((host.strip().strip("[]"), _int(0)(key, count.strip())))
    return tuple(overrides)


# listener.name.<listener>.<key> for these limits a listener's connections (strom.server.connection_limits)
LISTENER_LIMIT_KEYS = ("max.connections", "max.connection.creation.rate")


def _listener_name(key: str, raw: str) -> str:
    return _text(key, raw).upper()


def _consumer_assignors(key: str, raw: str) -> tuple[str, ...]:
    from strom.group.assignors import assignor_name

    names = _csv(key, raw)
    unknown = [n for n in names if assignor_name(n) is None]
    if unknown:
        raise ConfigError(key, f"unknown assignor {unknown[0]} (strom has uniform and range)")
    return names


def _require(condition: bool, key: str, message: str) -> None:
    if not condition:
        raise ConfigError(key, message)


def _key(key: str, default: Any, parse: Parser, doc: str, ignored: str | None = None, sensitive: bool = False) -> Any:
    """``ignored``: why a key Kafka accepts has no effect in strom (logged once when it is set).
    ``sensitive``: a secret (Kafka's PASSWORD type): DescribeConfigs reports it as null."""
    return dataclasses.field(
        default=default, metadata={"key": key, "parse": parse, "doc": doc, "ignored": ignored, "sensitive": sensitive}
    )


def _metrics_listener(key: str, raw: str) -> str | None:
    if not str(raw).strip():
        return None
    from strom.metrics.server import parse_listener

    parse_listener(key, str(raw))  # validated now; the broker parses it again when it binds
    return str(raw).strip()


def _schema_registry_listener(key: str, raw: str) -> str | None:
    if not str(raw).strip():
        return None
    from strom.server.schema_registry_http import parse_listener

    parse_listener(key, str(raw))  # validated now; the broker parses it again when it binds
    return str(raw).strip()


def _protocol(key: str, raw: str) -> str:
    return parse_choice(key, str(raw).strip().upper(), SECURITY_PROTOCOLS)


def _client_auth(key: str, raw: str) -> str:
    return parse_choice(key, str(raw).strip().lower(), ("none", "requested", "required"))


def _store_type(key: str, raw: str) -> str:
    return _text(key, raw).upper()


def _optional_csv(key: str, raw: str) -> tuple[str, ...] | None:
    return tuple(part.strip() for part in str(raw).split(",") if part.strip()) or None


def _mechanisms(key: str, raw: str) -> tuple[str, ...]:
    return tuple(m.upper() for m in _csv(key, raw))


def _mapping_rules(key: str, raw: str) -> str:
    from strom.security.principal import PrincipalMapper

    PrincipalMapper.parse(key, str(raw))  # fails here, naming the key, rather than at the first login
    return str(raw).strip()


def _any_text(key: str, raw: str) -> str:
    return str(raw).strip()


def _authorizer_class(key: str, raw: str) -> str | None:
    from strom.security.authorizer import AUTHORIZER_CLASS_NAMES

    name = str(raw).strip()
    if name and name not in AUTHORIZER_CLASS_NAMES:
        raise ConfigError(
            key, f"{name!r} is not an authorizer strom has; use one of {', '.join(AUTHORIZER_CLASS_NAMES)}"
        )
    return name or None


def _semicolon_list(key: str, raw: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in str(raw).split(";") if part.strip())


_DEFAULT_LISTENERS = (Listener("PLAINTEXT", "127.0.0.1", 9092),)
_DEFAULT_PROTOCOL_MAP = tuple((protocol, protocol) for protocol in SECURITY_PROTOCOLS)


@dataclass(frozen=True)
class BrokerConfig:
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

    # --- broker identity, listeners and metadata store
    broker_id: int = _key("broker.id", 0, _int(0), "Id of this broker, unique in the cluster (>= 0).")
    broker_rack: str | None = _key(
        "broker.rack", None, _optional_text, "Rack of this broker, used for rack-aware replica placement."
    )
    listeners: tuple[Listener, ...] = _key(
        "listeners",
        _DEFAULT_LISTENERS,
        _listeners,
        "Comma list of NAME://host:port to listen on; empty host binds every interface, port 0 picks a free port.",
    )
    advertised_listeners: tuple[Listener, ...] = _key(
        "advertised.listeners",
        None,
        _listeners,
        "Listeners published to clients and other brokers; null: same as listeners.",
    )
    listener_security_protocol_map: tuple[tuple[str, str], ...] = _key(
        "listener.security.protocol.map",
        _DEFAULT_PROTOCOL_MAP,
        _protocol_map,
        "NAME:PROTOCOL for each listener name (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL).",
    )
    inter_broker_listener_name: str = _key(
        "inter.broker.listener.name",
        None,
        _listener_name,
        "Listener brokers use to reach each other; null: security.inter.broker.protocol's listener if set, else PLAINTEXT if advertised, else the first one.",
    )
    security_inter_broker_protocol: str | None = _key(
        "security.inter.broker.protocol",
        None,
        _protocol,
        "Protocol brokers use to reach each other: the listener of that name (set this or inter.broker.listener.name, not both).",
    )
    zookeeper_connect: str | None = _key(
        "zookeeper.connect",
        None,
        _optional_text,
        "ZooKeeper connect string host:port[,host:port][/chroot]; null: the embedded single-node metadata store.",
    )
    zookeeper_session_timeout_ms: int = _key(
        "zookeeper.session.timeout.ms",
        18000,
        _int(1),
        "ZooKeeper session timeout; a broker silent this long loses its registration.",
    )
    zookeeper_connection_timeout_ms: int = _key(
        "zookeeper.connection.timeout.ms",
        None,
        _int(1),
        "Time a starting broker waits for ZooKeeper: for its session, and for each startup step while "
        "ZooKeeper drops its connection; null: zookeeper.session.timeout.ms.",
    )
    # --- security: TLS (listener.name.<listener>.ssl.* overrides a key for one listener)
    ssl_keystore_type: str = _key(
        "ssl.keystore.type", "PEM", _store_type, "Keystore format; strom reads PEM only (Kafka's default is JKS)."
    )
    ssl_keystore_location: str | None = _key(
        "ssl.keystore.location",
        None,
        _optional_text,
        "PEM file with the private key and certificate chain of TLS listeners.",
    )
    ssl_keystore_password: str | None = _key(
        "ssl.keystore.password",
        None,
        _optional_text,
        "Accepted for compatibility; a PEM key's password is ssl.key.password.",
        sensitive=True,
    )
    ssl_keystore_certificate_chain: str | None = _key(
        "ssl.keystore.certificate.chain",
        None,
        _optional_text,
        "The certificate chain inline, in PEM (instead of ssl.keystore.location).",
        sensitive=True,
    )
    ssl_keystore_key: str | None = _key(
        "ssl.keystore.key",
        None,
        _optional_text,
        "The private key inline, in PEM (with ssl.keystore.certificate.chain).",
        sensitive=True,
    )
    ssl_key_password: str | None = _key(
        "ssl.key.password", None, _optional_text, "Password of an encrypted private key.", sensitive=True
    )
    ssl_truststore_type: str = _key(
        "ssl.truststore.type", "PEM", _store_type, "Truststore format; strom reads PEM only (Kafka's default is JKS)."
    )
    ssl_truststore_location: str | None = _key(
        "ssl.truststore.location",
        None,
        _optional_text,
        "PEM file of CA certificates that client (and peer broker) certificates are checked against.",
    )
    ssl_truststore_password: str | None = _key(
        "ssl.truststore.password",
        None,
        _optional_text,
        "Accepted for compatibility; a PEM truststore has no password.",
        sensitive=True,
    )
    ssl_truststore_certificates: str | None = _key(
        "ssl.truststore.certificates",
        None,
        _optional_text,
        "CA certificates inline, in PEM (instead of ssl.truststore.location).",
        sensitive=True,
    )
    ssl_client_auth: str = _key(
        "ssl.client.auth",
        "none",
        _client_auth,
        "none, requested or required: whether TLS clients must present a certificate; its DN is then the principal.",
    )
    ssl_enabled_protocols: tuple[str, ...] = _key(
        "ssl.enabled.protocols", ("TLSv1.2", "TLSv1.3"), _csv, "TLS versions accepted."
    )
    ssl_protocol: str = _key(
        "ssl.protocol",
        "TLSv1.3",
        _text,
        "Accepted for compatibility: the highest of ssl.enabled.protocols both sides share is negotiated.",
    )
    ssl_cipher_suites: tuple[str, ...] | None = _key(
        "ssl.cipher.suites",
        None,
        _optional_csv,
        "Cipher suites allowed (IANA or OpenSSL names); null: OpenSSL's defaults.",
    )
    ssl_endpoint_identification_algorithm: str = _key(
        "ssl.endpoint.identification.algorithm",
        "https",
        _any_text,
        "https: a broker checks a peer broker's certificate names its host; empty: no check.",
    )
    ssl_principal_mapping_rules: str = _key(
        "ssl.principal.mapping.rules",
        "DEFAULT",
        _mapping_rules,
        "Rules from a client certificate's DN to a user name: RULE:pattern/replacement/[LU], ..., DEFAULT.",
    )
    # --- dynamic broker configs (KIP-226): how secrets set at run time are stored (strom.security.password_encoder)
    password_encoder_secret: str | None = _key(
        "password.encoder.secret",
        None,
        _optional_text,
        "Secret that encodes the secrets of dynamic broker configs in the metadata store; the same on every broker.",
        sensitive=True,
    )
    password_encoder_old_secret: str | None = _key(
        "password.encoder.old.secret",
        None,
        _optional_text,
        "The previous password.encoder.secret: stored secrets encoded with it are read, then re-encoded.",
        sensitive=True,
    )
    password_encoder_keyfactory_algorithm: str = _key(
        "password.encoder.keyfactory.algorithm",
        "PBKDF2WithHmacSHA512",
        _choice("PBKDF2WithHmacSHA512", "PBKDF2WithHmacSHA256", "PBKDF2WithHmacSHA1"),
        "Key derivation of the password encoder.",
    )
    password_encoder_cipher_algorithm: str = _key(
        "password.encoder.cipher.algorithm",
        "AES/CBC/PKCS5Padding",
        _choice("AES/CBC/PKCS5Padding"),
        "Cipher of the password encoder (strom has Kafka's default only).",
    )
    password_encoder_key_length: int = _key(
        "password.encoder.key.length", 128, _choice_int(128, 192, 256), "Key length of the password encoder, in bits."
    )
    password_encoder_iterations: int = _key(
        "password.encoder.iterations", 4096, _int(1024), "PBKDF2 iterations of the password encoder."
    )
    # --- security: SASL (listener.name.<listener>.<mechanism>.sasl.jaas.config holds the users)
    sasl_enabled_mechanisms: tuple[str, ...] = _key(
        "sasl.enabled.mechanisms",
        ("GSSAPI",),
        _mechanisms,
        "SASL mechanisms SASL listeners offer; strom serves PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER (others are dropped with a warning).",
    )
    sasl_mechanism_inter_broker_protocol: str = _key(
        "sasl.mechanism.inter.broker.protocol",
        "GSSAPI",
        _listener_name,
        "SASL mechanism brokers log in to each other with, when the inter-broker listener uses SASL.",
    )
    connections_max_reauth_ms: int = _key(
        "connections.max.reauth.ms",
        0,
        _long(0),
        "Lifetime of a SASL session (KIP-368): a client must re-authenticate within it or its connection is closed at its next request; 0: sessions last as long as their connection. Per listener and mechanism as in Kafka: listener.name.LISTENER.MECHANISM.connections.max.reauth.ms.",
    )
    # --- security: SASL/OAUTHBEARER's secured validator (KIP-768), per listener as listener.name.L.oauthbearer.KEY
    sasl_oauthbearer_jwks_endpoint_url: str | None = _key(
        "sasl.oauthbearer.jwks.endpoint.url",
        None,
        _optional_text,
        "JWKS (http, https or file URL) whose keys verify OAUTHBEARER tokens, with listener.name.L.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler.",
    )
    sasl_oauthbearer_jwks_endpoint_refresh_ms: int = _key(
        "sasl.oauthbearer.jwks.endpoint.refresh.ms",
        HOUR_MS,
        _long(1),
        "How often the JWKS is fetched again (sooner when a token names an unknown kid).",
    )
    sasl_oauthbearer_jwks_endpoint_retry_backoff_ms: int = _key(
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
        100,
        _long(0),
        "First wait before fetching the JWKS again after a failure; doubled per failure.",
    )
    sasl_oauthbearer_jwks_endpoint_retry_backoff_max_ms: int = _key(
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
        10000,
        _long(0),
        "Longest wait between failed JWKS fetches.",
    )
    sasl_oauthbearer_expected_audience: tuple[str, ...] | None = _key(
        "sasl.oauthbearer.expected.audience",
        None,
        _optional_csv,
        "Audiences (comma-separated) an OAUTHBEARER token's aud must name one of; unset: aud is not checked.",
    )
    sasl_oauthbearer_expected_issuer: str | None = _key(
        "sasl.oauthbearer.expected.issuer",
        None,
        _optional_text,
        "The iss an OAUTHBEARER token must carry; unset: iss is not checked.",
    )
    sasl_oauthbearer_sub_claim_name: str = _key(
        "sasl.oauthbearer.sub.claim.name",
        "sub",
        _text,
        "The claim whose value is the principal (User:<value>) of an OAUTHBEARER login.",
    )
    sasl_oauthbearer_scope_claim_name: str = _key(
        "sasl.oauthbearer.scope.claim.name", "scope", _text, "The claim holding an OAUTHBEARER token's scope."
    )
    sasl_oauthbearer_clock_skew_seconds: int = _key(
        "sasl.oauthbearer.clock.skew.seconds",
        30,
        _int(0),
        "How far the broker's clock may be from the token issuer's when exp and iat are checked.",
    )
    # --- security: authorization (ACLs in /kafka-acl, managed with strom acls)
    authorizer_class_name: str | None = _key(
        "authorizer.class.name",
        None,
        _authorizer_class,
        "The ACL authorizer (strom's, or Kafka's AclAuthorizer/StandardAuthorizer class names, which select it); empty: every request is allowed.",
    )
    super_users: tuple[str, ...] = _key(
        "super.users",
        (),
        _semicolon_list,
        "Semicolon list of principals (User:admin;User:broker) allowed everything; put the inter-broker principal here.",
    )
    allow_everyone_if_no_acl_found: bool = _key(
        "allow.everyone.if.no.acl.found",
        False,
        parse_bool,
        "Whether a resource no ACL names is open to everyone (with the authorizer on).",
    )
    # --- security: delegation tokens (KIP-48; strom.security.delegation_tokens)
    delegation_token_secret_key: str | None = _key(
        "delegation.token.secret.key",
        None,
        _optional_text,
        "Secret that signs delegation tokens (the same on every broker); unset: delegation tokens are disabled.",
        sensitive=True,
    )
    delegation_token_master_key: str | None = _key(
        "delegation.token.master.key",
        None,
        _optional_text,
        "The old name of delegation.token.secret.key, used when that is not set.",
        sensitive=True,
    )
    delegation_token_max_lifetime_ms: int = _key(
        "delegation.token.max.lifetime.ms",
        7 * 24 * HOUR_MS,
        _long(1),
        "Longest a delegation token can live, however often it is renewed.",
    )
    delegation_token_expiry_time_ms: int = _key(
        "delegation.token.expiry.time.ms",
        24 * HOUR_MS,
        _long(1),
        "How long a delegation token lives after creation or renewal unless renewed (its default renew period).",
    )
    delegation_token_expiry_check_interval_ms: int = _key(
        "delegation.token.expiry.check.interval.ms",
        HOUR_MS,
        _long(1),
        "How often expired delegation tokens are removed.",
    )
    # --- client quotas (producer_byte_rate, consumer_byte_rate, request_percentage under /config/users, /config/clients)
    quota_window_num: int = _key(
        "quota.window.num", 11, _int(1), "Number of samples a client's quota rate is measured over."
    )
    quota_window_size_seconds: int = _key(
        "quota.window.size.seconds", 1, _int(1), "Length of each quota sample, in seconds."
    )
    # --- network
    socket_request_max_bytes: int = _key(
        "socket.request.max.bytes",
        104857600,
        _int(1),
        "Largest request frame accepted; larger frames close the connection.",
    )
    socket_send_buffer_bytes: int = _key(
        "socket.send.buffer.bytes", 102400, _int(-1), "SO_SNDBUF of client sockets; -1: the OS default."
    )
    socket_receive_buffer_bytes: int = _key(
        "socket.receive.buffer.bytes", 102400, _int(-1), "SO_RCVBUF of client sockets; -1: the OS default."
    )
    connections_max_idle_ms: int = _key(
        "connections.max.idle.ms",
        600000,
        _long(),
        "A connection that sent nothing for this long and awaits no response is closed (0: never).",
    )
    max_connections: int = _key(
        "max.connections",
        INT_MAX,
        _int(0),
        "Most client connections the broker holds (the inter-broker listener is exempt; "
        "listener.name.L.max.connections limits one listener); one over it is closed at once.",
    )
    max_connections_per_ip: int = _key(
        "max.connections.per.ip",
        INT_MAX,
        _int(0),
        "Most connections one address may hold; one over it is closed at once.",
    )
    max_connections_per_ip_overrides: tuple[tuple[str, int], ...] = _key(
        "max.connections.per.ip.overrides",
        (),
        _per_ip_overrides,
        "Per-address exceptions to max.connections.per.ip: host-or-ip:count, comma-separated.",
    )
    max_connection_creation_rate: int = _key(
        "max.connection.creation.rate",
        INT_MAX,
        _int(0),
        "New connections per second the broker accepts (the inter-broker listener is exempt; "
        "listener.name.L.max.connection.creation.rate limits one listener); past it, new connections "
        "are served after the throttle time.",
    )
    num_network_threads: int = _key(
        "num.network.threads", 3, _int(1), "Accepted for compatibility, ignored: strom is one asyncio process."
    )
    num_io_threads: int = _key(
        "num.io.threads", 8, _int(1), "Accepted for compatibility, ignored: strom is one asyncio process."
    )
    background_threads: int = _key(
        "background.threads", 10, _int(1), "Accepted for compatibility, ignored: strom is one asyncio process."
    )
    # --- topics
    num_partitions: int = _key(
        "num.partitions", 1, _int(1), "Partitions of an auto-created topic or of a CreateTopics without a count."
    )
    default_replication_factor: int = _key(
        "default.replication.factor",
        1,
        _int(1),
        "Replication factor of auto-created topics and CreateTopics without one.",
    )
    auto_create_topics_enable: bool = _key(
        "auto.create.topics.enable", True, parse_bool, "Create a topic when a client asks for its metadata."
    )
    delete_topic_enable: bool = _key("delete.topic.enable", True, parse_bool, "Allow DeleteTopics.")
    max_request_partition_size_limit: int = _key(
        "max.request.partition.size.limit",
        2000,
        _int(1),
        "Most partitions one DescribeTopicPartitions response carries; the client pages for the rest.",
    )
    # --- log storage (log.* are the defaults of the topic-level keys, see log_config())
    log_dir: str = _key("log.dir", "./strom-data", _text, "Data directory, used when log.dirs is not set.")
    log_dirs: tuple[str, ...] = _key("log.dirs", None, _csv, "Comma list of data directories; null: log.dir.")
    num_recovery_threads_per_data_dir: int = _key(
        "num.recovery.threads.per.data.dir",
        1,
        _int(1),
        "Accepted for compatibility, ignored: strom is one asyncio process.",
    )
    message_max_bytes: int = _key(
        "message.max.bytes", 1048588, _int(0), "Largest record batch accepted (topic key max.message.bytes)."
    )
    log_segment_bytes: int = _key(
        "log.segment.bytes", 1073741824, _int(14), "Size at which a segment is rolled (segment.bytes)."
    )
    log_roll_ms: int = _key(
        "log.roll.ms", None, _long(1), "Age at which a segment is rolled (segment.ms); null: log.roll.hours."
    )
    log_roll_hours: int = _key(
        "log.roll.hours", 168, _int(1), "Age in hours at which a segment is rolled, if log.roll.ms is not set."
    )
    log_roll_jitter_ms: int = _key(
        "log.roll.jitter.ms",
        None,
        _long(0),
        "Random jitter subtracted from the roll age (segment.jitter.ms); null: log.roll.jitter.hours.",
    )
    log_roll_jitter_hours: int = _key(
        "log.roll.jitter.hours", 0, _int(0), "Roll jitter in hours, if log.roll.jitter.ms is not set."
    )
    log_retention_ms: int = _key(
        "log.retention.ms",
        None,
        _long(),
        "Age after which segments are deleted (retention.ms); -1: unlimited; null: minutes, else hours.",
    )
    log_retention_minutes: int | None = _key(
        "log.retention.minutes", None, _int(), "Retention in minutes, if log.retention.ms is not set."
    )
    log_retention_hours: int = _key(
        "log.retention.hours", 168, _int(), "Retention in hours, if neither log.retention.ms nor minutes is set."
    )
    log_retention_bytes: int = _key(
        "log.retention.bytes",
        -1,
        _long(),
        "Size per partition beyond which old segments are deleted (retention.bytes); -1: unlimited.",
    )
    log_retention_check_interval_ms: int = _key(
        "log.retention.check.interval.ms", 300000, _long(1), "How often retention is enforced."
    )
    log_index_interval_bytes: int = _key(
        "log.index.interval.bytes",
        4096,
        _int(0),
        "Bytes of log between two offset-index entries (index.interval.bytes).",
    )
    log_index_size_max_bytes: int = _key(
        "log.index.size.max.bytes",
        10485760,
        _int(4),
        "Maximum size of an index file; a full index rolls the segment (segment.index.bytes).",
    )
    log_preallocate: bool = _key(
        "log.preallocate",
        False,
        parse_bool,
        "Accepted and ignored (preallocate): segment files grow as they are written.",
        ignored="segment files grow as they are written",
    )
    log_flush_interval_messages: int = _key(
        "log.flush.interval.messages",
        LONG_MAX,
        _long(1),
        "Records appended before an fsync (flush.messages); default: leave it to the OS and replication.",
    )
    log_flush_interval_ms: int = _key(
        "log.flush.interval.ms",
        None,
        _long(0),
        "Age of unflushed data before an fsync (flush.ms); null: log.flush.scheduler.interval.ms.",
    )
    log_flush_scheduler_interval_ms: int = _key(
        "log.flush.scheduler.interval.ms", LONG_MAX, _long(0), "How often logs are checked for flushing."
    )
    log_flush_offset_checkpoint_interval_ms: int = _key(
        "log.flush.offset.checkpoint.interval.ms", 60000, _int(0), "How often the recovery-point checkpoint is written."
    )
    log_segment_delete_delay_ms: int = _key(
        "log.segment.delete.delay.ms",
        60000,
        _long(0),
        "Delay before a deleted segment's files are removed (file.delete.delay.ms).",
    )
    log_cleanup_policy: tuple[str, ...] = _key(
        "log.cleanup.policy", ("delete",), parse_cleanup_policy, "delete, compact or compact,delete (cleanup.policy)."
    )
    log_cleaner_enable: bool = _key(
        "log.cleaner.enable",
        True,
        parse_bool,
        "Run the log cleaner (needed for compacted topics such as __consumer_offsets).",
    )
    log_cleaner_backoff_ms: int = _key(
        "log.cleaner.backoff.ms", 15000, _long(0), "Sleep of the cleaner when there is nothing to clean."
    )
    log_cleaner_dedupe_buffer_size: int = _key(
        "log.cleaner.dedupe.buffer.size", 134217728, _long(), "Memory for the cleaner's key-to-offset map."
    )
    log_cleaner_delete_retention_ms: int = _key(
        "log.cleaner.delete.retention.ms",
        86400000,
        _long(0),
        "How long tombstones are kept in compacted topics (delete.retention.ms).",
    )
    log_cleaner_min_cleanable_ratio: float = _key(
        "log.cleaner.min.cleanable.ratio",
        0.5,
        _ratio,
        "Dirty ratio above which a log is compacted (min.cleanable.dirty.ratio).",
    )
    log_cleaner_min_compaction_lag_ms: int = _key(
        "log.cleaner.min.compaction.lag.ms",
        0,
        _long(0),
        "Minimum age of a record before it can be compacted (min.compaction.lag.ms).",
    )
    log_cleaner_max_compaction_lag_ms: int = _key(
        "log.cleaner.max.compaction.lag.ms",
        LONG_MAX,
        _long(1),
        "Maximum time a record stays uncompacted, whatever the dirty ratio (max.compaction.lag.ms).",
    )
    log_cleaner_threads: int = _key(
        "log.cleaner.threads",
        1,
        _int(0),
        "Cleaner processes (Kafka's threads; a process shares no GIL with the event loop), 0: no compaction.",
    )
    log_cleaner_io_max_bytes_per_second: float = _key(
        "log.cleaner.io.max.bytes.per.second",
        1.7976931348623157e308,
        lambda key, raw: parse_float(key, raw, 0.0, 1.7976931348623157e308),
        "Bytes per second the cleaner processes may read and write together (each gets an equal share).",
    )
    log_cleaner_io_buffer_size: int = _key(
        "log.cleaner.io.buffer.size",
        524288,
        _int(1),
        "Read buffer of a cleaner process (one chunk of a segment at a time).",
    )
    log_cleaner_io_buffer_load_factor: float = _key(
        "log.cleaner.io.buffer.load.factor",
        0.9,
        lambda key, raw: parse_float(key, raw, 0.01, 1.0),
        "Share of the dedupe buffer's slots filled before a cleaning stops early.",
    )
    log_message_timestamp_type: str = _key(
        "log.message.timestamp.type",
        "CreateTime",
        _choice(*TIMESTAMP_TYPES),
        "CreateTime or LogAppendTime (message.timestamp.type).",
    )
    log_message_timestamp_before_max_ms: int = _key(
        "log.message.timestamp.before.max.ms",
        LONG_MAX,
        _long(0),
        "How far a CreateTime may lie in the past (message.timestamp.before.max.ms).",
    )
    log_message_timestamp_after_max_ms: int = _key(
        "log.message.timestamp.after.max.ms",
        LONG_MAX,
        _long(0),
        "How far a CreateTime may lie in the future (message.timestamp.after.max.ms).",
    )
    log_message_timestamp_difference_max_ms: int = _key(
        "log.message.timestamp.difference.max.ms",
        LONG_MAX,
        _long(0),
        "Deprecated: both bounds where the two above are unset (message.timestamp.difference.max.ms).",
    )
    log_message_format_version: str = _key(
        "log.message.format.version",
        "3.0-IV1",
        parse_metadata_version,
        "Deprecated; accepted and ignored (message.format.version): strom writes only record batches (magic 2).",
        ignored="strom writes only record batches (magic 2)",
    )
    log_message_downconversion_enable: bool = _key(
        "log.message.downconversion.enable",
        True,
        parse_bool,
        "Deprecated; accepted and ignored (message.downconversion.enable): strom never down-converts.",
        ignored="strom stores and serves record batches (magic 2) only",
    )
    inter_broker_protocol_version: str = _key(
        "inter.broker.protocol.version",
        f"{KAFKA_VERSION}-IV0",
        parse_metadata_version,
        "Accepted and ignored: strom brokers speak one protocol.",
        ignored="strom brokers of one version speak one protocol",
    )
    log_local_retention_ms: int = _key(
        "log.local.retention.ms",
        -2,
        _long(-2),
        "Accepted and ignored (local.retention.ms): strom has no tiered storage.",
        ignored="strom has no tiered storage",
    )
    log_local_retention_bytes: int = _key(
        "log.local.retention.bytes",
        -2,
        _long(-2),
        "Accepted and ignored (local.retention.bytes): strom has no tiered storage.",
        ignored="strom has no tiered storage",
    )
    compression_type: str = _key(
        "compression.type", "producer", _choice(*COMPRESSION_TYPES), "Codec batches are stored with; producer: as sent."
    )
    compression_gzip_level: int = _key(
        "compression.gzip.level",
        -1,
        parse_compression_level("gzip"),
        "gzip level when strom recompresses: 1-9, -1 for zlib's default.",
    )
    compression_lz4_level: int = _key(
        "compression.lz4.level", 9, parse_compression_level("lz4"), "lz4 level when strom recompresses: 1-17."
    )
    compression_zstd_level: int = _key(
        "compression.zstd.level", 3, parse_compression_level("zstd"), "zstd level when strom recompresses: -131072-22."
    )
    min_insync_replicas: int = _key(
        "min.insync.replicas", 1, _int(1), "In-sync replicas an acks=all produce needs (min.insync.replicas)."
    )
    unclean_leader_election_enable: bool = _key(
        "unclean.leader.election.enable",
        False,
        parse_bool,
        "Allow an out-of-sync replica to become leader, losing data.",
    )
    # --- replication
    replica_lag_time_max_ms: int = _key(
        "replica.lag.time.max.ms", 30000, _long(1), "A follower not caught up for this long leaves the ISR."
    )
    replica_fetch_max_bytes: int = _key(
        "replica.fetch.max.bytes", 1048576, _int(0), "Bytes a follower asks for per partition."
    )
    replica_fetch_response_max_bytes: int = _key(
        "replica.fetch.response.max.bytes", 10485760, _int(0), "Bytes a follower asks for per fetch response."
    )
    replica_fetch_wait_max_ms: int = _key(
        "replica.fetch.wait.max.ms", 500, _int(0), "Longest a follower's fetch waits at the leader for data."
    )
    replica_fetch_min_bytes: int = _key("replica.fetch.min.bytes", 1, _int(1), "Bytes a follower's fetch waits for.")
    replica_fetch_backoff_ms: int = _key(
        "replica.fetch.backoff.ms", 1000, _int(0), "Sleep of a follower after a fetch error."
    )
    replica_socket_timeout_ms: int = _key(
        "replica.socket.timeout.ms", 30000, _int(1), "Socket timeout of follower fetches."
    )
    replica_high_watermark_checkpoint_interval_ms: int = _key(
        "replica.high.watermark.checkpoint.interval.ms", 5000, _long(1), "How often high watermarks are checkpointed."
    )
    num_replica_fetchers: int = _key("num.replica.fetchers", 1, _int(1), "Fetcher connections per source broker.")
    auto_leader_rebalance_enable: bool = _key(
        "auto.leader.rebalance.enable", True, parse_bool, "Move leadership back to preferred replicas."
    )
    leader_imbalance_check_interval_seconds: int = _key(
        "leader.imbalance.check.interval.seconds", 300, _long(1), "How often the controller checks leader balance."
    )
    leader_imbalance_per_broker_percentage: int = _key(
        "leader.imbalance.per.broker.percentage", 10, _int(0), "Imbalance per broker that triggers a rebalance."
    )
    metrics_listener: str | None = _key(
        "metrics.listener",
        None,
        _metrics_listener,
        "http://host:port of the Prometheus /metrics endpoint (port 0 picks a free one); null: not served.",
    )
    schema_registry_listeners: str | None = _key(
        "schema.registry.listeners",
        None,
        _schema_registry_listener,
        "strom's own: http://host:port or https://host:port (with the broker's ssl.keystore.* and "
        "ssl.truststore.* keys) of this broker's Schema Registry (Confluent's REST API, state in the "
        "compacted topic _schemas; port 0 picks a free one); null: not served.",
    )
    iceberg_enabled: bool = _key(
        "iceberg.enabled",
        False,
        parse_bool,
        "Iceberg topics (Redpanda's key): the leader of each partition of a topic with iceberg.mode=key_value "
        "writes its committed records to an Iceberg table, exactly once (strom.iceberg).",
    )
    iceberg_catalog_type: str = _key(
        "iceberg.catalog.type",
        "sql",
        _choice("sql"),
        "sql: an Iceberg SQL catalog through pyiceberg (iceberg.catalog.uri); rest is not implemented yet.",
    )
    iceberg_catalog_uri: str | None = _key(
        "iceberg.catalog.uri",
        None,
        _optional_text,
        "strom's own: the SQL catalog's SQLAlchemy URL (brokers of one cluster must share it); null: a SQLite "
        "file iceberg-catalog.db in the first log dir.",
    )
    iceberg_warehouse: str | None = _key(
        "iceberg.warehouse",
        None,
        _optional_text,
        "Where new tables' Parquet and metadata files go (a path or a URI pyiceberg's file IO takes); "
        "null: iceberg-warehouse beside the first log dir.",
    )
    iceberg_target_lag_ms: int = _key(
        "iceberg.target.lag.ms",
        60000,
        _long(1),
        "How often each partition's committed records are translated to its Iceberg table.",
    )
    iceberg_target_file_size_bytes: int = _key(
        "iceberg.target.file.size.bytes",
        536870912,
        _long(1),
        "Target size of the Parquet files a translation writes (the table's write.target-file-size-bytes).",
    )
    metrics_request_timing_samples_per_second: int = _key(
        "metrics.request.timing.samples.per.second",
        512,
        _int(0),
        "strom's own: about how many requests a second get the latency histograms and phase times "
        "(reading the clock costs 5-10% of a small Produce); above it they hold an even sample, the request "
        "counts stay exact. 0: time every request.",
    )
    controlled_shutdown_enable: bool = _key(
        "controlled.shutdown.enable", True, parse_bool, "Move leadership away before shutting down."
    )
    controlled_shutdown_max_retries: int = _key(
        "controlled.shutdown.max.retries", 3, _int(0), "Attempts of a controlled shutdown."
    )
    controlled_shutdown_retry_backoff_ms: int = _key(
        "controlled.shutdown.retry.backoff.ms", 5000, _long(0), "Sleep between controlled shutdown attempts."
    )
    # --- consumer groups and offsets
    group_initial_rebalance_delay_ms: int = _key(
        "group.initial.rebalance.delay.ms",
        3000,
        _int(0),
        "Wait for more members before the first rebalance of an empty group.",
    )
    group_min_session_timeout_ms: int = _key(
        "group.min.session.timeout.ms", 6000, _int(0), "Smallest session timeout a member may ask for."
    )
    group_max_session_timeout_ms: int = _key(
        "group.max.session.timeout.ms", 1800000, _int(0), "Largest session timeout a member may ask for."
    )
    group_max_size: int = _key("group.max.size", INT_MAX, _int(1), "Most members of one group.")
    group_consumer_session_timeout_ms: int = _key(
        "group.consumer.session.timeout.ms",
        45000,
        _int(1),
        "Consumer protocol (KIP-848): a member with no heartbeat for this long is removed.",
    )
    group_consumer_heartbeat_interval_ms: int = _key(
        "group.consumer.heartbeat.interval.ms",
        5000,
        _int(1),
        "Consumer protocol (KIP-848): how often members heartbeat.",
    )
    group_consumer_max_size: int = _key(
        "group.consumer.max.size", INT_MAX, _int(1), "Consumer protocol (KIP-848): most members of one group."
    )
    group_consumer_assignors: tuple[str, ...] = _key(
        "group.consumer.assignors",
        ("uniform", "range"),
        _consumer_assignors,
        "Consumer protocol (KIP-848) server assignors (uniform, range; Kafka's class "
        "names accepted); the first is the default.",
    )
    group_consumer_min_session_timeout_ms: int = _key(
        "group.consumer.min.session.timeout.ms",
        45000,
        _int(1),
        "Consumer protocol (KIP-848): the smallest consumer.session.timeout.ms a group may set.",
    )
    group_consumer_max_session_timeout_ms: int = _key(
        "group.consumer.max.session.timeout.ms",
        60000,
        _int(1),
        "Consumer protocol (KIP-848): the largest consumer.session.timeout.ms a group may set.",
    )
    group_consumer_min_heartbeat_interval_ms: int = _key(
        "group.consumer.min.heartbeat.interval.ms",
        5000,
        _int(1),
        "Consumer protocol (KIP-848): the smallest consumer.heartbeat.interval.ms a group may set.",
    )
    group_consumer_max_heartbeat_interval_ms: int = _key(
        "group.consumer.max.heartbeat.interval.ms",
        15000,
        _int(1),
        "Consumer protocol (KIP-848): the largest consumer.heartbeat.interval.ms a group may set.",
    )
    group_consumer_migration_policy: str = _key(
        "group.consumer.migration.policy",
        "bidirectional",
        _choice("bidirectional", "upgrade", "downgrade", "disabled"),
        "Online migration of live groups between the classic and the consumer protocol (upgrade: a "
        "consumer-protocol member joins a classic group; downgrade: the last one leaves).",
    )
    offsets_topic_num_partitions: int = _key(
        "offsets.topic.num.partitions", 50, _int(1), "Partitions of __consumer_offsets (fixed once created)."
    )
    offsets_topic_replication_factor: int = _key(
        "offsets.topic.replication.factor",
        3,
        _int(1),
        "Replication factor of __consumer_offsets; strom clamps it to the live brokers.",
    )
    offsets_topic_segment_bytes: int = _key(
        "offsets.topic.segment.bytes", 104857600, _int(1), "Segment size of __consumer_offsets."
    )
    offsets_retention_minutes: int = _key(
        "offsets.retention.minutes", 10080, _int(1), "Committed offsets of an empty group expire after this long."
    )
    offsets_retention_check_interval_ms: int = _key(
        "offsets.retention.check.interval.ms", 600000, _long(1), "How often expired offsets are removed."
    )
    offsets_commit_timeout_ms: int = _key(
        "offsets.commit.timeout.ms", 5000, _int(1), "Longest an offset commit waits for replication."
    )
    # --- transactions and idempotence
    transaction_max_timeout_ms: int = _key(
        "transaction.max.timeout.ms", 900000, _int(1), "Largest transaction timeout a producer may ask for."
    )
    transactional_id_expiration_ms: int = _key(
        "transactional.id.expiration.ms", 604800000, _int(1), "An idle transactional id expires after this long."
    )
    transaction_state_log_num_partitions: int = _key(
        "transaction.state.log.num.partitions", 50, _int(1), "Partitions of __transaction_state (fixed once created)."
    )
    transaction_state_log_replication_factor: int = _key(
        "transaction.state.log.replication.factor",
        3,
        _int(1),
        "Replication factor of __transaction_state; strom clamps it to the live brokers.",
    )
    transaction_state_log_min_isr: int = _key(
        "transaction.state.log.min.isr",
        2,
        _int(1),
        "min.insync.replicas of __transaction_state (clamped like its replication factor).",
    )
    transaction_state_log_segment_bytes: int = _key(
        "transaction.state.log.segment.bytes", 104857600, _int(1), "Segment size of __transaction_state."
    )
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = _key(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        10000,
        _int(1),
        "How often timed-out transactions are aborted.",
    )
    transaction_remove_expired_transaction_cleanup_interval_ms: int = _key(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        3600000,
        _int(1),
        "How often expired transactional ids are removed.",
    )
    producer_id_expiration_ms: int = _key(
        "producer.id.expiration.ms",
        86400000,
        _int(1),
        "Idempotence state of a silent producer id is dropped after this long.",
    )
    producer_id_expiration_check_interval_ms: int = _key(
        "producer.id.expiration.check.interval.ms", 600000, _int(1), "How often expired producer ids are removed."
    )
    # --- fetch
    # Kafka's default is 55 MiB. A response of 8 MiB keeps librdkafka's local queue below its
    # queued.min.messages (100,000 records) with 100-byte records; a larger one over many
    # partitions fills it and every partition waits out fetch.queue.backoff.ms (1 s).
    fetch_max_bytes: int = _key(
        "fetch.max.bytes", 8388608, _int(1024), "Largest fetch response the broker builds for a consumer."
    )
    max_incremental_fetch_session_cache_slots: int = _key(
        "max.incremental.fetch.session.cache.slots", 1000, _int(0), "Incremental fetch sessions kept by the broker."
    )
    min_incremental_fetch_session_eviction_ms: int = _key(
        "min.incremental.fetch.session.eviction.ms",
        120000,
        _int(0),
        "A fetch session this young is evicted from a full cache only by a follower's (Kafka's constant).",
    )

    def __post_init__(self) -> None:
        resolved: dict[str, Any] = {}
        if self.log_dirs is None:
            resolved["log_dirs"] = _csv("log.dir", self.log_dir)
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
        _require(
            self.group_min_session_timeout_ms <= self.group_max_session_timeout_ms,
            "group.min.session.timeout.ms",
            f"{self.group_min_session_timeout_ms} exceeds "
            f"group.max.session.timeout.ms {self.group_max_session_timeout_ms}",
        )
        _require(
            self.group_consumer_heartbeat_interval_ms < self.group_consumer_session_timeout_ms,
            "group.consumer.heartbeat.interval.ms",
            f"{self.group_consumer_heartbeat_interval_ms} must be less "
            f"than group.consumer.session.timeout.ms {self.group_consumer_session_timeout_ms}",
        )
        _require(
            self.replica_fetch_wait_max_ms <= self.replica_socket_timeout_ms,
            "replica.socket.timeout.ms",
            f"{self.replica_socket_timeout_ms} is below "
            f"replica.fetch.wait.max.ms {self.replica_fetch_wait_max_ms}: fetches would time out",
        )
        _require(
            self.replica_fetch_wait_max_ms <= self.replica_lag_time_max_ms,
            "replica.fetch.wait.max.ms",
            f"{self.replica_fetch_wait_max_ms} exceeds "
            f"replica.lag.time.max.ms {self.replica_lag_time_max_ms}: idle followers would leave the ISR",
        )
        _require(
            self.log_cleaner_min_compaction_lag_ms <= self.log_cleaner_max_compaction_lag_ms,
            "log.cleaner.min.compaction.lag.ms",
            f"{self.log_cleaner_min_compaction_lag_ms} exceeds "
            f"log.cleaner.max.compaction.lag.ms {self.log_cleaner_max_compaction_lag_ms}",
        )
        _require(bool(self.log_dirs), "log.dirs", "at least one directory is required")
        _require(bool(self.listeners), "listeners", "at least one listener is required")
        ports = [listener.port for listener in self.listeners if listener.port != 0]
        _require(len(ports) == len(set(ports)), "listeners", "two listeners share a port")
        protocols = dict(self.listener_security_protocol_map)
        for listener in self.listeners:
            protocol = protocols.get(listener.name)
            _require(
                protocol is not None, "listeners", f"listener {listener.name} is not in listener.security.protocol.map"
            )
        names = {listener.name for listener in self.listeners}
        for listener in self.advertised_listeners:
            _require(listener.name in names, "advertised.listeners", f"{listener.name} is not in listeners")
            # As Kafka: clients cannot connect to a wildcard address, so it must not be published.
            _require(
                listener.host not in ("0.0.0.0", "::"),
                "advertised.listeners",
                f"{listener} is not routable; advertise an address clients can reach",
            )
        _require(
            self.security_inter_broker_protocol in (None, self.inter_broker_listener_name),
            "security.inter.broker.protocol",
            "set inter.broker.listener.name or security.inter.broker.protocol, not both",
        )
        _require(
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
                    per_listener.setdefault(name, {})[rest.lower()] = (_long(0)(key, raw), key)
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

    def log_config(self) -> LogConfig:
        """The broker's log.* defaults as a topic LogConfig, before any topic's own overrides."""
        return LogConfig(
            segment_bytes=self.log_segment_bytes,
            segment_ms=self.log_roll_ms,
            segment_jitter_ms=self.log_roll_jitter_ms,
            segment_index_bytes=self.log_index_size_max_bytes,
            index_interval_bytes=self.log_index_interval_bytes,
            retention_ms=self.log_retention_ms,
            retention_bytes=self.log_retention_bytes,
            cleanup_policy=self.log_cleanup_policy,
            delete_retention_ms=self.log_cleaner_delete_retention_ms,
            min_compaction_lag_ms=self.log_cleaner_min_compaction_lag_ms,
            max_compaction_lag_ms=self.log_cleaner_max_compaction_lag_ms,
            min_cleanable_dirty_ratio=self.log_cleaner_min_cleanable_ratio,
            max_message_bytes=self.message_max_bytes,
            message_timestamp_type=self.log_message_timestamp_type,
            compression_type=self.compression_type,
            flush_messages=self.log_flush_interval_messages,
            flush_ms=self.log_flush_interval_ms,
            file_delete_delay_ms=self.log_segment_delete_delay_ms,
            min_insync_replicas=self.min_insync_replicas,
            unclean_leader_election_enable=self.unclean_leader_election_enable,
            preallocate=self.log_preallocate,
            compression_gzip_level=self.compression_gzip_level,
            compression_lz4_level=self.compression_lz4_level,
            compression_zstd_level=self.compression_zstd_level,
            message_format_version=self.log_message_format_version,
            message_timestamp_difference_max_ms=self.log_message_timestamp_difference_max_ms,
            message_timestamp_before_max_ms=self.log_message_timestamp_before_max_ms,
            message_timestamp_after_max_ms=self.log_message_timestamp_after_max_ms,
            message_downconversion_enable=self.log_message_downconversion_enable,
            local_retention_ms=self.log_local_retention_ms,
            local_retention_bytes=self.log_local_retention_bytes,
        )

    def advertised_listener(self, name: str) -> Listener | None:
        return next((listener for listener in self.advertised_listeners if listener.name == name), None)

    # --- security views

    def protocol_of(self, listener_name: str) -> str:
        """The security protocol of a listener (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)."""
        return dict(self.listener_security_protocol_map)[listener_name]

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
                _require(
                    bool(chain),
                    "ssl.keystore.location",
                    f"listener {name} uses {protocol} and needs a certificate: set ssl.keystore.location "
                    f"(or {prefix}ssl.keystore.location), or ssl.keystore.certificate.chain and ssl.keystore.key",
                )
            if not protocol.startswith("SASL"):
                continue
            mechanisms = self.sasl_mechanisms(name)
            _require(
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
                    _require(
                        mechanism != "PLAIN",
                        f"{prefix}plain.sasl.jaas.config",
                        f'listener {name} offers PLAIN, whose users are the user_<name>="<password>" '
                        f"options of {PLAIN_LOGIN_MODULE}",
                    )
                    continue
                module = parse_jaas(found[1], found[0])
                _require(
                    module.class_name == expected, found[1], f"{mechanism} needs {expected}, not {module.class_name}"
                )
        inter = self.inter_broker_listener_name
        if self.protocol_of(inter).startswith("SASL"):
            mechanism = self.sasl_mechanism_inter_broker_protocol
            _require(
                mechanism != "OAUTHBEARER",
                "sasl.mechanism.inter.broker.protocol",
                "strom brokers log in to each other with PLAIN or SCRAM; OAUTHBEARER serves clients only",
            )
            _require(
                mechanism in self.sasl_mechanisms(inter),
                "sasl.mechanism.inter.broker.protocol",
                f"{mechanism} is not offered by the inter-broker listener {inter} "
                f"({', '.join(self.sasl_mechanisms(inter)) or 'none'})",
            )
            found = self.jaas_config(inter, mechanism)
            key = f"listener.name.{inter.lower()}.{mechanism.lower()}.sasl.jaas.config"
            login = parse_jaas(found[1], found[0]) if found is not None else None
            _require(
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


# --- Java .properties -------------------------------------------------------------------------

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.DOTALL)
_NEWLINE = re.compile(r"\r\n|\r|\n")
_BLANK = " \t\f"


def read_properties(path: str) -> dict[str, str]:
    """Read a .properties file (UTF-8; Java reads ISO-8859-1, identical for ASCII files)."""
    with open(path, encoding="utf-8") as f:
        return parse_properties(f.read())


def parse_properties(text: str) -> dict[str, str]:
    """Java Properties.load rules: #/! comments, key=value, key: value or key value, a trailing
    odd backslash continues the line (leading blanks of the next line dropped), backslash
    escapes; values are trimmed as Kafka trims them. A later duplicate key wins."""
    props: dict[str, str] = {}
    lines = _NEWLINE.split(text)
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(_BLANK)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line):
            line = line[:-1]
            if i < len(lines):
                line += lines[i].lstrip(_BLANK)
                i += 1
        key, value = _split_property(line)
        props[key] = value
    return props


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split_property(line: str) -> tuple[str, str]:
    end = 0
    while end < len(line) and line[end] not in "=:" + _BLANK:
        end += 2 if line[end] == "\\" else 1
    end = min(end, len(line))
    rest = line[end:].lstrip(_BLANK)
    if rest[:1] in ("=", ":"):
        rest = rest[1:]
    return _unescape(line[:end]), _unescape(rest).strip()


def _unescape(text: str) -> str:
    def replace(match: re.Match) -> str:
        code = match.group(1)
        if len(code) == 5:
            return chr(int(code[1:], 16))
        return _ESCAPES.get(code, code)

    return _ESCAPE.sub(replace, text)
