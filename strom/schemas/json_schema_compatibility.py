"""JSON Schema compatibility (strom.schemas.json_schema parses the schemas).

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
  ADDITIONAL_PROPERTIES_REMOVED. Absent ``additionalProperties``, ``unevaluatedProperties`` is
  the content model (UNEVALUATED_PROPERTIES_REMOVED/NARROWED), the names its ``allOf`` branches
  (or every ``anyOf``/``oneOf`` branch) give being evaluated there; a name only a writer's branch
  gives is compared with the branch's schema for it;
- arrays by ``items``, tuples (``prefixItems``, draft 7's list ``items``) position by position,
  past them ``items``/``additionalItems`` or else ``unevaluatedItems``, ``additionalItems`` as it
  is; ``unevaluatedItems`` leaves alone the items in-place branches evaluate, as 2020-12's
  annotations say: for the reader, those every document it accepts has evaluated (an ``allOf``
  branch's tuple, the shortest of its ``anyOf``/``oneOf`` branches'); for the writer, an item
  may satisfy the schema of any branch that evaluates it instead; ``contains`` with ``minContains``/``maxContains`` (MIN_CONTAINS_ADDED/INCREASED,
  MAX_CONTAINS_ADDED/DECREASED; a bare ``contains`` added or narrowed is strom's own
  CONTAINS_ADDED/NARROWED, which Confluent's diff does not compare);
- ``enum`` values the writer allows must stay (ENUM_ARRAY_NARROWED); ``const`` must not change;
  a ``not`` added, or one that refuses less, is a problem;
- bounds may widen but not narrow: ``maxLength``/``maximum``/``exclusiveMaximum``/``maxItems``/
  ``maxProperties`` added or lowered, their minimum twins added or raised, ``pattern`` added or
  changed, ``multipleOf`` added or changed to a step that does not divide the old one,
  ``uniqueItems`` added, and ``dependentRequired``/``dependencies``/``dependentSchemas`` added or
  changed are problems;
- ``anyOf``/``oneOf``: each branch of the writer's ``anyOf``/``oneOf`` must be read by some reader
  branch, or one reader branch reads the whole writer or one of its ``allOf`` branches (adding a
  branch is fine, removing one is SUM_TYPE_NARROWED; ``oneOf`` to ``anyOf``, ``allOf`` to either
  are fine where the branches read: Confluent's COMBINED_TYPE_EXTENDED; otherwise
  COMBINED_TYPE_CHANGED); ``allOf``: each reader branch must read the writer, one of the writer's
  ``allOf`` branches, or every branch of its ``anyOf``/``oneOf`` (PRODUCT_TYPE_EXTENDED or
  COMBINED_TYPE_CHANGED otherwise); a writer's types are narrowed through its combinators
  (``{"oneOf": [{"type": "string"}]}`` is a string);
- ``$ref`` is followed, once per pair (recursion): local ones (``#/definitions/x``,
  ``#/$defs/x``), and ones to another document (``address.json#/...``) into the schema the
  reference of that name holds (its own local refs resolving in it). In draft 2019-09 and
  2020-12 keywords beside a ``$ref`` apply with it, so the pair is compared as an ``allOf`` of
  the ``$ref`` and its siblings (Confluent's translation of such a schema makes the same allOf;
  its diff then calls any keyword added beside a ``$ref`` TYPE_CHANGED, strom judges what it
  refuses); in draft 7 and before, as their specifications say, siblings are ignored. A
  required name counts when it is of a property of the schema or of one of its ``allOf``
  branches (the ``$ref`` is one), and a writer's ``allOf`` branches' required names are its
  own. A pair met again further down is taken to hold there when a property or an item lies
  between, and refused when none does;
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

Run against the 263 cases of Confluent's JSON Schema diff examples (json-schema-provider's
diff-schema-examples, diff-combined-schema-examples and their 2020-12 twins, Confluent Schema
Registry's master of July 2026, 8.5.0-0) by ``scripts/json_schema_confluent_examples.py``, the
verdicts agree on every one (none has ``format`` or ``if``). A ``$ref`` to a document no
reference names is taken to accept anything.
``patternProperties`` patterns are matched with RE2 (linear time; one it cannot compile is left out).
A check is bounded (it runs on the broker's event loop): past ``MAX_STEPS`` comparisons of
subschemas, or subschemas nested past Python's recursion limit, the change is refused as
TOO_COMPLEX rather than run on.
"""

from __future__ import annotations

from typing import Any

