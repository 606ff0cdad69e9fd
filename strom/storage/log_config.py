"""Per-topic log settings: Kafka's topic-level config keys, their defaults and their validation.

A topic's effective config is the broker's defaults (``log.*`` keys in server.properties, see
``strom.server.config``) overlaid with the topic's own overrides (``retention.ms=...``). The
topic keys and their defaults are Kafka's, so ``kafka-configs``-style tools and users' muscle
memory carry over unchanged.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Mapping


class ConfigError(ValueError):
    """A config value is invalid; the message always names the key."""

    def __init__(self, key: str, message: str):
        super().__init__(f"{key}: {message}")
        self.key = key


COMPRESSION_TYPES = ("producer", "uncompressed", "none", "gzip", "snappy", "lz4", "zstd")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("delete", "compact")


def parse_int(key: str, raw: str, minimum: int | None = None, maximum: int | None = None) -> int:
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise ConfigError(key, f"expected an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ConfigError(key, f"value {value} is below the minimum {minimum}")
    if maximum is not None and value > maximum:
        raise ConfigError(key, f"value {value} is above the maximum {maximum}")
    return value


def parse_float(key: str, raw: str, minimum: float, maximum: float) -> float:
    try:
        value = float(str(raw).strip())
    except ValueError:
        raise ConfigError(key, f"expected a number, got {raw!r}") from None
    if not minimum <= value <= maximum:
        raise ConfigError(key, f"value {value} is outside [{minimum}, {maximum}]")
    return value


def parse_bool(key: str, raw: str) -> bool:
    text = str(raw).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ConfigError(key, f"expected true or false, got {raw!r}")


def parse_choice(key: str, raw: str, choices: tuple[str, ...]) -> str:
    text = str(raw).strip()
    if text not in choices:
        raise ConfigError(key, f"{raw!r} is not one of {', '.join(choices)}")
    return text


def parse_cleanup_policy(key: str, raw: str) -> tuple[str, ...]:
    parts = tuple(sorted({p.strip() for p in str(raw).split(",") if p.strip()}))
    if not parts or any(p not in CLEANUP_POLICIES for p in parts):
        raise ConfigError(key, f"{raw!r} must be delete, compact or compact,delete")
    return parts


INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1

# topic key -> (field name, parser). Parsers take (key, raw string).
_TOPIC_KEYS: dict[str, tuple[str, Callable[[str, str], Any]]] = {
    "segment.bytes": ("segment_bytes", lambda k, v: parse_int(k, v, 14, INT_MAX)),
    "segment.ms": ("segment_ms", lambda k, v: parse_int(k, v, 1)),
    "segment.jitter.ms": ("segment_jitter_ms", lambda k, v: parse_int(k, v, 0)),
    "segment.index.bytes": ("segment_index_bytes", lambda k, v: parse_int(k, v, 4, INT_MAX)),
    "index.interval.bytes": ("index_interval_bytes", lambda k, v: parse_int(k, v, 0, INT_MAX)),
    "retention.ms": ("retention_ms", lambda k, v: parse_int(k, v, -1)),
    "retention.bytes": ("retention_bytes", lambda k, v: parse_int(k, v)),
    "cleanup.policy": ("cleanup_policy", parse_cleanup_policy),
    "delete.retention.ms": ("delete_retention_ms", lambda k, v: parse_int(k, v, 0)),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", lambda k, v: parse_int(k, v, 0)),
    "max.compaction.lag.ms": ("max_compaction_lag_ms", lambda k, v: parse_int(k, v, 1)),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", lambda k, v: parse_float(k, v, 0.0, 1.0)),
    "max.message.bytes": ("max_message_bytes", lambda k, v: parse_int(k, v, 0, INT_MAX)),
    "message.timestamp.type": ("message_timestamp_type", lambda k, v: parse_choice(k, v, TIMESTAMP_TYPES)),
    "compression.type": ("compression_type", lambda k, v: parse_choice(k, v, COMPRESSION_TYPES)),
    "flush.messages": ("flush_messages", lambda k, v: parse_int(k, v, 1)),
    "flush.ms": ("flush_ms", lambda k, v: parse_int(k, v, 0)),
    "file.delete.delay.ms": ("file_delete_delay_ms", lambda k, v: parse_int(k, v, 0)),
    "min.insync.replicas": ("min_insync_replicas", lambda k, v: parse_int(k, v, 1)),
    "unclean.leader.election.enable": ("unclean_leader_election_enable", parse_bool),
    "preallocate": ("preallocate", parse_bool),
}


@dataclass(frozen=True)
class LogConfig:
    """The effective settings of one partition log. Defaults are Kafka's."""

    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    cleanup_policy: tuple[str, ...] = ("delete",)
    delete_retention_ms: int = 24 * 3600 * 1000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    max_message_bytes: int = 1024 * 1024 + 12
    message_timestamp_type: str = "CreateTime"
    compression_type: str = "producer"
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    file_delete_delay_ms: int = 60000
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    preallocate: bool = False

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @staticmethod
    def topic_keys() -> tuple[str, ...]:
        return tuple(_TOPIC_KEYS)

    @staticmethod
    def field_for_key(key: str) -> str:
        return _TOPIC_KEYS[key][0]

    def with_overrides(self, overrides: Mapping[str, str]) -> "LogConfig":
        """Overlay topic-level overrides (Kafka key -> string value); unknown keys are errors."""
        changes: dict[str, Any] = {}
        for key, raw in overrides.items():
            if key not in _TOPIC_KEYS:
                raise ConfigError(key, "unknown topic config")
            field, parser = _TOPIC_KEYS[key]
            changes[field] = parser(key, raw)
        return dataclasses.replace(self, **changes) if changes else self

    def to_topic_configs(self) -> dict[str, str]:
        """The effective value of every topic key, as strings in Kafka's notation."""
        out: dict[str, str] = {}
        for key, (field, _) in _TOPIC_KEYS.items():
            value = getattr(self, field)
            if isinstance(value, bool):
                out[key] = "true" if value else "false"
            elif isinstance(value, tuple):
                out[key] = ",".join(value)
            else:
                out[key] = str(value)
        return out
