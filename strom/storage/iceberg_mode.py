"""The grammar of the topic config ``iceberg.mode`` (Redpanda's ``redpanda.iceberg.mode``).

It lives with the topic configs, below strom.iceberg, for the reason the partition spec's does:
a bad value is refused where every topic config is checked (CreateTopics, AlterConfigs, with
INVALID_CONFIG naming the key), not found by a translation round later.

A mode is one of ``disabled``, ``key_value``, ``value_schema_id_prefix`` and
``value_schema_latest``; the last takes Redpanda's options after a colon, comma-separated, each
at most once and in any order::

    value_schema_latest:subject=orders-v2
    value_schema_latest:subject=people,protobuf_name=shop.Person

``subject`` names the subject whose latest version gives the table's columns (default
``<topic>-value``, the TopicNameStrategy subject); ``protobuf_name`` is the fully qualified name
of the message of a Protobuf schema every record is read as (default: the message of the same
full name as the one the record's message indexes name). An unknown option, an empty value or an
option on another mode is refused, as Redpanda refuses it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MODES = ("disabled", "key_value", "value_schema_id_prefix", "value_schema_latest")
OPTIONS = ("subject", "protobuf_name")
LATEST = "value_schema_latest"
_MESSAGE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


@dataclass(frozen=True)
class IcebergMode:
    name: str
    subject: str = ""  # value_schema_latest: the subject instead of <topic>-value
    protobuf_name: str = ""  # value_schema_latest: the Protobuf message every record is read as

    def __str__(self) -> str:
        options = [
            f"{key}={value}" for key, value in (("subject", self.subject), ("protobuf_name", self.protobuf_name))
        ]
        given = [option for option in options if not option.endswith("=")]
        return f"{self.name}:{','.join(given)}" if given else self.name


def parse_mode(raw: str) -> IcebergMode:
    """The mode and its options; ValueError saying what is wrong."""
    text = str(raw).strip()
    name, colon, rest = text.partition(":")
    name = name.strip()
    if name not in MODES:
        raise ValueError(f"{raw!r} is not one of {', '.join(MODES)} (value_schema_latest may take options)")
    if not colon:
        return IcebergMode(name)
    if name != LATEST:
        raise ValueError(f"{raw!r}: only value_schema_latest takes options, {name} takes none")
    found: dict[str, str] = {}
    for option in rest.split(","):
        key, equals, value = (part.strip() for part in option.partition("="))
        if key not in OPTIONS or not equals:
            raise ValueError(
                f"{raw!r}: {option.strip()!r} is no option of value_schema_latest (subject=, protobuf_name=)"
            )
        if not value:
            raise ValueError(f"{raw!r}: the option {key} has an empty value")
        if key in found:
            raise ValueError(f"{raw!r}: the option {key} is given twice")
        found[key] = value
    protobuf_name = found.get("protobuf_name", "")
    if protobuf_name and not _MESSAGE_NAME.fullmatch(protobuf_name):
        raise ValueError(f"{raw!r}: protobuf_name {protobuf_name!r} is no Protobuf message name (package.Message)")
    return IcebergMode(name, found.get("subject", ""), protobuf_name)


def mode_name(mode: str) -> str:
    """The mode of a config value already checked, without its options."""
    return mode.partition(":")[0].strip()
