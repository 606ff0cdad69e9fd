"""JSON Schema schemas (schemaType JSON): parsing, the canonical text, and compatibility.

A schema is checked against its draft's metaschema with the ``jsonschema`` library (the draft
its ``$schema`` names; draft 7 when it names none, as Confluent's registry assumes), so a schema
that ``jsonschema`` cannot validate documents with is refused. The canonical text is the JSON
without insignificant whitespace, key order kept (Confluent stores Jackson's rendering of it);
``normalize=true`` also sorts keys.

Compatibility follows Confluent's JSON Schema rules, written here (no library checks them): a
new schema is BACKWARD compatible when every document the old one accepts, the new one accepts
too (``read_problems(reader=new, writer=old)``), FORWARD the other way round. Checked:

- ``type``: the reader may accept more types (``integer`` read as ``number``: TYPE_EXTENDED) but
  not fewer (TYPE_NARROWED) or others (TYPE_CHANGED); ``true``/``{}`` accepts everything,
  ``false`` nothing;
- objects: a property the writer allows but the reader's closed content model
  (``additionalProperties: false``) lacks is PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL, unless
  the reader's ``patternProperties`` reads it; a property the reader adds to an open content
  model is PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL (the writer's documents may carry it with any
  value), unless the writer's ``patternProperties`` or ``additionalProperties`` schema is one the
  property's schema reads, or the property accepts anything; a property added to a closed model,
  or removed where the writer had it ``false``, is fine; a property on both sides is checked
  recursively; a property of the reader's ``properties`` that it requires and the writer did not is
  REQUIRED_ATTRIBUTE_ADDED (fine with a ``default``); closing an open model is
  ADDITIONAL_PROPERTIES_REMOVED;
- arrays by ``items``, tuples (``prefixItems``, draft 7's list ``items``) position by position,
  ``additionalItems`` as it is; ``enum`` values the writer allows must stay (ENUM_ARRAY_NARROWED);
  ``const`` must not change; a ``not`` added, or one that refuses less, is a problem;
- bounds may widen but not narrow: ``maxLength``/``maximum``/``exclusiveMaximum``/``maxItems``/
  ``maxProperties`` added or lowered, their minimum twins added or raised, ``pattern`` added or
  changed, ``multipleOf`` added or changed to a step that does not divide the old one,
  ``uniqueItems`` added, and ``dependentRequired``/``dependencies``/``dependentSchemas`` added or
  changed are problems;
- ``anyOf``/``oneOf``: each writer branch must be read by some reader branch (adding a branch is
  fine, removing one is not); ``allOf``: each reader branch must read the writer, one of the
  writer's ``allOf`` branches, or every branch of its ``anyOf``/``oneOf``;
- ``$ref`` is followed, once per pair (recursion): local ones (``#/definitions/x``,
  ``#/$defs/x``), and ones to another document (``address.json#/...``) into the schema the
  reference of that name holds (its own local refs resolving in it);
- ``format`` as ``pattern``: added (FORMAT_ADDED) or changed (FORMAT_CHANGED) is a problem, removed
  is not. Confluent's diff does not compare ``format`` (its string rules are maxLength, minLength
  and pattern), but its Java serializers assert formats, so a reader that adds one refuses
  documents the writer accepted;
- ``if``/``then``/``else``, which Confluent's diff does not compare either: a writer document must
  pass the reader's branch its condition picks. With the writer's ``if`` the same, the reader's
  branch must read the writer's branch or the rest of the writer (CONDITIONAL_BRANCH_NARROWED
  otherwise); with another condition or none, each branch the reader has must read the writer
  (CONDITIONAL_ADDED_OR_CHANGED); a branch's ``required`` names of the surrounding properties are
  REQUIRED_ATTRIBUTE_ADDED unless the writer requires them there or they have a default. A
  conditional removed, ``if`` alone and ``then``/``else`` without ``if`` are fine.

Run (outside the test suite) against the 205 draft 7 and 2020-12 cases of Confluent's JSON
Schema diff examples, the verdicts agree on every one (none has ``format`` or ``if``). A ``$ref`` to
a document no reference names is taken to accept anything.
``patternProperties`` patterns are matched with RE2 (linear time; one it cannot compile is left out).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from jsonschema import validators
from jsonschema.exceptions import SchemaError

from strom.schemas import compatibility

_DRAFT7 = "http://json-schema.org/draft-07/schema#"
_TYPES = ("null", "boolean", "object", "array", "number", "string", "integer")
_UPPER = ("maxLength", "maximum", "exclusiveMaximum", "maxItems", "maxProperties")
_LOWER = ("minLength", "minimum", "exclusiveMinimum", "minItems", "minProperties")


class InvalidSchemaError(ValueError):
    pass


class ParsedJson:
    """A parsed schema: the decoded JSON (a dict, or a boolean schema), and the documents its
    references name (reference name -> decoded JSON), where a ``$ref`` to another document leads."""

    def __init__(self, schema: Any, documents: dict[str, Any] | None = None):
        self.schema = schema
        self.documents = documents or {}


def parse(text: str, referenced: Iterable[tuple[str, str]] = ()) -> tuple[ParsedJson, str]:
    """(the parsed schema, its canonical text), or InvalidSchemaError saying why; ``referenced``
    are (name, text) of the schemas its references name."""
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise InvalidSchemaError(f"Invalid schema: not JSON: {exc}") from None
    if not isinstance(raw, (dict, bool)):
        raise InvalidSchemaError("Invalid schema: a JSON Schema is an object or a boolean")
    documents = {}
    for name, other in referenced:
        try:
            documents[name] = json.loads(other)
        except ValueError as exc:
            raise InvalidSchemaError(f"Invalid schema: the referenced schema {name} is not JSON: {exc}") from None
    try:
        default = validators.validator_for({"$schema": _DRAFT7})
        cls = validators.validator_for(raw, default=default) if isinstance(raw, dict) else default
        cls.check_schema(raw)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "(root)"
        raise InvalidSchemaError(f"Invalid schema: at {where}: {exc.message}") from None
    except Exception as exc:  # a malformed $schema, a metaschema that cannot be built
        raise InvalidSchemaError(f"Invalid schema: {exc}") from None
    return ParsedJson(raw, documents), json.dumps(raw, separators=(",", ":"), ensure_ascii=False)


def normalized(text: str) -> str:
    """``normalize=true``: keys sorted, so that schemas that differ only in key order are one."""
    return json.dumps(json.loads(text), separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def _types(schema: dict[str, Any]) -> set[str] | None:
    """The types a schema allows (None: any); ``integer`` is inside ``number``."""
    kind = schema.get("type")
    if kind is None:
        return None
    return {kind} if isinstance(kind, str) else {k for k in kind if isinstance(k, str)}


def _allows(types: set[str] | None, kind: str) -> bool:
    return types is None or kind in types or (kind == "integer" and "number" in types)


class _Side:
    """One side of a check: the document a local ``$ref`` resolves in, and the referenced ones."""

    def __init__(self, root: Any, documents: dict[str, Any]):
        self.root = root
        self.documents = documents

    def deref(self, schema: Any) -> tuple[Any, _Side]:
        """The schema a ``$ref`` leads to (followed in a chain, bounded), and the side whose root
        its own local refs resolve in; an unknown target accepts anything."""
        side = self
        for _ in range(32):
            if not isinstance(schema, dict) or not isinstance(schema.get("$ref"), str):
                return schema, side
            name, _, fragment = schema["$ref"].partition("#")
            if name:  # another document: a reference, by its name or the name's last segment
                found = side.documents.get(name)
                if found is None:
                    found = next((d for n, d in side.documents.items() if n.rsplit("/", 1)[-1] == name), None)
                if found is None:
                    return True, side
                side = _Side(found, side.documents)
            node = side.root
            for part in [p for p in fragment.split("/") if p]:
                part = part.replace("~1", "/").replace("~0", "~")
                if isinstance(node, dict) and part in node:
                    node = node[part]
                elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                    node = node[int(part)]
                else:
                    return True, side
            schema = node
        return schema, side


class _Checker:
    def __init__(self, reader: _Side, writer: _Side):
        self.reader_side = reader
        self.writer_side = writer
        self.seen: set[tuple[int, int]] = set()
        # schemas made during the check (the writer less its allOf): kept alive, so that no later
        # one gets the id of one in ``seen`` and is taken for a pair already checked
        self.made: list[dict] = []

    def check(self, reader: Any, writer: Any, path: str) -> list[str]:
        reader, r_side = self.reader_side.deref(reader)
        writer, w_side = self.writer_side.deref(writer)
        saved = self.reader_side, self.writer_side
        self.reader_side, self.writer_side = r_side, w_side  # refs inside resolve where they were found
        try:
            return self._check(reader, writer, path)
        finally:
            self.reader_side, self.writer_side = saved

    def _check(self, reader: Any, writer: Any, path: str) -> list[str]:
        if reader is True or reader == {} or writer is False:
            return []
        if reader is False:
            return [f"{path}: the reader accepts nothing (false) where the writer accepts documents"]
        if writer is True:
            writer = {}
        pair = (id(reader), id(writer))
        if pair in self.seen:
            return []
        self.seen.add(pair)
        problems: list[str] = []
        for keyword in ("anyOf", "oneOf"):
            problems += self._combined(keyword, reader, writer, path)
        problems += self._all_of(reader, writer, path)
        if "not" in reader:  # the reader refuses what its ``not`` accepts: the writer must refuse it too
            if "not" not in writer:
                problems.append(f"{path}: NOT_TYPE_ADDED")
            elif _Checker(self.writer_side, self.reader_side).check(writer["not"], reader["not"], ""):
                problems.append(f"{path}: NOT_TYPE_NARROWED: the reader's not accepts what the writer's does not")
        r_types, w_types = _types(reader), _types(writer)
        if r_types is not None:
            if w_types is None:
                problems.append(f"{path}: TYPE_NARROWED: the reader allows only {sorted(r_types)}, the writer any type")
            else:
                lost = sorted(k for k in w_types if not _allows(r_types, k))
                if lost:
                    narrowed = bool(w_types & r_types) or ("number" in lost and "integer" in r_types)
                    kind = "TYPE_NARROWED" if narrowed else "TYPE_CHANGED"
                    problems.append(f"{path}: {kind}: the writer's {lost} are not among the reader's {sorted(r_types)}")
        if "enum" in reader:
            if "enum" not in writer:
                problems.append(f"{path}: ENUM_ARRAY_NARROWED: the reader adds an enum")
            elif lost := [v for v in writer["enum"] if v not in reader["enum"]]:
                problems.append(f"{path}: ENUM_ARRAY_NARROWED: the reader's enum lacks {lost}")
        if "const" in reader and writer.get("const", object()) != reader["const"]:
            problems.append(f"{path}: CONST changed or added")
        problems += self._bounds(reader, writer, path)
        problems += self._conditional(reader, writer, path)
        if _allows(w_types, "object") and _allows(r_types, "object"):
            problems += self._object(reader, writer, path)
        if _allows(w_types, "array") and _allows(r_types, "array"):
            problems += self._items(reader, writer, path)
        return problems

    def _items(self, reader: dict, writer: dict, path: str) -> list[str]:
        """``items`` (one schema for every item) or a tuple (``prefixItems``, or draft 7's list
        ``items``), position by position; past a tuple, ``items``/``additionalItems``."""

        def layout(schema: dict) -> tuple[list, Any]:
            if isinstance(schema.get("prefixItems"), list):
                return schema["prefixItems"], schema.get("items", True)
            if isinstance(schema.get("items"), list):
                return schema["items"], schema.get("additionalItems", True)
            return [], schema.get("items", True)

        r_tuple, r_rest = layout(reader)
        w_tuple, w_rest = layout(writer)
        problems: list[str] = []
        for index in range(max(len(r_tuple), len(w_tuple))):
            r_item = r_tuple[index] if index < len(r_tuple) else r_rest
            w_item = w_tuple[index] if index < len(w_tuple) else w_rest
            problems += self.check(r_item, w_item, f"{path}/items/{index}")
        if isinstance(r_rest, (dict, bool)):
            problems += self.check(r_rest, w_rest if isinstance(w_rest, (dict, bool)) else True, f"{path}/items")
        if "additionalItems" in reader and not isinstance(reader.get("items"), list):  # compared as they are
            problems += self.check(
                reader["additionalItems"], writer.get("additionalItems", True), f"{path}/additionalItems"
            )
        return problems

    def _all_of(self, reader: dict, writer: dict, path: str) -> list[str]:
        """Each branch of the reader's ``allOf`` must read the writer's documents: it reads the
        writer (less its own allOf) or one of the writer's ``allOf`` branches, each of which every
        writer document satisfies."""
        problems = []
        w_branches = writer.get("allOf") or []
        rest = {k: v for k, v in writer.items() if k != "allOf"}
        self.made.append(rest)
        either = writer.get("anyOf") or writer.get("oneOf") or []
        for index, branch in enumerate(reader.get("allOf") or []):
            if any(not self._fresh().check(branch, w, "") for w in w_branches):
                continue
            if either and all(not self._fresh().check(branch, w, "") for w in either):
                continue  # it reads each branch a writer document may satisfy
            problems += self.check(branch, rest, f"{path}/allOf/{index}")
        return problems

    def _combined(self, keyword: str, reader: dict, writer: dict, path: str) -> list[str]:
        r_branches = reader.get(keyword)
        if not r_branches:
            return []
        w_branches = writer.get(keyword) or [writer]
        problems = []
        for index, branch in enumerate(w_branches):
            if not any(not self._fresh().check(r, branch, "") for r in r_branches):
                problems.append(
                    f"{path}/{keyword}: no branch of the reader's {keyword} reads the writer's branch {index}"
                )
        return problems

    def _conditional(self, reader: dict, writer: dict, path: str) -> list[str]:
        """The reader's ``if``/``then``/``else``: a writer document must pass the reader's branch
        its condition picks. With the writer's ``if`` the same, a writer document on either side
        of it satisfies the writer's own branch there as well as the rest of the writer, so the
        reader's branch must read one of them; with another condition, or none, a document may
        fall on either side, so each branch the reader has must read the writer. A branch's
        ``required`` names the properties of the schema around it too (the usual "then: required"),
        so those count as required properties added. ``then`` and ``else`` without ``if``
        constrain nothing (as the specification says), nor does ``if`` alone; the writer's
        conditional only narrows its documents, so it is never a problem."""
        if "if" not in reader:
            return []
        same = "if" in writer and writer["if"] == reader["if"]
        problems: list[str] = []
        for branch in ("then", "else"):
            if branch not in reader:
                continue
            r_branch = reader[branch]
            w_branch = writer.get(branch, True) if same else True
            found = self._required_in_branch(reader, r_branch, writer, w_branch, f"{path}/{branch}")
            if not same or self._fresh().check(r_branch, w_branch, ""):  # not read by the writer's own branch
                found += self.check(r_branch, writer, f"{path}/{branch}")
            if found:
                kind = "CONDITIONAL_BRANCH_NARROWED" if same else "CONDITIONAL_ADDED_OR_CHANGED"
                problems.append(f"{path}/{branch}: {kind}: the reader's {branch} refuses documents the writer accepts")
                problems += found
        return problems

    @staticmethod
    def _required_in_branch(reader: dict, r_branch: Any, writer: dict, w_branch: Any, path: str) -> list[str]:
        """REQUIRED_ATTRIBUTE_ADDED for the names a reader's branch requires among the properties
        of the schema around it (its own properties are the recursive check's), unless the writer
        requires them there too or they have a default."""
        if not isinstance(r_branch, dict):
            return []
        around: dict[str, Any] = reader.get("properties") or {}
        own = r_branch.get("properties") or {}
        held = set(writer.get("required") or [])
        if isinstance(w_branch, dict):
            held |= set(w_branch.get("required") or [])
        return [
            f"{path}/required/{name}: REQUIRED_ATTRIBUTE_ADDED"
            for name in r_branch.get("required") or []
            if name in around
            and name not in own
            and name not in held
            and not (isinstance(around[name], dict) and "default" in around[name])
        ]

    def _fresh(self) -> _Checker:
        return _Checker(self.reader_side, self.writer_side)

    @staticmethod
    def _bounds(reader: dict, writer: dict, path: str) -> list[str]:
        problems = []
        for keyword in _UPPER:
            if keyword in reader and isinstance(reader[keyword], (int, float)):
                old = writer.get(keyword)
                if not isinstance(old, (int, float)) or reader[keyword] < old:
                    problems.append(f"{path}: {keyword} added or decreased ({old} -> {reader[keyword]})")
        for keyword in _LOWER:
            if keyword in reader and isinstance(reader[keyword], (int, float)):
                old = writer.get(keyword)
                if not isinstance(old, (int, float)) or reader[keyword] > old:
                    problems.append(f"{path}: {keyword} added or increased ({old} -> {reader[keyword]})")
        if "pattern" in reader and writer.get("pattern") != reader["pattern"]:
            problems.append(f"{path}: pattern added or changed")
        if "format" in reader and writer.get("format") != reader["format"]:  # checked as pattern is
            kind = "FORMAT_CHANGED" if "format" in writer else "FORMAT_ADDED"
            problems.append(f"{path}: {kind} ({writer.get('format')} -> {reader['format']})")
        multiple, old_multiple = reader.get("multipleOf"), writer.get("multipleOf")
        if isinstance(multiple, (int, float)) and multiple > 0:
            # the writer's multiples are the reader's when the reader's step divides the writer's
            if not isinstance(old_multiple, (int, float)) or (old_multiple / multiple) % 1 != 0:
                problems.append(f"{path}: multipleOf added or changed ({old_multiple} -> {multiple})")
        if reader.get("uniqueItems") is True and writer.get("uniqueItems") is not True:
            problems.append(f"{path}: uniqueItems added")
        for keyword in ("dependentRequired", "dependencies", "dependentSchemas"):
            old_rules, rules = writer.get(keyword) or {}, reader.get(keyword) or {}
            if isinstance(rules, dict) and isinstance(old_rules, dict):
                added = sorted(k for k, v in rules.items() if old_rules.get(k) != v)
                if added:
                    problems.append(f"{path}: {keyword} added or changed for {added}")
        return problems

    def _object(self, reader: dict, writer: dict, path: str) -> list[str]:
        problems: list[str] = []
        r_props: dict[str, Any] = reader.get("properties") or {}
        w_props: dict[str, Any] = writer.get("properties") or {}
        r_additional = reader.get("additionalProperties", True)
        w_additional = writer.get("additionalProperties", True)
        r_patterns = _patterns(reader)
        w_patterns = _patterns(writer)
        for name, schema in w_props.items():
            where = f"{path}/properties/{name}"
            if schema is False:
                continue  # the writer's documents never hold it
            if name in r_props:
                problems += self.check(r_props[name], schema, where)
            elif (covering := _matching(r_patterns, name)) is not None:
                problems += self.check(covering, schema, where)  # read by the reader's patternProperties
            elif r_additional is False:
                problems.append(f"{where}: PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL")
            elif isinstance(r_additional, dict):
                problems += self.check(r_additional, schema, where)
        for name, schema in r_props.items():
            if name in w_props or self.reader_side.deref(schema)[0] in (True, {}):
                continue  # a property any value satisfies changes nothing
            where = f"{path}/properties/{name}"
            covered = _matching(w_patterns, name)
            if covered is not None:
                problems += self.check(schema, covered, where)  # the writer's patternProperties held it
            elif w_additional is False:
                continue  # PROPERTY_ADDED_TO_CLOSED_CONTENT_MODEL: the writer's documents never hold it
            elif w_additional is True or w_additional == {}:
                problems.append(f"{where}: PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")
            else:
                problems += self.check(schema, w_additional, where)  # covered by a partially open model
        if r_additional is False and w_additional is not False:
            problems.append(f"{path}: ADDITIONAL_PROPERTIES_REMOVED")
        elif isinstance(r_additional, dict) and w_additional is not False:
            problems += self.check(r_additional, w_additional, f"{path}/additionalProperties")
        w_required = set(writer.get("required") or [])
        for name in reader.get("required") or []:
            if name not in w_required and name in r_props:  # as Confluent: required names of properties
                has_default = isinstance(r_props.get(name), dict) and "default" in r_props[name]
                if not has_default:
                    problems.append(f"{path}/required/{name}: REQUIRED_ATTRIBUTE_ADDED")
        return problems


def _patterns(schema: dict) -> list[tuple[Any, Any]]:
    """``patternProperties`` as (compiled RE2 pattern, schema): linear-time matching, whatever
    the pattern (a schema is untrusted input); a pattern RE2 cannot compile is left out."""
    import re2

    found = []
    for pattern, sub in (schema.get("patternProperties") or {}).items():
        try:
            found.append((re2.compile(pattern), sub))
        except Exception:  # re2.error: a pattern RE2 cannot take (backreferences, lookaround)
            continue
    return found


def _matching(patterns: list[tuple[Any, Any]], name: str) -> Any | None:
    return next((sub for pattern, sub in patterns if pattern.search(name)), None)


def read_problems(reader: ParsedJson, writer: ParsedJson) -> list[str]:
    """Why a document valid under ``writer`` may be invalid under ``reader``; empty if none."""
    checker = _Checker(_Side(reader.schema, reader.documents), _Side(writer.schema, writer.documents))
    return checker.check(reader.schema, writer.schema, "#")


def compatibility_problems(level: str, new: ParsedJson, previous: list[ParsedJson]) -> list[str]:
    """The problems of registering ``new`` under ``level`` given the live versions ``previous``
    (oldest first); empty when it may be registered."""
    return compatibility.problems(level, new, previous, read_problems)


def record_name(schema: str) -> str | None:
    """RecordNameStrategy's name of a JSON schema: its ``title``, as Confluent's serializer uses."""
    try:
        raw = json.loads(schema)
    except ValueError:
        return None
    title = raw.get("title") if isinstance(raw, dict) else None
    return title if isinstance(title, str) and title else None
