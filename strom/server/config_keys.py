"""How a broker config key is declared: ``config_key(...)`` and the value parsers its fields share.

BrokerConfig (``strom.server.config``) is one frozen dataclass assembled from one class of keys per
area (``config_listeners``, ``config_security``, ``config_connections``, ``config_log``,
``config_replication``, ``config_coordinators``, ``config_services``). Each field carries its Kafka key,
parser, default and a one-line doc in its metadata, so the parser, DescribeConfigs and the generated
reference page read one table. A parser takes ``(key, raw string)`` and returns the typed value, or
raises ConfigError naming the key.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from strom.storage.log_config import INT_MAX, LONG_MAX, ConfigError, parse_choice, parse_float, parse_int

MINUTE_MS = 60 * 1000
HOUR_MS = 60 * MINUTE_MS

Parser = Callable[[str, str], Any]


def config_key(
    key: str, default: Any, parse: Parser, doc: str, ignored: str | None = None, sensitive: bool = False
) -> Any:
    """A BrokerConfig field for the Kafka key ``key``.

    ``ignored``: why a key Kafka accepts has no effect in strom (logged once when it is set).
    ``sensitive``: a secret (Kafka's PASSWORD type): DescribeConfigs reports it as null."""
    return dataclasses.field(
        default=default, metadata={"key": key, "parse": parse, "doc": doc, "ignored": ignored, "sensitive": sensitive}
    )


def int_range(minimum: int | None = None, maximum: int = INT_MAX) -> Parser:
    return lambda key, raw: parse_int(key, raw, minimum, maximum)


def long_range(minimum: int | None = None) -> Parser:
    """A 64-bit integer: DescribeConfigs reports such keys as LONG (``is_long``)."""
    return lambda key, raw: parse_int(key, raw, minimum, LONG_MAX)


def is_long(parse: Parser) -> bool:
    """Whether a field's parser is a ``long_range`` one (Kafka's LONG type rather than INT)."""
    return parse.__qualname__.startswith("long_range.")


def ratio(key: str, raw: str) -> float:
    return parse_float(key, raw, 0.0, 1.0)


def choice(*choices: str) -> Parser:
    return lambda key, raw: parse_choice(key, raw, choices)


def choice_int(*choices: int) -> Parser:
    def parse(key: str, raw: str) -> int:
        value = parse_int(key, raw)
        if value not in choices:
            raise ConfigError(key, f"{value} is not one of {', '.join(map(str, choices))}")
        return value

    return parse


def text(key: str, raw: str) -> str:
    value = str(raw).strip()
    if not value:
        raise ConfigError(key, "must not be empty")
    return value


def optional_text(key: str, raw: str) -> str | None:
    return str(raw).strip() or None


def upper_text(key: str, raw: str) -> str:
    """Non-empty text in upper case (listener names, SASL mechanisms, store types)."""
    return text(key, raw).upper()


def any_text(key: str, raw: str) -> str:
    return str(raw).strip()


def csv_list(key: str, raw: str) -> tuple[str, ...]:
    items = tuple(part.strip() for part in str(raw).split(",") if part.strip())
    if not items:
        raise ConfigError(key, "must list at least one value")
    return items


def optional_csv(key: str, raw: str) -> tuple[str, ...] | None:
    return tuple(part.strip() for part in str(raw).split(",") if part.strip()) or None


def semicolon_list(key: str, raw: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in str(raw).split(";") if part.strip())


def require(condition: bool, key: str, message: str) -> None:
    """A cross-key rule: ConfigError naming ``key`` when ``condition`` does not hold."""
    if not condition:
        raise ConfigError(key, message)
