"""Fetch sessions (KIP-227): the leader remembers what a fetcher asked for, so that a fetch
names only what changed and its response lists only partitions with something new.

A request's (session_id, session_epoch) says what it is:

    (0, -1)    sessionless full fetch (FINAL_EPOCH), as before KIP-227
    (0, 0)     full fetch that asks for a session; the response carries its id, or 0 when the
               cache has no room
    (id, 0)    closes session ``id``, then as (0, 0);   (id, -1) closes it, then as (0, -1)
    (id, n>0)  incremental: ``n`` must be the session's next epoch. ``topics`` add or update
               partitions, ``forgotten_topics_data`` removes them; the others keep the fetch
               offset and limits of their last mention.

An incremental response lists a partition only when it has records, an error, or a high
watermark, last stable offset or log start offset other than the one last sent. Partitions with
nothing new are not even looked at: ``IncrementalContext.plan`` considers only the partitions the
purgatory was notified about since the session's last request (appends, high watermark and
leader changes), those the request named and those still owed data; a full pass over the
session, a few attribute compares per partition and no log access, runs at most every
FULL_SCAN_MS (it catches what is not notified, such as a log start moved by retention).
Partitions that returned records move to the end of the session, so a response cut short by
``max_bytes`` serves the others first next time (Kafka does the same).

A follower's idle partitions are not touched either, yet count for the ISR as Kafka counts them
(Kafka records every session partition on every follower fetch): each is linked to its session
(``FollowerState.fetched``), so the leader knows that the follower fetched it, unchanged, at the
session's every request. A request names no partition twice in a row without a reason: every
partition of a request is either read (and recorded) or idle, that is the follower already has
the leader's log end, which is what makes a follower caught up at that request.

A session learns what changed by subscribing its partitions to the purgatory
(``Purgatory.subscribe``) from its first incremental request until it is closed or evicted.

The cache holds ``max.incremental.fetch.session.cache.slots`` sessions. When it is full, a new
session may take the slot of (Kafka's rules): the least recently used session when it has been
idle longer than ``min.incremental.fetch.session.eviction.ms``; else the smallest session by
(privileged, partition count, id) that is older than that, where followers' sessions are
privileged and a follower may also evict any consumer session, however young.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from strom.protocol.errors import ErrorCode

INVALID_SESSION_ID = 0
FULL_SCAN_MS = 1000  # an idle follower long-polls every replica.fetch.wait.max.ms (500)
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_EPOCH = 2**31 - 1


def next_epoch(epoch: int) -> int:
    """Epochs run 1..2^31-1 and wrap to 1; 0 and -1 are reserved for full fetches."""
    return 1 if epoch >= _MAX_EPOCH else epoch + 1


class CachedPartition:
    """One partition of a session: the fetcher's last request and the leader's last answer.

    Its request attributes carry the names of kio's FetchPartition, so the fetch handler reads
    a session partition and a request partition alike.
    """

    __slots__ = (
        "current_leader_epoch",
        "dirty",
        "fetch_offset",
        "high_watermark",
        "last_stable_offset",
        "leader_log_start_offset",
        "log_start_offset",
        "partition",
        "partition_max_bytes",
        "replica",
        "replica_epoch",
        "session",
        "since_ms",
        "topic",
        "topic_id",
    )

    def __init__(self, topic: str | None, topic_id: uuid.UUID | None, wanted: Any, since_ms: int = -1):
        self.topic = topic
        self.topic_id = topic_id
        self.partition: int = wanted.partition
        self.session: FetchSession | None = None  # while it is in one, for the leader's view of followers
        self.since_ms = since_ms  # when the request that brought it into its session came
        self.high_watermark = -1  # never sent: the first response lists it
        self.last_stable_offset = -1
        self.leader_log_start_offset = -1
        self.replica: Any = None  # the Partition that answered last, while it stays the same leader
        self.replica_epoch = -1
        self.update(wanted)

    def update(self, wanted: Any) -> None:
        self.fetch_offset: int = wanted.fetch_offset
        self.partition_max_bytes: int = wanted.partition_max_bytes
        self.log_start_offset: int = getattr(wanted, "log_start_offset", -1)
        self.current_leader_epoch: int = getattr(wanted, "current_leader_epoch", -1)
        self.dirty = True  # read it next time, whatever the leader's state

    def respond(self, data: Any, replica: Any) -> bool:
        """Whether ``data`` (the handler's PartitionData) is news for the fetcher; remembers it."""
        must = (
            bool(data.slices)
            or data.error_code != 0
            or data.high_watermark != self.high_watermark
            or data.last_stable_offset != self.last_stable_offset
            or data.log_start_offset != self.leader_log_start_offset
        )
        if data.error_code:
            # forget what was sent: when the error goes away, the partition is sent again
            self.high_watermark = -1
            self.replica = None
        else:
            self.high_watermark = data.high_watermark
            self.replica = replica
            self.replica_epoch = replica.leader_epoch if replica is not None else -1
        self.last_stable_offset = data.last_stable_offset
        self.leader_log_start_offset = data.log_start_offset
        self.dirty = False
        return must

    def idle(self, replica: Any, for_replica: bool, read_committed: bool) -> bool:
        """Nothing to send: same leader and epoch, same HW and log start, nothing past the fetch offset."""
        if (
            self.dirty
            or replica is not self.replica
            or replica.leader_epoch != self.replica_epoch
            or not replica.is_leader
        ):
            return False
        log = replica.log
        high_watermark = log.high_watermark
        if high_watermark != self.high_watermark or log.log_start_offset != self.leader_log_start_offset:
            return False
        if for_replica:
            return log.log_end_offset <= self.fetch_offset
        if read_committed:
            stable = log.last_stable_offset
            return stable == self.last_stable_offset and stable <= self.fetch_offset
        return high_watermark <= self.fetch_offset


class TopicGroup:
    """Partitions of one topic to read, named (``topic``, None when an id is unknown) and keyed
    as the response names them (``key``: the name before Fetch v13, the topic id from v13)."""

    __slots__ = ("key", "partitions", "topic", "topic_id")

    def __init__(self, topic: str | None, topic_id: uuid.UUID | None, key: Any, partitions: list):
        self.topic = topic
        self.topic_id = topic_id
        self.key = key
        self.partitions = partitions


class FetchSession:
    __slots__ = (
        "_by_name",
        "_keys",
        "changed",
        "closed",
        "creation_ms",
        "epoch",
        "id",
        "last_used_ms",
        "partitions",
        "pending",
        "previous_used_ms",
        "privileged",
        "scanned_ms",
        "subscribed",
        "uses_topic_ids",
    )

    def __init__(
        self,
        session_id: int,
        privileged: bool,
        uses_topic_ids: bool,
        partitions: dict[tuple[Any, int], CachedPartition],
        now_ms: int,
    ):
        self.id = session_id
        self.privileged = privileged
        self.uses_topic_ids = uses_topic_ids
        self.partitions = partitions
        self.epoch = next_epoch(INITIAL_EPOCH)
        self.creation_ms = now_ms
        self.last_used_ms = now_ms  # the request being served, or the last one
        self.previous_used_ms = now_ms  # the request before it
        self.closed = False  # evicted or closed: its partitions no longer count as fetched
        for cached in partitions.values():  # they join at its creation
            cached.session = self
            cached.since_ms = now_ms
        self._keys: list[tuple[str, int]] | None = None
        self._by_name: dict[tuple[str, int], CachedPartition] | None = None
        # read on the next request whatever changed: named by a request, in error, or still owed
        # data; the rest are read when the purgatory marks them changed (``changed``)
        self.pending: set[CachedPartition] = set(partitions.values())
        # the purgatory adds a partition's key here when it changes (appends, HW and leader moves),
        # once the session has subscribed (its first incremental request: until then all is read)
        self.changed: set[tuple[str, int]] = set()
        self.subscribed: Any = None  # the purgatory it subscribed to
        self.scanned_ms = -FULL_SCAN_MS  # the last full pass

    def subscribe(self, purgatory: Any) -> None:
        self.subscribed = purgatory
        purgatory.subscribe(self.watch_keys(), self.changed)

    def close(self) -> None:
        """Evicted or closed: its partitions no longer count as fetched, nor are changes tracked."""
        self.closed = True
        if self.subscribed is not None:
            self.subscribed.unsubscribe(self.watch_keys(), self.changed)
            self.subscribed = None

    def watch_keys(self) -> list[tuple[str, int]]:
        """The purgatory keys a long-poll on this session waits on (kept until the set changes)."""
        if self._keys is None:
            self._keys = [(cp.topic, cp.partition) for cp in self.partitions.values() if cp.topic is not None]
        return self._keys

    def by_name(self) -> dict[tuple[str, int], CachedPartition]:
        if self._by_name is None:
            self._by_name = {(cp.topic, cp.partition): cp for cp in self.partitions.values() if cp.topic is not None}
        return self._by_name

    def apply(self, groups: list[TopicGroup], forgotten: list[tuple[Any, int]]) -> None:
        partitions = self.partitions
        purgatory = self.subscribed
        for key in forgotten:
            gone = partitions.pop(key, None)
            if gone is not None:
                gone.session = None
                self.pending.discard(gone)
                self._keys = self._by_name = None
                if purgatory is not None and gone.topic is not None:
                    purgatory.unsubscribe([(gone.topic, gone.partition)], self.changed)
        for group in groups:
            topic_key = group.topic_id if self.uses_topic_ids else group.topic
            for wanted in group.partitions:
                key = (topic_key, wanted.partition)
                cached = partitions.get(key)
                if cached is None:
                    cached = partitions[key] = CachedPartition(group.topic, group.topic_id, wanted, self.last_used_ms)
                    cached.session = self
                    self._keys = self._by_name = None
                    if purgatory is not None and group.topic is not None:
                        purgatory.subscribe([(group.topic, wanted.partition)], self.changed)
                else:
                    cached.update(wanted)
                self.pending.add(cached)


class FetchSessionCache:
    """Sessions by id, in least-recently-used order (a dict keeps insertion order)."""

    def __init__(self, max_entries: int, eviction_ms: int, clock: Callable[[], float] = time.monotonic):
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self._clock = clock
        self.sessions: dict[int, FetchSession] = {}
        self.evictions = 0

    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def remove(self, session_id: int) -> FetchSession | None:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            session.close()
        return session

    def touch(self, session: FetchSession, now_ms: int) -> None:
        session.previous_used_ms = session.last_used_ms
        session.last_used_ms = now_ms
        sessions = self.sessions
        if sessions.pop(session.id, None) is not None:
            sessions[session.id] = session

    def create(
        self, privileged: bool, uses_topic_ids: bool, partitions: dict[tuple[Any, int], CachedPartition]
    ) -> FetchSession | None:
        """A new session, or None when the cache is full and nothing may be evicted for it."""
        now = self.now_ms()
        if len(self.sessions) >= self.max_entries and not self._evict_for(privileged, len(partitions), now):
            return None
        session_id = random.randint(1, _MAX_EPOCH)
        while session_id in self.sessions:
            session_id = random.randint(1, _MAX_EPOCH)
        session = self.sessions[session_id] = FetchSession(session_id, privileged, uses_topic_ids, partitions, now)
        return session

    def _evict_for(self, privileged: bool, size: int, now: int) -> bool:
        if not self.sessions:
            return False
        oldest = next(iter(self.sessions.values()))
        if now - oldest.last_used_ms > self.eviction_ms:
            self._evict(oldest)
            return True
        victim, victim_key = None, None
        for session in self.sessions.values():
            old = now - session.creation_ms > self.eviction_ms
            if old or (privileged and not session.privileged):
                key = (session.privileged, len(session.partitions), session.id)
                if victim_key is None or key < victim_key:
                    victim, victim_key = session, key
        # the newcomer's key is (privileged, size, 0): it evicts only what ranks below it
        if victim is None or victim_key is None or (privileged, size, 0) < victim_key:
            return False
        self._evict(victim)
        return True

    def _evict(self, session: FetchSession) -> None:
        del self.sessions[session.id]
        session.close()
        self.evictions += 1


# -- what one Fetch request reads and answers ------------------------------------------------------
class FetchContext:
    """Sessionless: read what the request lists, answer all of it, session id 0."""

    error_code = 0
    incremental = False
    session: FetchSession | None = None

    def __init__(self, topics: list, watch: list[tuple[str, int]] | None = None):
        self.topics = topics
        self._watch = watch

    def plan(self, replicas: Any, for_replica: bool, read_committed: bool) -> list:
        """The topics to read (an incremental session leaves out its idle partitions)."""
        return self.topics

    def watch_keys(self) -> list[tuple[str, int]]:
        if self._watch is None:
            self._watch = [(t.topic, p.partition) for t in self.topics if t.topic is not None for p in t.partitions]
        return self._watch

    @property
    def empty(self) -> bool:
        return not self.topics

    def news(self, results: list) -> bool:
        """Whether a follower should be answered now for something other than bytes (a HW move)."""
        return False

    def finish(self, topics: list, results: list, replicas: Any) -> tuple[list, int]:
        return results, INVALID_SESSION_ID


class ErrorContext(FetchContext):
    def __init__(self, error_code: int):
        super().__init__([], [])
        self.error_code = error_code


class FullContext(FetchContext):
    """A full fetch that opens a session when the cache takes one."""

    def __init__(self, cache: FetchSessionCache, topics: list, replica_id: int, uses_topic_ids: bool):
        super().__init__(topics)
        self._cache = cache
        self._replica_id = replica_id  # a follower's broker id, -1 for a consumer
        self._uses_topic_ids = uses_topic_ids

    def finish(self, topics: list, results: list, replicas: Any) -> tuple[list, int]:
        if self._cache.max_entries <= 0 or not topics:
            return results, INVALID_SESSION_ID
        partitions: dict[tuple[Any, int], CachedPartition] = {}
        by_key = replicas.partitions
        now = self._cache.now_ms()
        replica_id = self._replica_id
        followed = []
        for group, (_, datas) in zip(topics, results):
            name = group.topic
            topic_id = getattr(group, "topic_id", None)
            topic_key = topic_id if self._uses_topic_ids else name
            for wanted, data in zip(group.partitions, datas):
                cached = CachedPartition(name, topic_id, wanted, now)
                replica = by_key.get((name, wanted.partition))
                cached.respond(data, replica)
                partitions[(topic_key, wanted.partition)] = cached
                if replica_id >= 0 and replica is not None:
                    followed.append((replica, cached))
        session = self._cache.create(replica_id >= 0, self._uses_topic_ids, partitions)
        if session is None:
            return results, INVALID_SESSION_ID
        for replica, cached in followed:  # this request recorded them; the session's next ones count too
            follower = replica.followers.get(replica_id)
            if follower is not None:
                follower.fetched = cached
        return results, session.id


class IncrementalContext(FetchContext):
    incremental = True

    def __init__(self, session: FetchSession):
        super().__init__([])
        self.session = session
        self._live = session  # the same, typed as present
        self._flags = (session.privileged, False)

    @property
    def empty(self) -> bool:
        return not self._live.partitions

    def watch_keys(self) -> list[tuple[str, int]]:
        return self._live.watch_keys()

    def plan(self, replicas: Any, for_replica: bool, read_committed: bool) -> list:
        session = self._live
        self._flags = (for_replica, read_committed)
        by_key = replicas.partitions
        suspect = replicas.fenced or bool(replicas.offline)  # then every partition is read and checked
        changes = session.changed
        unseen = session.subscribed is None
        if unseen:
            session.subscribe(replicas.purgatory)
        now = int(time.monotonic() * 1000)
        candidates: Iterable[CachedPartition]
        if unseen or suspect or now - session.scanned_ms >= FULL_SCAN_MS:
            session.scanned_ms = now
            candidates = session.partitions.values()
        else:
            index = session.by_name()
            wanted = dict.fromkeys(session.pending)
            for changed in changes:
                cached = index.get(changed)
                if cached is not None:
                    wanted[cached] = None
            candidates = wanted
        changes.clear()  # before reading: what changes from here is seen next time
        groups: list[TopicGroup] = []
        group = None
        pending = session.pending
        for cached in candidates:
            replica = by_key.get((cached.topic, cached.partition))
            if replica is not None and not suspect and cached.idle(replica, for_replica, read_committed):
                pending.discard(cached)
                continue
            pending.add(cached)  # read until it is idle, through every pass of a long poll
            if group is None or group.topic != cached.topic or group.topic_id != cached.topic_id:
                key = cached.topic_id if self._live.uses_topic_ids else cached.topic
                group = TopicGroup(cached.topic, cached.topic_id, key, [])
                groups.append(group)
            group.partitions.append(cached)
        self.topics = groups
        return groups

    def news(self, results: list) -> bool:
        if not self._live.privileged:
            return False  # consumers wait for fetch.min.bytes; a HW move alone brings them no records
        for group, (_, datas) in zip(self.topics, results):
            for cached, data in zip(group.partitions, datas):
                if (
                    data.high_watermark != cached.high_watermark
                    or data.log_start_offset != cached.leader_log_start_offset
                ):
                    return True
        return False

    def finish(self, topics: list, results: list, replicas: Any) -> tuple[list, int]:
        by_key = replicas.partitions
        partitions = self._live.partitions
        answered: list = []
        moved: list = []
        pending = self._live.pending
        for_replica, read_committed = self._flags
        for group, (key, datas) in zip(topics, results):
            kept = []
            for cached, data in zip(group.partitions, datas):
                replica = by_key.get((cached.topic, cached.partition))
                if cached.respond(data, replica):
                    kept.append(data)
                    if data.slices:
                        moved.append(cached)
                if replica is not None and cached.idle(replica, for_replica, read_committed):
                    pending.discard(cached)
                else:
                    pending.add(cached)  # owed data (the client moves its offset next) or in error
            if kept:
                answered.append((key, kept))
        topic_ids = self._live.uses_topic_ids
        for cached in moved:  # served: to the back of the line
            key = (cached.topic_id if topic_ids else cached.topic, cached.partition)
            partitions[key] = partitions.pop(key)
        return answered, self._live.id


def resolve_topics(
    request_topics: Iterable[Any], uses_topic_ids: bool, names_by_id: Callable[[uuid.UUID], str | None]
) -> list:
    """Request topics as the handler reads them: kio's own objects before v13 (they have a name),
    TopicGroups naming each topic id's topic from v13 (None: an unknown id)."""
    if not uses_topic_ids:
        return list(request_topics)
    return [TopicGroup(names_by_id(t.topic_id), t.topic_id, t.topic_id, list(t.partitions)) for t in request_topics]


def new_context(
    cache: FetchSessionCache,
    request: Any,
    replica_id: int,
    uses_topic_ids: bool,
    names_by_id: Callable[[uuid.UUID], str | None],
) -> FetchContext:
    """What this request reads and how it is answered (Kafka's FetchManager.newContext)."""
    session_id = getattr(request, "session_id", INVALID_SESSION_ID)
    epoch = getattr(request, "session_epoch", FINAL_EPOCH)
    if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
        if session_id != INVALID_SESSION_ID:
            cache.remove(session_id)  # a full fetch closes the session it names
        topics = resolve_topics(request.topics, uses_topic_ids, names_by_id)
        if epoch == FINAL_EPOCH:
            return FetchContext(topics)
        return FullContext(cache, topics, replica_id, uses_topic_ids)
    if epoch < FINAL_EPOCH:
        return ErrorContext(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
    session = cache.get(session_id)
    if session is None:
        return ErrorContext(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    if session.epoch != epoch:
        return ErrorContext(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
    if session.uses_topic_ids != uses_topic_ids:
        return ErrorContext(ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
    groups = (
        resolve_topics(request.topics, True, names_by_id)
        if uses_topic_ids
        else [TopicGroup(t.topic, None, t.topic, list(t.partitions)) for t in request.topics]
    )
    forgotten = [
        (t.topic_id if uses_topic_ids else t.topic, index)
        for t in getattr(request, "forgotten_topics_data", ())
        for index in t.partitions
    ]
    cache.touch(session, cache.now_ms())  # first: partitions it adds join at this request
    session.apply(groups, forgotten)
    if not session.partitions:
        cache.remove(session.id)  # nothing left to follow: an empty sessionless answer
        return FetchContext([])
    session.epoch = next_epoch(session.epoch)
    return IncrementalContext(session)


class TopicNames:
    """Topic id -> name for Fetch v13+, rebuilt only when the metadata cache loads a new topic map
    (or an id is missing, in case a topic was added in place)."""

    __slots__ = ("_by_id", "_metadata", "_topics")

    def __init__(self, metadata: Any):
        self._metadata = metadata
        self._topics: Any = None
        self._by_id: dict[uuid.UUID, str] = {}

    def __call__(self, topic_id: uuid.UUID) -> str | None:
        topics = self._metadata.topics
        if topics is not self._topics or topic_id not in self._by_id:
            self._by_id = {info.topic_id: name for name, info in topics.items()}
            self._topics = topics
        return self._by_id.get(topic_id)


class FetchSessionHandler:
    """The fetcher's side (a follower's, as Kafka's FetchSessionHandler): one session per leader
    connection. The first fetch is full and asks for a session; the next ones name only partitions
    whose request changed (a new fetch offset after an append, a new leader epoch) and forget the
    ones no longer fetched. Any session error, or a lost connection, starts over with a full fetch.

    The fetcher says which partitions may have changed since its last request (``touched``), so a
    request costs what moved, not what the session holds: only a full fetch looks at every entry.
    """

    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self._sent: dict[tuple[str, int], dict] = {}  # what the leader's session holds
        # the request awaiting its response: (full, entries it adds or updates, keys it forgets)
        self._pending: tuple[bool, dict[tuple[str, int], dict], list[tuple[str, int]]] | None = None

    def reset(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self._sent = {}
        self._pending = None

    def build(self, wanted: dict[tuple[str, int], dict], touched: Iterable[tuple[str, int]]) -> dict:
        """The session fields and topics of the next request for the ``wanted`` partition entries,
        given the keys whose entry may differ from the last request (others are taken as sent).

        Entries are replaced, never changed in place: the handler keeps the ones it sent.
        """
        if self.session_id == INVALID_SESSION_ID:
            self._pending = (True, dict(wanted), [])
            return {
                "session_id": INVALID_SESSION_ID,
                "session_epoch": INITIAL_EPOCH,
                "topics": _by_topic(wanted.items()),
                "forgotten_topics_data": [],
            }
        sent = self._sent
        changed: dict[tuple[str, int], dict] = {}
        gone: list[tuple[str, int]] = []
        for key in touched:
            entry = wanted.get(key)
            if entry is None:
                if key in sent:
                    gone.append(key)
            elif sent.get(key) != entry:
                changed[key] = entry
        forgotten: dict[str, list[int]] = {}
        for topic, index in gone:
            forgotten.setdefault(topic, []).append(index)
        self._pending = (False, changed, gone)
        return {
            "session_id": self.session_id,
            "session_epoch": self.epoch,
            "topics": _by_topic(changed.items()),
            "forgotten_topics_data": [{"topic": t, "partitions": ps} for t, ps in forgotten.items()],
        }

    def handle_response(self, error_code: int, session_id: int) -> bool:
        """Advance the session after a response; False when the response is a session error."""
        pending, self._pending = self._pending, None
        if error_code != ErrorCode.NONE or pending is None:
            self.reset()
            return False
        full, entries, gone = pending
        if full:
            if session_id != INVALID_SESSION_ID:  # else the leader had no room: full fetches again
                self.session_id, self.epoch, self._sent = session_id, next_epoch(INITIAL_EPOCH), entries
        elif session_id == INVALID_SESSION_ID:  # the leader closed it (nothing left in it)
            self.reset()
        else:
            sent = self._sent
            sent.update(entries)
            for key in gone:
                sent.pop(key, None)
            self.epoch = next_epoch(self.epoch)
        return True


def _by_topic(entries: Iterable[tuple[tuple[str, int], dict]]) -> list[dict]:
    topics: dict[str, list[dict]] = {}
    for (topic, _), entry in entries:
        topics.setdefault(topic, []).append(entry)
    return [{"topic": t, "partitions": ps} for t, ps in topics.items()]