# comparisons of subschemas one check (one direction, one previous version) may make: each of
# Confluent's 263 examples needs at most 13, an object of 300 object properties and a oneOf of 5
# about 1,800; combinators nested in combinators multiply them (allOf in allOf five deep, four
# wide: millions), and the check runs on the broker's event loop, so past this it is refused
MAX_STEPS = 25_000
_UPPER = ("maxLength", "maximum", "exclusiveMaximum", "maxItems", "maxProperties")
_LOWER = ("minLength", "minimum", "exclusiveMinimum", "minItems", "minProperties")
_ALL = float("inf")  # every item of an array


def _types(schema: dict[str, Any]) -> set[str] | None:
    """The types a schema allows (None: any); ``integer`` is inside ``number``."""
    kind = schema.get("type")
    if kind is None:
        return None
    return {kind} if isinstance(kind, str) else {k for k in kind if isinstance(k, str)}


def _allows(types: set[str] | None, kind: str) -> bool:
    return types is None or kind in types or (kind == "integer" and "number" in types)


def _intersect(one: set[str] | None, other: set[str] | None) -> set[str] | None:
    """The types both allow (None: any); ``integer`` is what ``number`` and ``integer`` share."""
    if one is None or other is None:
        return other if one is None else one
    return {k for k in one if _allows(other, k)} | {k for k in other if _allows(one, k)}


# keywords beside a ``$ref`` that constrain nothing (annotations, and places definitions live)
_INERT = frozenset(
    (
        "$ref", "$schema", "$id", "$anchor", "$dynamicAnchor", "$recursiveAnchor", "$vocabulary", "$comment",
        "$defs", "definitions", "title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly",
    )
)  # fmt: skip


def _siblings_apply(document: Any, inherited: bool = False) -> bool:
    """Whether keywords beside a ``$ref`` apply in this document: from draft 2019-09 on, ``$ref``
    is one applicator among the others; before (draft 7, strom's default, as Confluent's), its
    siblings are ignored. A document without ``$schema`` keeps the draft of the one referring to it."""
    draft = document.get("$schema") if isinstance(document, dict) else None
    if not isinstance(draft, str):
        return inherited
    return "/draft/2019-09/" in draft or "/draft/2020-12/" in draft


class _Side:
    """One side of a check: the document a local ``$ref`` resolves in, and the referenced ones.
    ``combined`` keeps, by id, the schema each ``$ref`` with keywords beside it stands for (its
    siblings with the ``$ref`` as one more ``allOf`` branch), made once so that a ``$ref`` cycle
    meets the same schemas again and ends."""

    def __init__(self, root: Any, documents: dict[str, Any], combined: dict | None = None, modern: bool = False):
        self.root = root
        self.documents = documents
        self.combined: dict[int, tuple[Any, dict]] = {} if combined is None else combined
        self.modern = _siblings_apply(root, modern)

    def deref(self, schema: Any) -> tuple[Any, _Side]:
        """The schema a ``$ref`` leads to (followed in a chain, bounded), and the side whose root
        its own local refs resolve in; an unknown target accepts anything. In draft 2019-09 and
        2020-12 a ``$ref`` with constraining keywords beside it is not followed: it stands for
        ``{**siblings, "allOf": [{"$ref": ...}, *allOf]}``, whose branch is followed when it is
        compared (as Confluent's translation of such a schema makes an allOf of the two)."""
        side = self
        for _ in range(32):
            if not isinstance(schema, dict) or not isinstance(schema.get("$ref"), str):
                return schema, side
            if side.modern and any(k not in _INERT for k in schema):
                return side._combined(schema), side
            name, _, fragment = schema["$ref"].partition("#")
            if name:  # another document: a reference, by its name or the name's last segment
                found = side.documents.get(name)
                if found is None:
                    found = next((d for n, d in side.documents.items() if n.rsplit("/", 1)[-1] == name), None)
                if found is None:
                    return True, side
                side = _Side(found, side.documents, side.combined, side.modern)
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

    def _combined(self, schema: dict) -> dict:
        known = self.combined.get(id(schema))
        if known is None:
            others = schema.get("allOf")
            branches = [{"$ref": schema["$ref"]}, *(others if isinstance(others, list) else [])]
            made = {**{k: v for k, v in schema.items() if k != "$ref"}, "allOf": branches}
            known = self.combined[id(schema)] = (schema, made)  # the schema kept, so its id stays its own
        return known[1]


class _TooComplex(Exception):
    pass


