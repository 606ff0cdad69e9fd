"""What a consumer group's members subscribe to and the target assignment computed from it
(KIP-848's server-side assignment).

Topic names are matched as given; a regex (RE2, linear time, the syntax Kafka's RE2/J implements)
is resolved against the topics when they change and stored as record 16, as Kafka 4.0 does. The
target depends on the members' subscriptions and on a signature of the subscribed topics (ids,
partition counts, and the racks of their replicas when a member has a rack), so a change of either
moves the group epoch; the assignor chosen by the members' votes (assignors.py) computes it.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

import re2

from strom.clock import wall_ms
from strom.group import consumer_records as rec
from strom.group.assignors import ASSIGNORS, AssignmentSpec, assignor_name
from strom.group.consumer_records import ConsumerKey, ResolvedRegex, TopicPartitions
from strom.group.consumer_state import ConsumerGroup, ConsumerMember
from strom.group.coordinator_config import GroupCoordinatorConfig

if TYPE_CHECKING:
    from strom.cluster.metadata_cache import MetadataCache

log = logging.getLogger("strom.group")

_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
# A regex is resolved again when the topics change, and at least this often (so that a member's new
# Describe rights show), at the next heartbeat of a member subscribed with it.
_REGEX_REFRESH_S = 10.0


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a bad pattern is the client's error, answered, not logged by RE2


class ConsumerAssignment:
    """Subscriptions and target assignments of consumer groups over the topics in ``metadata``
    (the metadata cache, whose ``topics`` dict is replaced on every change)."""

    def __init__(self, config: GroupCoordinatorConfig, metadata: MetadataCache):
        self.config = config
        self.metadata = metadata
        self._regex_cache: dict[str, re2._Regexp | None] = {}
        # pattern -> (the metadata's topic dict it was matched against, its size, the matches): the
        # cache replaces that dict on every change, so a regex is matched again only after a change
        self._matches: dict[str, tuple[object, int, frozenset[str]]] = {}
        self.regex_version = 0  # Version of record 16: resolutions made here (after the loaded ones)

    @property
    def assignors(self) -> list[str]:
        return [name for name in (assignor_name(a) for a in self.config.group_consumer_assignors) if name]

    def topic_names(self) -> dict[uuid.UUID, str]:
        return {info.topic_id: name for name, info in self.metadata.topics.items()}

    def by_id(self, partitions: dict[str, set[int]]) -> TopicPartitions:
        """Partitions by topic name (as classic members name them) by topic id; unknown topics go."""
        topics = self.metadata.topics
        return {topics[t].topic_id: frozenset(p) for t, p in partitions.items() if t in topics and p}

    def by_name(self, partitions: TopicPartitions) -> dict[str, frozenset[int]]:
        names = self.topic_names()
        return {names[t]: p for t, p in partitions.items() if t in names and p}

    def pattern(self, regex: str) -> re2._Regexp | None:
        """RE2 (linear time, the syntax Kafka's RE2/J implements): a client's pattern cannot make
        the broker backtrack for minutes, as ``(a+)+b`` would with Python's ``re``."""
        if regex not in self._regex_cache:
            try:
                self._regex_cache[regex] = re2.compile(regex, _RE2_OPTIONS)
            except (re2.error, TypeError, ValueError):
                self._regex_cache[regex] = None
            if len(self._regex_cache) > 1024:
                self._regex_cache.pop(next(iter(self._regex_cache)))
        return self._regex_cache[regex]

    def subscribed(self, group: ConsumerGroup, member: ConsumerMember) -> frozenset[str]:
        """The existing topics a member subscribes to: its names and what its regex resolved to
        in the group (a regex never resolved in it, e.g. of a group stored before strom wrote
        key 16, matches as it stands until a member with it heartbeats)."""
        topics = self.metadata.topics
        named = frozenset(t for t in member.subscribed_topic_names if t in topics)
        regex = member.subscribed_topic_regex
        if regex is None:
            return named
        resolved = group.regexes.get(regex)
        if resolved is None:
            return named | self.matching(regex)
        return named | frozenset(t for t in resolved.topics if t in topics)

    def matching(self, regex: str) -> frozenset[str]:
        """The topics ``regex`` matches whole (RE2/J's matches(); internal topics never match)."""
        pattern = self.pattern(regex)
        if pattern is None:
            return frozenset()
        topics = self.metadata.topics
        cached = self._matches.get(regex)
        if cached is None or cached[0] is not topics or cached[1] != len(topics):
            matches = frozenset(t for t in topics if t not in _INTERNAL_TOPICS and pattern.fullmatch(t))
            if len(self._matches) > 1024:
                self._matches.clear()
            cached = self._matches[regex] = (topics, len(topics), matches)
        return cached[2]

    def resolve_regexes(
        self, group: ConsumerGroup, member: ConsumerMember, describable: Callable[[str], bool] | None
    ) -> list[tuple[bytes, bytes | None]]:
        """Kafka 4.0's regex resolution: the member's regex is matched against the topics again
        when they changed (or after _REGEX_REFRESH_S), keeping only those the member may Describe
        when an authorizer is on (KAFKA-18813); a changed result is stored as record 16, and the
        records of regexes no member uses any more are deleted."""
        entries: list[tuple[bytes, bytes | None]] = []
        regex = member.subscribed_topic_regex
        if regex is not None and self.pattern(regex) is not None:
            topics = self.metadata.topics
            basis = group.regex_basis.get(regex)
            now = time.monotonic()
            stale = (
                regex not in group.regexes
                or basis is None
                or basis[0] is not topics
                or basis[1] != len(topics)
                or now - basis[2] >= _REGEX_REFRESH_S
            )
            if stale:
                matched = self.matching(regex)
                if describable is not None:
                    matched = frozenset(t for t in matched if describable(t))
                group.regex_basis[regex] = (topics, len(topics), now)
                old = group.regexes.get(regex)
                if old is None or old.topics != matched:
                    self.regex_version += 1
                    group.regexes[regex] = ResolvedRegex(matched, self.regex_version, wall_ms())
                    entries.append(
                        (
                            rec.encode_key(ConsumerKey(rec.REGULAR_EXPRESSION, group.group_id, regex)),
                            rec.encode_regex(group.regexes[regex]),
                        )
                    )
        entries += self.unused_regexes(group)
        return entries

    def unused_regexes(self, group: ConsumerGroup) -> list[tuple[bytes, bytes | None]]:
        used = {m.subscribed_topic_regex for m in group.members.values()}
        entries: list[tuple[bytes, bytes | None]] = []
        for regex in [r for r in group.regexes if r not in used]:
            del group.regexes[regex]
            group.regex_basis.pop(regex, None)
            entries.append((rec.encode_key(ConsumerKey(rec.REGULAR_EXPRESSION, group.group_id, regex)), None))
        return entries

    def signature(self, group: ConsumerGroup) -> tuple:
        """What the target depends on besides the members: the subscribed topics, and, when a
        member has a rack, the racks of their replicas (a broker moving racks moves partitions)."""
        topics = self.metadata.topics
        names = set().union(*(self.subscribed(group, m) for m in group.members.values())) if group.members else set()
        signature: tuple = tuple(sorted((n, str(topics[n].topic_id), topics[n].partition_count) for n in names))
        if any(m.rack_id for m in group.members.values()):
            signature += tuple(tuple(self.partition_racks(n)) for n in sorted(names))
        return signature

    def partition_racks(self, topic: str) -> list[frozenset[str]]:
        """The racks of each partition's replicas (empty where brokers have no broker.rack)."""
        metadata = self.metadata
        brokers = getattr(metadata, "brokers", {})
        info = metadata.topics[topic]
        return [
            frozenset(r for r in (getattr(brokers.get(b), "rack", None) for b in info.replicas.get(p, ())) if r)
            for p in range(info.partition_count)
        ]

    def compute_target(self, group: ConsumerGroup) -> list[tuple[bytes, bytes | None]]:
        topics = self.metadata.topics
        names = self.topic_names()
        votes = Counter(m.server_assignor for m in group.members.values() if m.server_assignor)
        chosen = max(sorted(votes), key=lambda n: votes[n]) if votes else (self.assignors or ["uniform"])[0]
        subscriptions = {m.member_id: self.subscribed(group, m) for m in group.members.values()}
        counts = {t: topics[t].partition_count for subs in subscriptions.values() for t in subs}
        racks = {m.member_id: m.rack_id for m in group.members.values() if m.rack_id}
        spec = AssignmentSpec(
            subscriptions,
            counts,
            {
                m: {names[tid]: parts for tid, parts in target.items() if tid in names}
                for m, target in group.target.items()
                if m in subscriptions
            },
            racks,
            {t: self.partition_racks(t) for t in counts} if racks else {},
        )
        result = ASSIGNORS[chosen](spec)
        entries: list[tuple[bytes, bytes | None]] = []
        new_target: dict[str, TopicPartitions] = {}
        for member_id, by_name in result.items():
            new_target[member_id] = {topics[t].topic_id: frozenset(p) for t, p in by_name.items() if p}
            if new_target[member_id] != group.target.get(member_id):
                entries.append(
                    (
                        rec.encode_key(ConsumerKey(rec.TARGET_MEMBER, group.group_id, member_id)),
                        rec.encode_target(new_target[member_id]),
                    )
                )
        group.target = new_target
        group.assignment_epoch = group.group_epoch
        entries.append(
            (rec.encode_key(ConsumerKey(rec.TARGET_METADATA, group.group_id)), rec.encode_epoch(group.assignment_epoch))
        )
        log.info(
            "consumer group %s: target assignment of epoch %d by %s: %s",
            group.group_id,
            group.assignment_epoch,
            chosen,
            {m: {names.get(t, str(t)): sorted(p) for t, p in a.items()} for m, a in new_target.items()},
        )
        return entries
