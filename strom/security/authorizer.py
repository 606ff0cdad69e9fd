"""strom's ACL authorizer: Kafka's AclAuthorizer over the metadata store.

ACLs are read from Kafka's znodes (see ``strom.security.acl``) on every broker and kept current
through Kafka's change notifications (/kafka-acl-changes, /kafka-acl-extended-changes), so an
ACL created through one broker, or by Kafka's tools, holds on all of them without a restart. A
decision is made as Kafka makes it:

1. a principal in ``super.users`` may do anything;
2. the ACLs that apply to a resource are the LITERAL ones on its name, the LITERAL ``*`` ones and
   the PREFIXED ones whose prefix starts its name; with none at all the answer is
   ``allow.everyone.if.no.acl.found``;
3. a DENY for the principal (or ``User:*``), the host (or ``*``) and the operation (or All) wins;
4. otherwise an ALLOW of the operation, of All, or of an operation that implies it
   (Read/Write/Delete/Alter imply Describe, AlterConfigs implies DescribeConfigs) allows.

Decisions are cached per (principal, host, operation, resource) and the cache is dropped whenever
the ACLs change, so a busy producer costs one dict lookup per topic. Every denial is logged on
``strom.authorizer`` at INFO, at most ``LOG_LINES_PER_S`` lines a second (the rest are counted).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from typing import Any

from strom.cluster.store import (
    BadVersionError,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
)
from strom.cluster.watched import WatchedView
from strom.security.acl import (
    CHANGE_EXPIRATION_MS,
    CHANGE_PREFIX,
    EXTENDED_CHANGES,
    IMPLIED_BY,
    LITERAL_CHANGES,
    LITERAL_ROOT,
    PREFIXED_ROOT,
    RESOURCE_NAMES,
    WILDCARD,
    AccessControlEntry,
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
    change_node,
    decode_acls,
    encode_acls,
    pattern_from_change,
    pattern_from_path,
)

log = logging.getLogger("strom.authorizer")

# Kafka's class names select strom's authorizer, so an existing server.properties works as it is.
AUTHORIZER_CLASS_NAMES = (
    "strom.security.authorizer.AclAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
)
LOG_LINES_PER_S = 10
_CACHE_LIMIT = 100_000


def host_of(peer: str) -> str:
    """The client's address without its port ("127.0.0.1:5123" -> "127.0.0.1", IPv6 too)."""
    host = peer.rpartition(":")[0] if ":" in peer else peer
    return host.strip("[]")


