"""Shared pieces of the client tools: ``key=value`` options, Java ``.properties`` files, errors.

The tools talk to brokers through confluent-kafka (librdkafka). Its configuration keys are mostly
Kafka's own (``bootstrap.servers``, ``acks``, ``linger.ms``, ``compression.type``, ``security.protocol``,
``sasl.*``), so a Kafka ``--producer.config`` or ``--command-config`` file usually works unchanged.
Java-only keys that make no sense for librdkafka (the serializer classes) are dropped, not rejected,
so that the same files can be shared with Kafka's own scripts.
"""

from __future__ import annotations

import re
import sys

# Keys of Kafka's Java clients that librdkafka has no equivalent for and that only name Java classes.
JAVA_ONLY_KEYS = frozenset({
    "key.serializer", "value.serializer", "key.deserializer", "value.deserializer",
    "partitioner.class", "interceptor.classes",
})


class ToolError(Exception):
    """A user-facing failure: printed as one line on stderr, exit code 1."""


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


def client_config(bootstrap: str | None, config_file: str | None = None,
                  overrides: dict[str, str] | None = None, **defaults: str) -> dict[str, str]:
    """Build a librdkafka configuration: defaults < properties file < ``--*-property`` overrides < bootstrap."""
    # librdkafka logs informational lines (e.g. purged background events) on stderr; keep errors only.
    config: dict[str, str] = {"log_level": "3", **defaults}
    if config_file:
        config.update(load_properties(config_file))
    config.update(overrides or {})
    if bootstrap:
        config["bootstrap.servers"] = bootstrap
    if not config.get("bootstrap.servers"):
        raise ToolError("Missing required argument \"[bootstrap-server]\"")
    for key in JAVA_ONLY_KEYS:
        config.pop(key, None)
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
