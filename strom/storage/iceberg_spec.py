"""The grammar of the topic config ``iceberg.partition.spec`` (Redpanda's ``redpanda.iceberg.partition.spec``).

It lives with the topic configs, below strom.iceberg, because a bad spec must be refused where
every topic config is checked (CreateTopics, AlterConfigs) with INVALID_CONFIG naming the key,
long before a translation round binds it to a table (strom.iceberg.partition_spec).

The syntax is Redpanda's, itself Iceberg SQL's ``PARTITIONED BY`` list: a parenthesised,
comma-separated list of fields, ``()`` for an unpartitioned table::

    (hour(kafka.timestamp))                 the default
    (day(kafka.timestamp), bucket(16, key))
    (kafka.partition)                       identity
    ()

A field is ``column`` (identity), ``identity|year|month|day|hour|void(column)`` or
``bucket|truncate(N, column)``; a column is a dotted path. ``redpanda.`` is accepted for
``kafka.`` (Redpanda's name of the record-metadata struct), so Redpanda's own specs work as given.

The record-metadata columns every strom table has (``kafka.*`` and ``key``) are checked here, with
the transforms their types take; other names (a schema mode's value columns, ``value``) can only be
checked against the table, by the translation round.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_PARTITION_SPEC = "(hour(kafka.timestamp))"

TIME_TRANSFORMS = ("year", "month", "day", "hour")
PLAIN_TRANSFORMS = ("identity", "void", *TIME_TRANSFORMS)
WIDTH_TRANSFORMS = ("bucket", "truncate")

# the columns every table has, and the transforms their types take (Iceberg's spec, "Partition Transforms")
_INTEGER = ("identity", "void", "bucket", "truncate")
KNOWN_COLUMNS: dict[str, tuple[str, ...]] = {
    "kafka.partition": _INTEGER,
    "kafka.offset": _INTEGER,
    "kafka.timestamp_type": _INTEGER,
    "kafka.timestamp": ("identity", "void", "bucket", *TIME_TRANSFORMS),
    "key": ("identity", "void", "bucket", "truncate"),
}

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_COLUMN = re.compile(rf"{_NAME}(?:\.{_NAME})*")
_CALL = re.compile(rf"({_NAME})\s*\(\s*(?:(\d+)\s*,\s*)?({_COLUMN.pattern})\s*\)")


@dataclass(frozen=True)
class SpecField:
    """One partition field: ``transform`` of ``column`` (``width``: bucket's N, truncate's W)."""

    transform: str
    column: str
    width: int | None = None

    def __str__(self) -> str:
        if self.width is not None:
            return f"{self.transform}({self.width}, {self.column})"
        return f"{self.transform}({self.column})"


class SpecError(ValueError):
    """A spec that does not parse, or names a transform a known column cannot take."""


def _split_fields(body: str) -> list[str]:
    """Split on the commas outside parentheses (``bucket(16, key)`` holds one)."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in body:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                raise SpecError("unbalanced parentheses")
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth != 0:
        raise SpecError("unbalanced parentheses")
    parts.append("".join(current))
    return parts


def _column(name: str) -> str:
    if name == "redpanda" or name.startswith("redpanda."):
        return "kafka" + name[len("redpanda") :]
    return name


def _field(text: str) -> SpecField:
    text = text.strip()
    if not text:
        raise SpecError("an empty field (two commas, or a comma at an end)")
    if _COLUMN.fullmatch(text):
        found = SpecField("identity", _column(text))
    else:
        call = _CALL.fullmatch(text)
        if call is None:
            raise SpecError(f"{text!r} is neither a column nor transform(column) nor bucket|truncate(N, column)")
        transform, width, column = call.group(1).lower(), call.group(2), _column(call.group(3))
        if transform in WIDTH_TRANSFORMS:
            if width is None:
                raise SpecError(f"{transform} takes a width first: {transform}(N, {column})")
            if int(width) < 1:
                raise SpecError(f"{transform}'s width must be at least 1, not {width}")
            found = SpecField(transform, column, int(width))
        elif transform in PLAIN_TRANSFORMS:
            if width is not None:
                raise SpecError(f"{transform} takes one argument, the column: {transform}({column})")
            found = SpecField(transform, column)
        else:
            known = ", ".join((*PLAIN_TRANSFORMS, *WIDTH_TRANSFORMS))
            raise SpecError(f"unknown transform {transform!r} (the transforms: {known})")
    if found.column.startswith("kafka.") and found.column not in KNOWN_COLUMNS:
        known = ", ".join(c for c in KNOWN_COLUMNS if c.startswith("kafka."))
        raise SpecError(f"no column {found.column!r} (the kafka struct's columns that partition: {known})")
    allowed = KNOWN_COLUMNS.get(found.column)
    if allowed is not None and found.transform not in allowed:
        raise SpecError(f"{found.column} cannot be partitioned by {found.transform} (it takes {', '.join(allowed)})")
    return found


def parse_partition_spec(text: str) -> tuple[SpecField, ...]:
    """The fields of a spec, in order; SpecError saying what is wrong otherwise."""
    body = text.strip()
    if body.startswith("(") and body.endswith(")"):
        body = body[1:-1]
    elif "(" not in body or not body.endswith(")"):
        raise SpecError("a spec is a parenthesised list, e.g. (hour(kafka.timestamp)) or ()")
    if not body.strip():
        return ()
    fields = tuple(_field(part) for part in _split_fields(body))
    seen: set[tuple[str, str]] = set()
    timed: dict[str, SpecField] = {}
    for field in fields:
        if (field.transform, field.column) in seen:
            raise SpecError(f"{field} is in the spec twice")
        seen.add((field.transform, field.column))
        if field.transform in TIME_TRANSFORMS:
            if field.column in timed:  # Iceberg's "redundant partition": hour already says the day
                raise SpecError(f"{timed[field.column]} and {field} partition one column by time twice")
            timed[field.column] = field
    return fields