class AclAuthorizer(WatchedView):
    what = "ACLs"

    def __init__(
        self,
        store: MetadataStore,
        super_users: Iterable[str] = (),
        allow_if_no_acl: bool = False,
        loop: asyncio.AbstractEventLoop | None = None,
    ):
        self.store = store
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        super().__init__(loop)
        self.acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        # per resource type: LITERAL name -> entries, and the PREFIXED (prefix, entries) pairs
        self._literal: dict[ResourceType, dict[str, frozenset[AccessControlEntry]]] = {}
        self._prefixed: dict[ResourceType, list[tuple[str, frozenset[AccessControlEntry]]]] = {}
        self._decisions: dict[tuple[str, str, int, int, str], bool] = {}
        self._roots_made = False
        self._loaded = False
        self._last_change: dict[str, int] = {}  # per change path, the sequence number applied last
        self._change_ctimes: dict[str, dict[str, int]] = {}
        self._log_window = 0.0
        self._log_lines = 0
        self._suppressed = 0

    # -- decisions ---------------------------------------------------------------------------------
    def authorize(
        self,
        principal: str,
        host: str,
        operation: Operation,
        resource_type: ResourceType,
        name: str,
        peer: str = "",
        log_denied: bool = True,
    ) -> bool:
        key = (principal, host, operation, resource_type, name)
        allowed = self._decisions.get(key)
        if allowed is None:
            allowed = self._decide(principal, host, operation, resource_type, name)
            if len(self._decisions) >= _CACHE_LIMIT:
                self._decisions = {}
            self._decisions[key] = allowed
        if not allowed and log_denied:
            self._log_denial(principal, host, operation, resource_type, name, peer)
        return allowed

    def _matching(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        found: list[AccessControlEntry] = []
        literal = self._literal.get(resource_type)
        if literal:
            found.extend(literal.get(name, ()))
            if name != WILDCARD:
                found.extend(literal.get(WILDCARD, ()))
        for prefix, entries in self._prefixed.get(resource_type, ()):
            if name.startswith(prefix):
                found.extend(entries)
        return found

    def _decide(self, principal: str, host: str, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        if principal in self.super_users:
            return True
        entries = self._matching(resource_type, name)
        if not entries:
            return self.allow_if_no_acl
        applicable = [e for e in entries if e.principal in (principal, "User:*") and e.host in (host, WILDCARD)]
        if any(e.permission == Permission.DENY and e.operation in (operation, Operation.ALL) for e in applicable):
            return False
        allowing = (operation, Operation.ALL, *IMPLIED_BY.get(operation, ()))
        return any(e.permission == Permission.ALLOW and e.operation in allowing for e in applicable)

    def authorize_any(self, principal: str, host: str, operation: Operation, resource_type: ResourceType) -> bool:
        """Whether the principal may ``operation`` some resource of the type (Kafka's
        authorizeByResourceType): an ALLOW on any pattern not undone by a DENY on the wildcard."""
        if principal in self.super_users:
            return True
        entries = [e for pattern, es in self.acls.items() if pattern.resource_type == resource_type for e in es]
        if not entries:
            return self.allow_if_no_acl
        mine = [e for e in entries if e.principal in (principal, "User:*") and e.host in (host, WILDCARD)]
        wildcard = self._literal.get(resource_type, {}).get(WILDCARD, ())
        if any(
            e.permission == Permission.DENY
            and e.operation in (operation, Operation.ALL)
            and e.principal in (principal, "User:*")
            and e.host in (host, WILDCARD)
            for e in wildcard
        ):
            return False
        return any(e.permission == Permission.ALLOW and e.operation in (operation, Operation.ALL) for e in mine)

    def authorized_operations(
        self, principal: str, host: str, resource_type: ResourceType, name: str, operations: Iterable[Operation]
    ) -> int:
        """The bit set of KIP-430's *_authorized_operations fields."""
        bits = 0
        for operation in operations:
            if self.authorize(principal, host, operation, resource_type, name, log_denied=False):
                bits |= 1 << int(operation)
        return bits

    def _log_denial(
        self, principal: str, host: str, operation: Operation, resource_type: ResourceType, name: str, peer: str
    ) -> None:
        now = time.monotonic()
        if now - self._log_window >= 1.0:
            if self._suppressed:
                log.info("%d more authorization denials in the last second were not logged", self._suppressed)
            self._log_window, self._log_lines, self._suppressed = now, 0, 0
        if self._log_lines >= LOG_LINES_PER_S:
            self._suppressed += 1
            return
        self._log_lines += 1
        log.info(
            "Principal = %s is Denied operation = %s from host = %s on resource = %s:LITERAL:%s (peer %s)",
            principal,
            operation.name,
            host,
            RESOURCE_NAMES.get(resource_type, resource_type.name),
            name,
            peer or host,
        )

    # -- the ACLs and their change notifications --------------------------------------------------
    def load(self) -> None:
        """Read every ACL znode the first time, then only the patterns named by new change notifications.

        As Kafka's AclAuthorizer, a broker watches the two change paths rather than every ACL znode:
        a change costs each broker one read of the changed pattern, whatever the number of ACLs. The
        notifications are listed after the full read, so a change made in between is applied again.
        """
        if not self._roots_made:  # once: the children watches need the roots to exist
            for root in (LITERAL_ROOT, PREFIXED_ROOT, LITERAL_CHANGES, EXTENDED_CHANGES):
                self.store.ensure_path(root)
            self._roots_made = True
        if not self._loaded:
            self._install(self._read_all())
            self._loaded = True
        self._apply_changes()

    def _read_all(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        for root in (LITERAL_ROOT, PREFIXED_ROOT):
            for type_name in self.store.children(root):
                try:
                    nodes = self.store.children(f"{root}/{type_name}")
                except NoNodeError:
                    continue
                for node in nodes:
                    pattern = pattern_from_path(root, type_name, node)
                    if pattern is not None and (entries := self._read_pattern(pattern)):
                        acls[pattern] = entries
        return acls

    def _read_pattern(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        try:
            data, _ = self.store.get(pattern.path())
            return frozenset(decode_acls(data))
        except NoNodeError:
            return frozenset()
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring the unreadable ACLs of %s: %s", pattern, exc)
            return frozenset()

    def _apply_changes(self) -> None:
        """Re-read the patterns that notifications newer than the last applied one name, then purge
        the notifications older than CHANGE_EXPIRATION_MS (any broker may; a node gone is fine)."""
        changed: set[ResourcePattern] = set()
        reread_all = False
        for root in (LITERAL_CHANGES, EXTENDED_CHANGES):
            names = [n for n in self.store.children(root, self.watch) if n.startswith(CHANGE_PREFIX)]
            last = self._last_change.get(root, -1)
            for name in names:
                try:
                    sequence = int(name[len(CHANGE_PREFIX) :])
                except ValueError:
                    continue
                if sequence <= last:
                    continue
                try:
                    data, _ = self.store.get(f"{root}/{name}")
                    changed.add(pattern_from_change(root, data))
                except NoNodeError:
                    pass  # purged meanwhile; its change is older than any broker's view
                except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
                    log.warning("unreadable ACL change notification %s/%s (%s): reading every ACL", root, name, exc)
                    reread_all = True
                last = sequence
            self._last_change[root] = last
            self._purge(root, names)
        if reread_all:
            self._install(self._read_all())
        elif changed:
            acls = dict(self.acls)
            for pattern in changed:
                entries = self._read_pattern(pattern)
                if entries:
                    acls[pattern] = entries
                else:
                    acls.pop(pattern, None)
            self._install(acls)

    def _purge(self, root: str, names: list[str]) -> None:
        expired_before = int(time.time() * 1000) - CHANGE_EXPIRATION_MS
        known = self._change_ctimes.setdefault(root, {})
        for name in set(known) - set(names):
            del known[name]
        for name in names:
            path = f"{root}/{name}"
            try:
                if name not in known:
                    known[name] = self.store.ctime_ms(path)  # a notification never changes: stat it once
                if known[name] < expired_before:
                    self.store.delete(path)
                    del known[name]
            except NoNodeError:
                known.pop(name, None)

    def _install(self, acls: dict[ResourcePattern, frozenset[AccessControlEntry]]) -> None:
        literal: dict[ResourceType, dict[str, frozenset[AccessControlEntry]]] = {}
        prefixed: dict[ResourceType, list[tuple[str, frozenset[AccessControlEntry]]]] = {}
        for pattern, entries in acls.items():
            if pattern.pattern_type == PatternType.PREFIXED:
                prefixed.setdefault(pattern.resource_type, []).append((pattern.name, entries))
            else:
                literal.setdefault(pattern.resource_type, {})[pattern.name] = entries
        self.acls, self._literal, self._prefixed = acls, literal, prefixed
        self._decisions = {}

    # -- CreateAcls / DescribeAcls / DeleteAcls ----------------------------------------------------
    def describe(self, acl_filter: AclFilter) -> list[AclBinding]:
        return [
            AclBinding(pattern, entry)
            for pattern, entries in sorted(self.acls.items())
            if acl_filter.matches_pattern(pattern)
            for entry in sorted(entries)
            if acl_filter.matches_entry(entry)
        ]

    def create(self, bindings: list[AclBinding]) -> None:
        by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for binding in bindings:
            by_pattern.setdefault(binding.pattern, set()).add(binding.entry)
        for pattern, entries in by_pattern.items():
            self._update(pattern, lambda current, add=entries: current | add)
        self.load()

    def delete(self, filters: list[AclFilter]) -> list[list[AclBinding]]:
        """The bindings each filter removed (one binding may match several filters, as in Kafka)."""
        self.load()  # decide on what the store holds now, not on a cache a watch has yet to refresh
        matched = [self.describe(f) for f in filters]
        by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for bindings in matched:
            for binding in bindings:
                by_pattern.setdefault(binding.pattern, set()).add(binding.entry)
        for pattern, entries in by_pattern.items():
            self._update(pattern, lambda current, gone=entries: current - gone)
        self.load()
        return matched

    def _update(self, pattern: ResourcePattern, change: Any) -> None:
        """Compare-and-set on the pattern's znode, so brokers writing at once lose nothing."""
        path = pattern.path()
        while True:
            try:
                data, version = self.store.get(path)
                current = decode_acls(data)
            except NoNodeError:
                current, version = set(), None
            wanted = change(current)
            if wanted == current:
                return
            try:
                if version is None:
                    self.store.create(path, encode_acls(wanted), makepath=True)
                elif wanted:
                    self.store.set(path, encode_acls(wanted), version)
                else:
                    self.store.delete(path, version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue  # another broker wrote it meanwhile: read again
            self.store.create_sequential(*change_node(pattern))  # tells every broker (and Kafka's) to re-read it
            return
