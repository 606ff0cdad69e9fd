"""A topic's ``iceberg.partition.spec`` bound to its table: the pyiceberg PartitionSpec a new table
is made with, and the spec evolution that brings an existing table to a spec the topic was altered to.

The grammar is checked where topic configs are (strom.storage.iceberg_spec); here the columns are
resolved against the table's schema. A field whose column the table does not have (yet: a schema
mode's value column before the first record of its schema) or whose type the transform cannot take
is left out of the table's spec and reported, so translation never stops over a partition spec;
the next round adds it once the column is there.

Fields are compared by (source column id, transform), not by name, so that tables made before the
spec was configurable (``hour(kafka.timestamp)`` named ``kafka_hour``) stay as they are.
"""

from __future__ import annotations

from typing import Any

from strom.storage.iceberg_spec import SpecField, parse_partition_spec

FIRST_PARTITION_FIELD_ID = 1000  # Iceberg's: partition field ids start after the schema's


def _transform(field: SpecField) -> Any:
    from pyiceberg.transforms import (
        BucketTransform,
        DayTransform,
        HourTransform,
        IdentityTransform,
        MonthTransform,
        TruncateTransform,
        VoidTransform,
        YearTransform,
    )

    if field.transform == "bucket" and field.width is not None:
        return BucketTransform(num_buckets=field.width)
    if field.transform == "truncate" and field.width is not None:
        return TruncateTransform(width=field.width)
    plain = {
        "identity": IdentityTransform,
        "void": VoidTransform,
        "year": YearTransform,
        "month": MonthTransform,
        "day": DayTransform,
        "hour": HourTransform,
    }
    return plain[field.transform]()


def field_name(field: SpecField) -> str:
    """``kafka_hour`` (the name tables had before the spec was configurable), ``kafka_day``...,
    ``key_bucket_16``, ``name_trunc_4``; identity keeps the column's name (dots as underscores)."""
    base = field.column.replace(".", "_")
    if field.column == "kafka.timestamp" and field.transform in ("year", "month", "day", "hour"):
        return f"kafka_{field.transform}"
    if field.transform == "identity":
        return base
    if field.transform == "bucket":
        return f"{base}_bucket_{field.width}"
    if field.transform == "truncate":
        return f"{base}_trunc_{field.width}"
    return f"{base}_{field.transform}"


def resolve(schema: Any, text: str) -> tuple[list[tuple[int, Any, str]], list[str]]:
    """(source id, transform, name) of each field of spec ``text`` the schema can take, and why the others cannot."""
    wanted, problems = [], []
    for field in parse_partition_spec(text):
        try:
            source = schema.find_field(field.column)
        except ValueError:
            problems.append(f"{field}: the table has no column {field.column}")
            continue
        transform = _transform(field)
        if not transform.can_transform(source.field_type):
            problems.append(f"{field}: {field.transform} cannot take {field.column}'s type {source.field_type}")
            continue
        wanted.append((source.field_id, transform, field_name(field)))
    return wanted, problems


def build(schema: Any, text: str) -> tuple[Any, list[str]]:
    """The PartitionSpec a new table is made with, and the fields left out with why."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec

    wanted, problems = resolve(schema, text)
    fields = [
        PartitionField(source_id=source, field_id=FIRST_PARTITION_FIELD_ID + i, transform=transform, name=name)
        for i, (source, transform, name) in enumerate(wanted)
    ]
    return PartitionSpec(*fields), problems


def _key(source_id: int, transform: Any) -> tuple[int, str]:
    return source_id, str(transform)


def evolve(table: Any, text: str) -> list[str]:
    """Bring the table's current spec to ``text`` (pyiceberg's update_spec: fields removed and
    added, so files written before keep their spec); returns the fields left out with why. A
    CommitFailedException (another broker changed the table first) goes up: the round plans again."""
    wanted, problems = resolve(table.schema(), text)
    current = {_key(f.source_id, f.transform): f for f in table.spec().fields}
    target = {_key(source, transform): (source, transform, name) for source, transform, name in wanted}
    if set(current) == set(target):
        return problems
    schema = table.schema()
    with table.update_spec() as update:
        for key, field in current.items():
            if key not in target:
                update.remove_field(field.name)
        for key, (source, transform, name) in target.items():
            if key not in current:
                update.add_field(schema.find_column_name(source), transform, name)
    return problems