class _Shared:
    """What the checkers of one check share: the comparisons made so far, bounded by MAX_STEPS
    (combinators nested in combinators multiply them, and the check runs on the broker's event
    loop), a writer schema's types by id (the schema kept beside them, so that its id stays
    its own; walked once, so that branches naming their parent, a $ref cycle, cannot multiply
    the walk), the schemas made during the check, and the pairs under comparison: a pair met
    again below itself (a $ref cycle, through the trial checkers of combinators too) is taken
    to hold there when a property or an item lies between (a document is finite, so its own
    comparison decides), and to fail when none does (``{"anyOf": [{"$ref": "#"}, ...]}``: the
    branch that is the schema itself adds no document to it)."""

    def __init__(self) -> None:
        self.steps = 0
        self.types: dict[int, tuple[Any, Any]] = {}
        self.made: dict[tuple, tuple[Any, Any]] = {}
        self.active: dict[tuple[int, int], int] = {}  # pair -> the level it is compared at
        self.level = 0  # how deep into a document (properties, items) the comparison is


class _Checker:
    def __init__(self, reader: _Side, writer: _Side, shared: _Shared | None = None):
        self.reader_side = reader
        self.writer_side = writer
        self.seen: set[tuple[int, int]] = set()
        # schemas made during the check (the writer less its allOf): kept alive, so that no later
        # one gets the id of one in ``seen`` and is taken for a pair already checked
        self.made: list[dict] = []
        self.shared = _Shared() if shared is None else shared

    def check(self, reader: Any, writer: Any, path: str) -> list[str]:
        self.shared.steps += 1
        if self.shared.steps > MAX_STEPS:
            raise _TooComplex
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
        shared = self.shared
        if pair in shared.active:  # under way further up: a cycle
            if shared.active[pair] < shared.level:
                return []  # through a property or an item: it holds here if it holds there
            return [f"{path}: a cycle of $ref reaches itself with no property or item between; refused"]
        if pair in self.seen:
            return []  # checked already by this checker, its problems said there
        self.seen.add(pair)
        shared.active[pair] = shared.level
        try:
            return self._compare(reader, writer, path)
        finally:
            del shared.active[pair]

    def _compare(self, reader: dict, writer: dict, path: str) -> list[str]:
        problems: list[str] = []
        for keyword in ("anyOf", "oneOf"):
            problems += self._combined(keyword, reader, writer, path)
        problems += self._all_of(reader, writer, path)
        if "not" in reader:  # the reader refuses what its ``not`` accepts: the writer must refuse it too
            if "not" not in writer:
                problems.append(f"{path}: NOT_TYPE_ADDED")
            elif _Checker(self.writer_side, self.reader_side, self.shared).check(writer["not"], reader["not"], ""):
                problems.append(f"{path}: NOT_TYPE_NARROWED: the reader's not accepts what the writer's does not")
        r_types, w_types = _types(reader), self._writer_types(writer)
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
        self.shared.level += 1  # into the document's properties and items
        try:
            if _allows(w_types, "object") and _allows(r_types, "object"):
                problems += self._object(reader, writer, path)
            if _allows(w_types, "array") and _allows(r_types, "array"):
                problems += self._items(reader, writer, path)
                problems += self._contains(reader, writer, path)
        finally:
            self.shared.level -= 1
        return problems

    def _items(self, reader: dict, writer: dict, path: str) -> list[str]:
        """``items`` (one schema for every item) or a tuple (``prefixItems``, or draft 7's list
        ``items``), position by position; past a tuple, ``items``/``additionalItems``, or absent
        those ``unevaluatedItems`` (an item ``contains`` matches is evaluated too, so there an
        item satisfies ``contains`` or ``unevaluatedItems``). ``unevaluatedItems`` leaves alone
        the items in-place branches evaluate (JSON Schema 2020-12's annotations): on the reader's
        side the leading items every accepted document has evaluated by them (``_evaluated``), on
        the writer's side an item past its own tuple satisfies ``unevaluatedItems`` or one of the
        schemas a branch evaluates it with (``_writer_item``)."""

        def unevaluated(schema: dict) -> Any:
            rest = schema.get("unevaluatedItems", True)
            if not isinstance(rest, (dict, bool)):
                return True  # not a schema: a keyword of no draft the schema names
            if rest is True or rest == {} or not isinstance(schema.get("contains"), (dict, bool)):
                return rest
            return self._made(("contains", id(schema)), schema, lambda: {"anyOf": [schema["contains"], rest]})

        r_tuple, r_rest = _own_items(reader)
        if r_rest is None:
            r_rest = unevaluated(reader)
            if r_rest is not True and r_rest != {}:
                count = self._evaluated(reader, self.reader_side, branches_only=True)
                if count == _ALL:
                    r_rest = True
                elif count > len(r_tuple):  # the branches' own tuples read those items
                    r_tuple = [*r_tuple, *[True] * (int(count) - len(r_tuple))]
        w_tuple, w_rest = _own_items(writer)
        if w_rest is None:
            w_rest = unevaluated(writer)
            if w_rest is not True and w_rest != {}:
                w_tuple, w_rest = self._writer_items(writer, w_tuple, w_rest)
        problems: list[str] = []
        for index in range(max(len(r_tuple), len(w_tuple))):
            r_item = r_tuple[index] if index < len(r_tuple) else r_rest
            w_item = w_tuple[index] if index < len(w_tuple) else w_rest
            problems += self.check(r_item, w_item, f"{path}/items/{index}")
        if isinstance(r_rest, (dict, bool)):
            problems += self.check(r_rest, w_rest if isinstance(w_rest, (dict, bool)) else True, f"{path}/items")
        if isinstance(reader.get("additionalItems"), (dict, bool)) and not _is_tuple(reader.get("items")):
            problems += self.check(  # compared as they are
                reader["additionalItems"], _schema_in(writer, "additionalItems", True), f"{path}/additionalItems"
            )
        return problems

    def _made(self, key: tuple, keep: Any, make: Any) -> Any:
        """A schema made during the check, made once per ``key`` (the id of ``keep``, which is
        kept beside it so that the id stays its own): a ``$ref`` cycle meets the same one again."""
        made = self.shared.made
        if key not in made:
            made[key] = (keep, make())
        return made[key][1]

    def _evaluated(self, schema: Any, side: _Side, branches_only: bool = False, depth: int = 0) -> float:
        """How many leading items of an array the schema evaluates whenever it accepts it (``_ALL``
        for every item): its own tuple, or all with ``items``/``additionalItems``/
        ``unevaluatedItems``; the most any ``allOf`` branch evaluates (each holds); the fewest any
        ``anyOf``/``oneOf`` branch evaluates (only a branch that holds counts, and which one does
        is not known). Other applicators (``if``, ``dependentSchemas``) are not counted: fewer
        items counted make the reader stricter, never more lenient than it is."""
        self.shared.steps += 1  # a walk of branches in branches is bounded with the comparisons
        if self.shared.steps > MAX_STEPS:
            raise _TooComplex
        if schema is False:
            return _ALL  # never accepts: vacuous (an anyOf branch that never holds counts for nothing)
        if not isinstance(schema, dict):
            return 0
        count: float = 0
        if not branches_only:
            own, rest = _own_items(schema)
            if rest is not None or isinstance(schema.get("unevaluatedItems"), (dict, bool)):
                return _ALL
            count = len(own)
        if depth > 8:
            return count

        def of(branch: Any) -> float:
            branch, where = side.deref(branch)
            if where.root is not side.root:
                return 0  # in another document: not counted (stricter, never more lenient)
            return self._evaluated(branch, side, depth=depth + 1)

        for branch in _list_in(schema, "allOf"):
            count = max(count, of(branch))
        for keyword in ("anyOf", "oneOf"):
            branches = _list_in(schema, keyword)
            if branches:
                count = max(count, min(of(branch) for branch in branches))
        return count

    def _writer_items(self, writer: dict, tuple_: list, rest: Any) -> tuple[list, Any]:
        """The writer's tuple and rest when its ``unevaluatedItems`` is a constraint: an item past
        its own tuple satisfies ``unevaluatedItems`` (with its ``contains``), or else some in-place
        subschema evaluated it (an ``allOf``/``anyOf``/``oneOf`` branch, ``if``/``then``/``else``,
        ``dependentSchemas``, a ``$ref`` beside keywords, and theirs in turn) and it satisfies
        that one's schema for its position, ``items``/``unevaluatedItems`` past its tuple, or
        ``contains``: the item is read as ``anyOf`` of them. Past a bound, or into another
        document, the item may be anything."""
        evaluators = self._evaluators(writer)
        if evaluators is None:
            return tuple_, True
        if not evaluators:
            return tuple_, rest
        longest = max(len(t) for t, _, _ in evaluators)

        def either(position: int) -> Any:
            found = [rest]
            for own, past, contains in evaluators:
                found += [own[position] if position < len(own) else past, contains]
            found = [f for f in found if f is not None and f is not False]
            if not found:
                return False
            if any(f is True or f == {} for f in found):
                return True
            return found[0] if len(found) == 1 else {"anyOf": found}

        positions = [
            self._made(("item", id(writer), index), writer, lambda index=index: either(index))
            for index in range(len(tuple_), longest)
        ]
        return [*tuple_, *positions], self._made(("item", id(writer), -1), writer, lambda: either(longest))

    def _evaluators(self, writer: dict) -> list[tuple[list, Any, Any]] | None:
        """(tuple, schema past it or None, contains or None) of each in-place subschema of the
        writer that evaluates items; None past 256 subschemas, 8 levels, or into another document."""
        found: list[tuple[list, Any, Any]] = []
        side = self.writer_side
        visited = 0

        def walk(schema: dict, depth: int) -> bool:
            nonlocal visited
            subs = [*_list_in(schema, "allOf"), *_list_in(schema, "anyOf"), *_list_in(schema, "oneOf")]
            subs += [schema[k] for k in ("if", "then", "else") if k in schema]
            dependent = schema.get("dependentSchemas")
            subs += list(dependent.values()) if isinstance(dependent, dict) else []
            for sub in subs:
                visited += 1
                sub, where = side.deref(sub)
                if visited > 256 or depth > 8 or where.root is not side.root:
                    return False
                if not isinstance(sub, dict):
                    continue
                own, past = _own_items(sub)
                if past is None:
                    past = _schema_in(sub, "unevaluatedItems", None)
                contains = _schema_in(sub, "contains", None)
                if own or past is not None or contains is not None:
                    found.append((own, past, contains))
                if not walk(sub, depth + 1):
                    return False
            return True

        return found if walk(writer, 0) else None

    def _contains(self, reader: dict, writer: dict, path: str) -> list[str]:
        """The reader's ``contains``: its arrays hold at least ``minContains`` (default 1) and at
        most ``maxContains`` items its ``contains`` reads. The writer guarantees at least its own
        ``minContains`` items its own ``contains`` reads, so the reader's ``contains`` must read
        the writer's (CONTAINS_NARROWED; CONTAINS_ADDED without one) and its minimum must not be
        above the writer's (MIN_CONTAINS_ADDED/INCREASED); a writer's ``items`` schema, which every
        item satisfies, counts as its ``contains`` with ``minItems`` as the minimum. A reader's ``maxContains`` holds when
        the writer's ``contains`` reads the reader's (it counts every item the reader counts) with
        a ``maxContains`` no higher, or when the writer's ``maxItems`` is no higher
        (MAX_CONTAINS_ADDED/DECREASED otherwise). Confluent's diff compares the two counts only
        (a bare ``contains`` added or changed is strom's own rule)."""
        if not isinstance(reader.get("contains"), (dict, bool)):
            return []  # none, or (before draft 6) a keyword that is not a schema
        problems: list[str] = []
        has = isinstance(writer.get("contains"), (dict, bool))
        r_min, r_max = reader.get("minContains", 1), reader.get("maxContains")
        w_max = writer.get("maxContains") if has else None
        if has:
            w_contains, w_min = writer["contains"], writer.get("minContains", 1)
        elif isinstance(writer.get("items"), (dict, bool)) and "prefixItems" not in writer:
            w_contains, w_min = writer["items"], writer.get("minItems", 0)  # every item, at least minItems
        else:
            w_contains, w_min = None, 0
        if isinstance(r_min, int) and r_min > 0:
            if w_contains is None:
                problems.append(f"{path}/contains: CONTAINS_ADDED")
            else:
                if found := self.check(reader["contains"], w_contains, f"{path}/contains"):
                    problems += [f"{path}/contains: CONTAINS_NARROWED", *found]
                if isinstance(w_min, int) and r_min > w_min:
                    kind = "MIN_CONTAINS_INCREASED" if "minContains" in writer else "MIN_CONTAINS_ADDED"
                    problems.append(f"{path}/minContains: {kind} ({w_min} -> {r_min})")
        if isinstance(r_max, int):
            counted = has and not _Checker(self.writer_side, self.reader_side, self.shared).check(
                writer["contains"], reader["contains"], ""
            )
            bounded = isinstance(w_max, int) and counted and w_max <= r_max
            short = isinstance(writer.get("maxItems"), int) and writer["maxItems"] <= r_max
            if not (bounded or short):
                kind = "MAX_CONTAINS_DECREASED" if isinstance(w_max, int) else "MAX_CONTAINS_ADDED"
                problems.append(f"{path}/maxContains: {kind} ({w_max} -> {r_max})")
        return problems

    def _all_of(self, reader: dict, writer: dict, path: str) -> list[str]:
        """Each branch of the reader's ``allOf`` must read the writer's documents: it reads the
        writer (less its own allOf, and then less its ``unevaluated*``) or one of the writer's ``allOf`` branches, each of which every
        writer document satisfies. A branch that reads none is Confluent's PRODUCT_TYPE_EXTENDED
        (the writer's ``allOf`` had fewer) or COMBINED_TYPE_CHANGED (the writer combined another
        way)."""
        problems = []
        w_branches = writer.get("allOf") or []
        if w_branches:
            kind = "PRODUCT_TYPE_EXTENDED"
        elif "anyOf" in writer or "oneOf" in writer:
            kind = "COMBINED_TYPE_CHANGED"
        else:
            kind = None
        # the writer less its allOf; its unevaluatedItems/unevaluatedProperties go too when it has
        # branches: without them the items and properties they evaluated would be refused
        dropped = ("allOf", "unevaluatedItems", "unevaluatedProperties") if w_branches else ("allOf",)
        rest = {k: v for k, v in writer.items() if k not in dropped}
        self.made.append(rest)
        either = writer.get("anyOf") or writer.get("oneOf") or []
        for index, branch in enumerate(reader.get("allOf") or []):
            if any(not self._fresh().check(branch, w, "") for w in w_branches):
                continue
            if either and all(not self._fresh().check(branch, w, "") for w in either):
                continue  # it reads each branch a writer document may satisfy
            found = self.check(branch, rest, f"{path}/allOf/{index}")
            if found and kind:
                problems.append(f"{path}/allOf/{index}: {kind}: the branch reads none of the writer's")
            problems += found
        return problems

    def _combined(self, keyword: str, reader: dict, writer: dict, path: str) -> list[str]:
        """The reader's ``anyOf``/``oneOf``: every writer document must satisfy one of its branches.
        A writer document satisfies one branch of the writer's ``anyOf`` (or ``oneOf``), so each of
        those must be read by some reader branch; it satisfies every branch of the writer's
        ``allOf``, so a reader branch that reads one of them, or the whole writer, is enough. So
        ``oneOf`` read as ``anyOf``, a singleton ``allOf`` as ``anyOf`` or ``oneOf`` with more
        branches are fine (Confluent's COMBINED_TYPE_EXTENDED), a branch lost is not
        (SUM_TYPE_NARROWED, or COMBINED_TYPE_CHANGED when the writer combined another way)."""
        r_branches = reader.get(keyword)
        if not r_branches:
            return []

        def read(schema: Any) -> bool:
            return any(not self._fresh().check(r, schema, "") for r in r_branches)

        alternatives = writer.get("anyOf") or writer.get("oneOf") or []
        lost = [index for index, branch in enumerate(alternatives) if not read(branch)]
        if alternatives and not lost:
            return []
        if read(writer) or any(read(branch) for branch in writer.get("allOf") or []):
            return []
        if keyword in writer:
            kind = "SUM_TYPE_NARROWED"
        elif any(k in writer for k in ("anyOf", "oneOf", "allOf")):
            kind = "COMBINED_TYPE_CHANGED"
        else:
            kind = "TYPE_CHANGED"
        if alternatives:
            return [
                f"{path}/{keyword}: {kind}: no branch of the reader's {keyword} reads the writer's branch {index}"
                for index in lost
            ]
        return [f"{path}/{keyword}: {kind}: no branch of the reader's {keyword} reads the writer's documents"]

    def _writer_types(self, schema: dict, depth: int = 0) -> set[str] | None:
        """The types a writer document may have (None: any): its own ``type``, narrowed by each
        ``allOf`` branch and by the union of its ``anyOf``/``oneOf`` branches, so that a writer
        ``{"oneOf": [{"type": "string"}]}`` counts as a string."""
        types = self.shared.types
        known = types.get(id(schema))
        if known is not None:
            return known[1]
        types[id(schema)] = (schema, None)  # while it is walked, a cycle back to it allows any type
        found = self._walk_types(schema, depth)
        types[id(schema)] = (schema, found)
        return found

    def _walk_types(self, schema: dict, depth: int) -> set[str] | None:
        found = _types(schema)
        if depth > 8:
            return found

        def of(branch: Any) -> set[str] | None:
            branch = self.writer_side.deref(branch)[0]
            if branch is False:
                return set()
            return self._writer_types(branch, depth + 1) if isinstance(branch, dict) else None

        for branch in schema.get("allOf") or []:
            found = _intersect(found, of(branch))
        for keyword in ("anyOf", "oneOf"):
            branches = schema.get(keyword) or []
            if branches:
                union: set[str] | None = set()
                for branch in branches:
                    kinds = of(branch)
                    union = None if kinds is None or union is None else union | kinds
                found = _intersect(found, union)
        return found

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
        return _Checker(self.reader_side, self.writer_side, self.shared)

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
        """Properties, by the content models of both sides: a schema's ``additionalProperties``,
        or, absent that, its ``unevaluatedProperties`` (draft 2019-09 on), which differ in what
        counts as evaluated: for ``unevaluatedProperties`` the properties its ``allOf`` branches
        name, and those every branch of its ``anyOf``/``oneOf`` names, are evaluated there (and
        checked as those branches are), not by the content model. A property a writer's branch
        names and its own ``properties`` do not is compared like one of its own, with the schema
        (or, from ``anyOf``/``oneOf``, each schema) a writer document may hold it with."""
        problems: list[str] = []
        r_props: dict[str, Any] = reader.get("properties") or {}
        w_props: dict[str, Any] = writer.get("properties") or {}
        r_key, r_additional = _content_model(reader)
        w_key, w_additional = _content_model(writer)
        r_patterns = _patterns(reader)
        w_patterns = _patterns(writer)
        r_held = self._held_by_branches(reader) if r_key == "unevaluatedProperties" else set()
        w_given = self._given_by_branches(writer, w_patterns, w_additional)
        writer_names = [(n, [s]) for n, s in w_props.items()] + list(w_given.items())
        for name, alternatives in writer_names:
            where = f"{path}/properties/{name}"
            for schema in alternatives:
                if schema is False:
                    continue  # the writer's documents never hold it
                if name in r_props:
                    problems += self.check(r_props[name], schema, where)
                elif (covering := _matching(r_patterns, name)) is not None:
                    problems += self.check(covering, schema, where)  # read by the reader's patternProperties
                elif name in r_held:
                    continue  # evaluated by the reader's branches, and checked as they are
                elif r_additional is False:
                    problems.append(f"{where}: PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL")
                    break
                elif isinstance(r_additional, dict):
                    problems += self.check(r_additional, schema, where)
        for name, schema in r_props.items():
            if name in w_props or self.reader_side.deref(schema)[0] in (True, {}):
                continue  # a property any value satisfies changes nothing
            where = f"{path}/properties/{name}"
            covered = _matching(w_patterns, name)
            if covered is not None:
                problems += self.check(schema, covered, where)  # the writer's patternProperties held it
            elif name in w_given:
                for given in w_given[name]:  # as a writer's branch held it
                    problems += self.check(schema, given, where)
            elif w_additional is False:
                continue  # PROPERTY_ADDED_TO_CLOSED_CONTENT_MODEL: the writer's documents never hold it
            elif w_additional is True or w_additional == {}:
                problems.append(f"{where}: PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")
            else:
                problems += self.check(schema, w_additional, where)  # covered by a partially open model
        label = "UNEVALUATED_PROPERTIES" if r_key == "unevaluatedProperties" else "ADDITIONAL_PROPERTIES"
        if r_additional is False and w_additional is not False:
            problems.append(f"{path}: {label}_REMOVED")
        elif isinstance(r_additional, dict) and w_additional is not False:
            found = self.check(r_additional, w_additional, f"{path}/{r_key}")
            if found and (w_additional is True or w_additional == {}):
                problems.append(f"{path}: {label}_NARROWED")
            problems += found
        w_required = set(writer.get("required") or [])
        for branch in self._branches(writer, "allOf", self.writer_side):
            w_required |= set(_list_in(branch, "required"))  # every writer document satisfies each branch
        known = dict(r_props)  # the properties a required name may be of: the reader's own, or (a $ref
        for branch in self._branches(reader, "allOf", self.reader_side):  # beside it is one) an allOf branch's
            for name, schema in (branch.get("properties") or {}).items():
                known.setdefault(name, schema)
        for name in reader.get("required") or []:
            if name not in w_required and name in known:  # as Confluent: required names of properties
                has_default = isinstance(known[name], dict) and "default" in known[name]
                if not has_default:
                    problems.append(f"{path}/required/{name}: REQUIRED_ATTRIBUTE_ADDED")
        return problems

    def _branches(self, schema: dict, keyword: str, side: _Side) -> list[dict]:
        """The branches of a combinator keyword, their ``$ref`` followed; ``true`` as ``{}``."""
        found = []
        branches = schema.get(keyword)
        for branch in branches if isinstance(branches, list) else []:
            branch = side.deref(branch)[0]
            found.append({} if branch is True else branch if isinstance(branch, dict) else {"not": {}})
        return found

    def _held_by_branches(self, reader: dict) -> set[str]:
        """The names ``unevaluatedProperties`` leaves to the reader's branches: those an ``allOf``
        branch names, and those every branch of its ``anyOf`` (or ``oneOf``) names."""
        held: set[str] = set()
        for branch in self._branches(reader, "allOf", self.reader_side):
            held |= set(branch.get("properties") or {})
        for keyword in ("anyOf", "oneOf"):
            branches = self._branches(reader, keyword, self.reader_side)
            if branches:
                held |= set.intersection(*(set(b.get("properties") or {}) for b in branches))
        return held

    def _given_by_branches(self, writer: dict, patterns: list, rest: Any) -> dict[str, list[Any]]:
        """The names the writer's branches give that its own ``properties`` and
        ``patternProperties`` do not (with ``additionalProperties`` present, that governs them):
        name -> the schemas a writer document may hold it with, one of which it satisfies. From an
        ``allOf`` branch, that branch's schema (the document satisfies it, whatever else); from
        ``anyOf``/``oneOf``, each branch's, or the content model's for a branch that lacks it."""
        if "additionalProperties" in writer:
            return {}
        own = writer.get("properties") or {}
        given: dict[str, list[Any]] = {}
        for branch in self._branches(writer, "allOf", self.writer_side):
            for name, schema in (branch.get("properties") or {}).items():
                if name not in own and _matching(patterns, name) is None:
                    given.setdefault(name, [schema])
        for keyword in ("anyOf", "oneOf"):
            branches = self._branches(writer, keyword, self.writer_side)
            names = {n for b in branches for n in b.get("properties") or {}}
            for name in sorted(names):
                if name in own or name in given or _matching(patterns, name) is not None:
                    continue
                given[name] = [(b.get("properties") or {}).get(name, rest) for b in branches]
        return given


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


