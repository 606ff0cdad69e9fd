"""Compatibility levels, and which direction is checked against which versions.

A level names it for every schema type alike: BACKWARD (the new schema reads data written with
the latest version), FORWARD (the latest reads the new schema's data), FULL (both), each
against the latest live version or, with _TRANSITIVE, against every live version. What "reads"
means is the schema type's own ``read_problems(reader, writer)`` (strom.schemas.avro,
.json_schema, .protobuf).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)

Parsed = TypeVar("Parsed")


def problems(
    level: str, new: Parsed, previous: list[Parsed], read_problems: Callable[[Parsed, Parsed], list[str]]
) -> list[str]:
    """The problems of registering ``new`` under ``level``, given the live versions ``previous``
    (oldest first); empty when it may be registered."""
    if level == "NONE" or not previous:
        return []
    against = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    found: list[str] = []
    for old in reversed(against):
        if level.startswith(("BACKWARD", "FULL")):
            found += [f"BACKWARD {p}" for p in read_problems(new, old)]
        if level.startswith(("FORWARD", "FULL")):
            found += [f"FORWARD {p}" for p in read_problems(old, new)]
    return found
