"""Shared pieces of the client tools: ``key=value`` options, Java ``.properties`` files, errors.

The tools talk to brokers through confluent-kafka (librdkafka). Its configuration keys are mostly
Kafka's own (``bootstrap.servers``, ``acks``, ``linger.ms``, ``compression.type``, ``security.protocol``,
``sasl.*``), so a Kafka ``--producer.config`` or ``--command-config`` file usually works unchanged.
Java-only keys that make no sense for librdkafka (the serializer classes) are dropped, not rejected,
so that the same files can be shared with Kafka's own scripts.

librdkafka's own log goes through Python logging (the ``strom.librdkafka`` logger, WARNING and up on
stderr). While no broker answers, librdkafka retries every few hundred milliseconds and logs each
failed attempt; those lines are held back, and a tool either fails with one line naming the bootstrap
servers (``ensure_reachable``) or, once it has been connected, says once per broker that it lost it.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys

# Keys of Kafka's Java clients that librdkafka has no equivalent for and that only name Java classes.
JAVA_ONLY_KEYS = frozenset(
    {
        "key.serializer",
        "value.serializer",
        "key.deserializer",
        "value.deserializer",
        "partitioner.class",
        "interceptor.classes",
    }
)


DEFAULT_TIMEOUT_MS = 10_000
CLIENT_LOGGER = "strom.librdkafka"
# librdkafka log facilities that report a broker connection's state: a down broker repeats them
# a few times a second, so they are remembered here rather than printed.
_CONNECTION_FACILITIES = frozenset({"FAIL", "REQTMOUT"})
_CONNECTION_LINE = re.compile(
    r"^(?:\[thrd:[^\]]*\]: )?(?P<broker>\S+:\d+/\w+): (?P<reason>.*?)"
    r"(?: \(after \d+ms in state \w+[^)]*\))?$"
)
_UNREACHABLE = frozenset({"_TRANSPORT", "_TIMED_OUT", "_ALL_BROKERS_DOWN", "_RESOLVE"})


class ToolError(Exception):
    """A user-facing failure: printed as one line on stderr, exit code 1."""


class _ConnectionLog(logging.Filter):
    """Holds back librdkafka's connection failures instead of printing each retry.

    Before the tool has reached the cluster they are silent and the last one is kept
    (``ensure_reachable`` makes it the tool's error); after, the first failure of each broker is let
    through once, reworded, and plain disconnects (idle connections, a broker shutting down) stay silent.
    """

    def __init__(self) -> None:
        super().__init__()
        self.said: set[str] = set()
        self.connected = False
        self.last: str | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        if len(args) != 3 or args[0] not in _CONNECTION_FACILITIES:
            return True  # confluent-kafka logs (facility, client name, text)
        match = _CONNECTION_LINE.match(str(args[2]))
        if match is None:  # a logical broker ("GroupCoordinator: host:port: ..."): the real one says it
            return False
        broker, reason = match["broker"], match["reason"]
        self.last = reason
        if not self.connected or broker in self.said or reason.startswith("Disconnected"):
            return False
        self.said.add(broker)
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        record.msg, record.args = "cannot reach broker %s: %s (retrying; said once)", (broker, reason)
        return True


class _StderrHandler(logging.Handler):
    """Writes to whatever ``sys.stderr`` is at the time, or to ``write`` when a tool set one."""

    write = None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            write = self.write or sys.stderr.write
            write(self.format(record) + "\n")
        except Exception:  # logging must never take a tool down
            self.handleError(record)


_connection_log = _ConnectionLog()
_handler = _StderrHandler()


def client_logger() -> logging.Logger:
    """The logger librdkafka's lines go to; configured on first use (WARNING, one line each, stderr)."""
    logger = logging.getLogger(CLIENT_LOGGER)
    if _connection_log not in logger.filters:
        _handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
        logger.addHandler(_handler)
        logger.addFilter(_connection_log)
        logger.setLevel(logging.WARNING)
        logger.propagate = False
    return logger


def send_client_log_to(write) -> None:
    """Where librdkafka's lines go from now on: ``write(line)``, or stderr again with None.

    For a tool that owns the terminal (the demo's live table), so that a line does not tear it.
    """
    client_logger()
    _handler.write = write


def logging_config() -> dict:
    """The librdkafka settings that route its log through ``client_logger()``."""
    return {"logger": client_logger(), "log_level": "4"}


def add_timeout_argument(
    parser: argparse.ArgumentParser, flag: str = "--timeout", default_ms: int = DEFAULT_TIMEOUT_MS
) -> None:
    parser.add_argument(
        flag,
        type=int,
        default=default_ms,
        metavar="MS",
        help=f"give up when the cluster does not answer within this many ms (default {default_ms})",
    )


def ensure_reachable(client, bootstrap: str, timeout_s: float) -> None:
    """Fetch metadata once, or fail with one line naming the servers and the last connection error.

    Any client works (AdminClient, Producer, Consumer before it subscribes): ``poll(0)`` only serves
    the log lines queued meanwhile, so that the reason is known and the retries stay unprinted.
    """
    from confluent_kafka import KafkaException

    try:
        client.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        if error_name(exc) not in _UNREACHABLE:
            raise
        client.poll(0)
        reason = _connection_log.last
        raise ToolError(
            f"cannot reach the bootstrap servers {bootstrap} within {timeout_s:g} s" + (f": {reason}" if reason else "")
        ) from None
    client.poll(0)
    _connection_log.connected = True


def watermark_offsets(consumer, partition, timeout_s: float) -> tuple[int, int]:
    """``consumer.get_watermark_offsets``, asked again while a new leader catches up.

    Right after an election the leader answers OFFSET_NOT_AVAILABLE until its followers have
    fetched (KIP-207: its high watermark is below the start of its epoch), and librdkafka hands
    that to the caller instead of asking again. Other errors, and the last one at the deadline,
    are raised.
    """
    import time

    from confluent_kafka import KafkaError, KafkaException

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return consumer.get_watermark_offsets(partition, timeout=max(0.1, deadline - time.monotonic()))
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.OFFSET_NOT_AVAILABLE or time.monotonic() >= deadline:
                raise
        time.sleep(0.1)


def parse_key_values(items: list[str] | None, what: str = "property") -> dict[str, str]:
    """``["a=1", "b=x=y"]`` -> ``{"a": "1", "b": "x=y"}`` (split at the first ``=``, as Kafka does)."""
    result: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ToolError(f"Invalid {what} '{item}': expected key=value")
        result[key.strip()] = value  # not stripped: separators such as " | " are values too
    return result


def load_properties(path: str) -> dict[str, str]:
    """A Java ``.properties`` file: ``key=value``, ``key: value`` or ``key value``; ``#``/``!`` comments;
    a line ending in an odd number of backslashes continues on the next line."""
    try:
        with open(path, encoding="utf-8") as handle:
            raw_lines = handle.read().splitlines()
    except OSError as exc:
        raise ToolError(f"Cannot read properties file {path}: {exc.strerror or exc}") from exc
    props: dict[str, str] = {}
    logical = ""
    for raw in raw_lines:
        line = raw.strip() if not logical else raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if (len(line) - len(line.rstrip("\\"))) % 2 == 1:
            logical += line[:-1]
            continue
        logical += line
        match = re.match(r"((?:\\.|[^=:\s\\])+)\s*[=:]?\s*(.*)$", logical)
        if match:
            props[re.sub(r"\\(.)", r"\1", match.group(1))] = match.group(2).strip()
        logical = ""
    return props


def client_config(
    bootstrap: str | None, config_file: str | None = None, overrides: dict[str, str] | None = None, **defaults: str
) -> dict:
    """Build a librdkafka configuration: defaults < properties file < ``--*-property`` overrides < bootstrap."""
    config: dict = {**logging_config(), **defaults}
    if config_file:
        config.update(load_properties(config_file))
    config.update(overrides or {})
    if bootstrap:
        config["bootstrap.servers"] = bootstrap
    if not config.get("bootstrap.servers"):
        raise ToolError('Missing required argument "[bootstrap-server]"')
    return from_java_keys(config)


_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def from_java_keys(config: dict) -> dict:
    """The Java client's security keys as librdkafka's, so that a Kafka properties file works unchanged.

    ``sasl.jaas.config`` (PLAIN and SCRAM login modules) becomes ``sasl.username``/``sasl.password``;
    a PEM ``ssl.truststore.location`` becomes ``ssl.ca.location`` and a PEM ``ssl.keystore.location``
    the certificate and key; an empty ``ssl.endpoint.identification.algorithm`` is librdkafka's
    ``none``. librdkafka cannot read JKS stores: those are refused with a message saying so.
    """
    for key in JAVA_ONLY_KEYS:
        config.pop(key, None)
    jaas = config.pop("sasl.jaas.config", None)
    if jaas:
        if "GSSAPI" in jaas.upper() or "Krb5LoginModule" in jaas:
            raise ToolError("sasl.jaas.config with Kerberos is not supported; use PLAIN or SCRAM")
        options = {k: v.replace('\\"', '"') for k, v in _JAAS_OPTION.findall(jaas)}
        if "username" in options:
            config.setdefault("sasl.username", options["username"])
        if "password" in options:
            config.setdefault("sasl.password", options["password"])
    truststore = config.pop("ssl.truststore.location", None)
    truststore_type = str(config.pop("ssl.truststore.type", "PEM" if truststore else "")).upper()
    config.pop("ssl.truststore.password", None)
    if truststore:
        if truststore_type not in ("PEM", ""):
            raise ToolError(
                f"ssl.truststore.type={truststore_type} cannot be read by librdkafka; "
                "give a PEM file as ssl.truststore.location (or ssl.ca.location)"
            )
        config.setdefault("ssl.ca.location", truststore)
    keystore_type = str(config.pop("ssl.keystore.type", "")).upper()
    if keystore_type == "PEM" and config.get("ssl.keystore.location"):
        keystore = config.pop("ssl.keystore.location")
        config.setdefault("ssl.certificate.location", keystore)
        config.setdefault("ssl.key.location", keystore)
    elif keystore_type == "JKS":
        raise ToolError("ssl.keystore.type=JKS cannot be read by librdkafka; use PEM or PKCS12")
    if config.get("ssl.endpoint.identification.algorithm") == "":
        config["ssl.endpoint.identification.algorithm"] = "none"
    return config


def error_text(exc: BaseException) -> str:
    """The message of a confluent-kafka exception (its KafkaError's text), or of any other exception."""
    from confluent_kafka import KafkaError, KafkaException

    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0].str()
    if isinstance(exc, KafkaError):
        return exc.str()
    return str(exc) or type(exc).__name__


