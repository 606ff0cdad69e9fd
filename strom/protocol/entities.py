"""Build kio messages of any version from plain dicts, so one handler serves every version.

kio has a separate dataclass per API version (and per nested entity); fields come and go
between versions. ``build(cls, values)`` keeps the keys ``cls`` has, fills the ones it lacks
with the Kafka zero value, converts milliseconds to the timedeltas kio uses and builds nested
entities from nested dicts. ``field_value(obj, name, default)`` reads a request field that older
versions may not have.
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
import uuid
from collections.abc import Mapping
from functools import cache
from typing import Any, cast

from kio.schema.errors import ErrorCode as KioErrorCode

_MISSING = dataclasses.MISSING
ZERO_UUID = uuid.UUID(int=0)


@dataclasses.dataclass(frozen=True, slots=True)
class _FieldPlan:
    name: str
    kind: str  # entity, entities, timedelta, datetime, error, int, str, bool, bytes, uuid, float, other
    nested: type | None
    nullable: bool
    has_default: bool


def _classify(tp: Any) -> tuple[str, type | None, bool]:
    nullable = False
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        nullable = len(args) < len(typing.get_args(tp))
        tp = args[0]
        origin = typing.get_origin(tp)
    if origin is tuple:
        item = typing.get_args(tp)[0]
        if dataclasses.is_dataclass(item):  # a field's type: the class, never an instance
            return "entities", cast(type, item), nullable
        return "tuple", None, nullable
    if dataclasses.is_dataclass(tp):
        return "entity", cast(type, tp), nullable
    if isinstance(tp, type):
        if issubclass(tp, KioErrorCode):
            return "error", None, nullable
        if issubclass(tp, datetime.timedelta):
            return "timedelta", None, nullable
        if issubclass(tp, datetime.datetime):
            return "datetime", None, nullable
        if issubclass(tp, bool):
            return "bool", None, nullable
        if issubclass(tp, int):
            return "int", None, nullable
        if issubclass(tp, str):
            return "str", None, nullable
        if issubclass(tp, bytes):
            return "bytes", None, nullable
        if issubclass(tp, uuid.UUID):
            return "uuid", None, nullable
        if issubclass(tp, float):
            return "float", None, nullable
    return "other", None, nullable


@cache
def _plan(cls: type) -> tuple[_FieldPlan, ...]:
    plans: list[_FieldPlan] = []
    for f in dataclasses.fields(cls):
        kind, nested, nullable = _classify(f.type)
        has_default = f.default is not _MISSING or f.default_factory is not _MISSING
        plans.append(_FieldPlan(f.name, kind, nested, nullable, has_default))
    return tuple(plans)


_ZERO = {"int": 0, "str": "", "bool": False, "bytes": b"", "tuple": (), "entities": (), "float": 0.0, "uuid": ZERO_UUID}


def _convert(plan: _FieldPlan, value: Any) -> Any:
    if value is None:
        return None
    kind = plan.kind
    # entity kinds always have a nested class
    if kind == "entities":
        nested = cast(type, plan.nested)
        return tuple(build(nested, v) if isinstance(v, Mapping) else v for v in value)
    if kind == "entity":
        return build(cast(type, plan.nested), value) if isinstance(value, Mapping) else value
    if kind == "timedelta" and not isinstance(value, datetime.timedelta):
        return datetime.timedelta(milliseconds=int(value))
    if kind == "datetime" and not isinstance(value, datetime.datetime):
        return datetime.datetime.fromtimestamp(int(value) / 1000, datetime.UTC)
    if kind == "error" and not isinstance(value, KioErrorCode):
        return KioErrorCode(int(value))
    if kind == "tuple" and not isinstance(value, tuple):
        return tuple(value)
    return value


def _zero(plan: _FieldPlan) -> Any:
    if plan.nullable:
        return None
    if plan.kind == "timedelta":
        return datetime.timedelta(0)
    if plan.kind == "error":
        return KioErrorCode.none
    if plan.kind == "entity":
        return build(cast(type, plan.nested), {})
    return _ZERO.get(plan.kind)


def build(cls: type, values: Mapping[str, Any]) -> Any:
    kwargs = {}
    for plan in _plan(cls):
        if plan.name in values:
            kwargs[plan.name] = _convert(plan, values[plan.name])
        elif not plan.has_default:
            kwargs[plan.name] = _zero(plan)
    return cls(**kwargs)


def field_value(obj: Any, name: str, default: Any = None) -> Any:
    """A field of a decoded request, or ``default`` when this version does not have it."""
    return getattr(obj, name, default)


def millis(value: Any) -> int:
    """kio gives durations as timedeltas; handlers think in Kafka's milliseconds."""
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    return int(value)