def _schema_in(schema: dict, keyword: str, default: Any) -> Any:
    """The keyword's value when it is a schema (an object or a boolean), else ``default``."""
    value = schema.get(keyword)
    return value if isinstance(value, (dict, bool)) else default


def _own_items(schema: dict) -> tuple[list, Any]:
    """(a schema's own tuple, the schema for its items past the tuple, or None): ``prefixItems``
    and ``items``, or draft 7's list ``items`` and ``additionalItems``, or ``items`` alone. A
    keyword of another draft may hold anything: only a schema, or a list of them, counts."""
    if _is_tuple(schema.get("prefixItems")):
        return schema["prefixItems"], _schema_in(schema, "items", None)
    if _is_tuple(schema.get("items")):
        return schema["items"], _schema_in(schema, "additionalItems", None)
    return [], _schema_in(schema, "items", None)


def _list_in(schema: dict, keyword: str) -> list:
    value = schema.get(keyword)
    return value if isinstance(value, list) else []


def _is_tuple(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, (dict, bool)) for item in value)


def _content_model(schema: dict) -> tuple[str, Any]:
    """(the keyword, its schema) that properties no ``properties``/``patternProperties`` name
    must satisfy: ``additionalProperties``, else ``unevaluatedProperties``, else anything."""
    for keyword in ("additionalProperties", "unevaluatedProperties"):
        if isinstance(schema.get(keyword), (dict, bool)):  # before 2019-09 unevaluated* may hold anything
            return keyword, schema[keyword]
    return "additionalProperties", True


def read_problems(reader: Any, writer: Any) -> list[str]:
    """Why a document valid under ``writer`` may be invalid under ``reader`` (each a parsed schema,
    strom.schemas.json_schema.ParsedJson: its ``schema`` and the ``documents`` its references name);
    empty if none."""
    try:
        if reader.schema == writer.schema and reader.documents == writer.documents:
            return []  # the same schema accepts the same documents (some rules judge it stricter)
    except RecursionError:
        pass
    combined: dict[int, tuple[Any, dict]] = {}
    checker = _Checker(
        _Side(reader.schema, reader.documents, combined), _Side(writer.schema, writer.documents, combined)
    )
    try:
        return checker.check(reader.schema, writer.schema, "#")
    except _TooComplex:
        return [f"#: TOO_COMPLEX: the check needs more than {MAX_STEPS} comparisons of subschemas; refused"]
    except RecursionError:
        return ["#: TOO_COMPLEX: the subschemas nest too deeply to compare; refused"]