def error_name(exc: BaseException) -> str | None:
    """The error code name (``TOPIC_ALREADY_EXISTS``) of a confluent-kafka exception, else None."""
    from confluent_kafka import KafkaError, KafkaException

    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0].name()
    if isinstance(exc, KafkaError):
        return exc.name()
    return None


def fail(prefix: str, message: str) -> int:
    print(f"{prefix}{message}", file=sys.stderr)
    return 1


def exits_quietly_on_broken_pipe(run):
    """Decorate a tool's ``run``: when stdout's reader goes away (``| head``), stop without a traceback."""
    import functools
    import os

    @functools.wraps(run)
    def wrapper(args):
        try:
            return run(args)
        except BrokenPipeError:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
            return 1

    return wrapper


def add_command_config_argument(parser: argparse.ArgumentParser, help_text: str = "client properties file") -> None:
    parser.add_argument(
        "--command-config", metavar="FILE", help=f"{help_text} (Kafka's: security.protocol, sasl.*, ssl.*, ...)"
    )


def command_properties(path: str | None) -> dict[str, str]:
    """The --command-config file's properties (none without one), in librdkafka's keys (``from_java_keys``)."""
    return from_java_keys(load_properties(path)) if path else {}


def client_security(props: dict[str, str]):
    """strom's own client security (``strom.security.client.ClientSecurity``) from client properties
    already in librdkafka's keys (``command_properties``), for the requests librdkafka has no API
    for; None for PLAINTEXT."""
    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    if protocol == "PLAINTEXT":
        return None
    import ssl

    from strom.security.client import ClientSecurity

    context = None
    if protocol in ("SSL", "SASL_SSL"):
        try:
            context = ssl.create_default_context(cafile=props.get("ssl.ca.location"))
            if props.get("ssl.certificate.location") and props.get("ssl.key.location"):
                context.load_cert_chain(
                    props["ssl.certificate.location"], props["ssl.key.location"], props.get("ssl.key.password")
                )
        except (OSError, ssl.SSLError) as exc:
            raise ToolError(f"Cannot load the TLS settings of the client properties: {exc}") from None
        if props.get("ssl.endpoint.identification.algorithm", "https").lower() in ("", "none"):
            context.check_hostname = False
    mechanism = None
    username, password = props.get("sasl.username", ""), props.get("sasl.password", "")
    if protocol.startswith("SASL"):
        mechanism = (props.get("sasl.mechanism") or props.get("sasl.mechanisms") or "GSSAPI").upper()
        if mechanism not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
            raise ToolError(f"sasl.mechanism {mechanism} is not supported (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)")
    return ClientSecurity(context, mechanism, username, password)


def bootstrap_broker_client(bootstrap_server: str, timeout_s: float, props: dict[str, str], client_id: str):
    """strom's own client connection (``strom.replication.client.BrokerClient``) to the first
    --bootstrap-server, for the requests librdkafka has no API for (delegation tokens, features);
    TLS and SASL from the client properties (``command_properties``)."""
    from strom.replication.client import BrokerClient

    host, _, port = bootstrap_server.split(",")[0].strip().rpartition(":")
    if not host or not port.isdigit():
        raise ToolError(f"Invalid bootstrap server {bootstrap_server!r}: expected HOST:PORT")
    return BrokerClient(
        host.strip("[]"), int(port), props.get("client.id", client_id), timeout_s, client_security(props)
    )
