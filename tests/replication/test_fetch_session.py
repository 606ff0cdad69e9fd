"""The fetch session cache's eviction rules (KIP-227, as Kafka's FetchSessionCache), on a fake clock."""

from strom.replication.fetch_session import CachedPartition, FetchSessionCache, next_epoch


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _partitions(count: int) -> dict:
    return {("t", i): CachedPartition("t", None, _Wanted(i)) for i in range(count)}


class _Wanted:
    """A request partition as the session reads it (kio's FetchPartition's names)."""

    def __init__(self, partition: int):
        self.partition = partition
        self.fetch_offset = 0
        self.partition_max_bytes = 1024


def test_a_full_cache_refuses_a_consumer_while_every_session_is_young_and_in_use():
    clock = Clock()
    cache = FetchSessionCache(2, eviction_ms=1000, clock=clock)
    first = cache.create(False, False, _partitions(1))
    second = cache.create(False, False, _partitions(1))
    assert first is not None and second is not None and first.id != second.id
    assert cache.create(False, False, _partitions(5)) is None  # young sessions are safe from consumers
    assert set(cache.sessions) == {first.id, second.id}


def test_the_least_recently_used_session_goes_once_it_has_been_idle_long_enough():
    clock = Clock()
    cache = FetchSessionCache(2, eviction_ms=1000, clock=clock)
    first = cache.create(False, False, _partitions(3))
    assert cache.create(False, False, _partitions(3)) is not None
    clock.now += 0.8
    cache.touch(first, cache.now_ms())  # first is in use; second sits idle
    clock.now += 0.5  # second idle 1.3 s, first 0.5 s
    third = cache.create(False, False, _partitions(1))
    assert third is not None
    assert set(cache.sessions) == {first.id, third.id} and cache.evictions == 1


def test_a_follower_evicts_a_young_consumer_session_but_not_a_young_follower_session():
    clock = Clock()
    cache = FetchSessionCache(2, eviction_ms=1000, clock=clock)
    consumer = cache.create(False, False, _partitions(50))
    follower = cache.create(True, False, _partitions(1))
    newcomer = cache.create(True, False, _partitions(1))
    assert newcomer is not None and consumer.id not in cache.sessions and follower.id in cache.sessions
    assert cache.create(True, False, _partitions(100)) is None  # both remaining are young followers


def test_among_old_sessions_a_bigger_newcomer_evicts_the_smallest():
    clock = Clock()
    cache = FetchSessionCache(2, eviction_ms=1000, clock=clock)
    small = cache.create(False, False, _partitions(2))
    big = cache.create(False, False, _partitions(10))
    clock.now += 2.0
    cache.touch(small, cache.now_ms())
    cache.touch(big, cache.now_ms())  # both in use, both older than the eviction age
    assert cache.create(False, False, _partitions(1)) is None  # smaller than either: no slot
    bigger = cache.create(False, False, _partitions(5))
    assert bigger is not None and set(cache.sessions) == {big.id, bigger.id}


def test_a_cache_of_zero_slots_never_makes_a_session():
    assert FetchSessionCache(0, eviction_ms=0).create(True, False, _partitions(1)) is None


def test_epochs_wrap_to_one_and_skip_the_reserved_values():
    assert next_epoch(0) == 1 and next_epoch(41) == 42 and next_epoch(2**31 - 1) == 1


def _entry(index: int, offset: int, epoch: int = 0) -> dict:
    return {
        "partition": index,
        "current_leader_epoch": epoch,
        "fetch_offset": offset,
        "log_start_offset": 0,
        "partition_max_bytes": 1024,
    }


def test_a_follower_sends_in_full_once_then_only_what_moved_and_starts_over_after_an_error():
    from strom.protocol.errors import ErrorCode
    from strom.replication.fetch_session import FetchSessionHandler

    handler = FetchSessionHandler()
    wanted = {("t", 0): _entry(0, 5), ("t", 1): _entry(1, 7), ("u", 0): _entry(0, 1)}
    full = handler.build(wanted, wanted)
    assert (full["session_id"], full["session_epoch"]) == (0, 0)
    assert sorted((t["topic"], len(t["partitions"])) for t in full["topics"]) == [("t", 2), ("u", 1)]
    assert handler.handle_response(ErrorCode.NONE, 77)

    # t-1 appended (its fetch offset moved), u-0 is no longer followed: only those two are named
    moved = {("t", 0): _entry(0, 5), ("t", 1): _entry(1, 9)}
    step = handler.build(moved, [("t", 1), ("u", 0)])
    assert (step["session_id"], step["session_epoch"]) == (77, 1)
    assert step["topics"] == [{"topic": "t", "partitions": [_entry(1, 9)]}]
    assert step["forgotten_topics_data"] == [{"topic": "u", "partitions": [0]}]
    assert handler.handle_response(ErrorCode.NONE, 77)
    # touched but unchanged since the leader's session learnt it: nothing to name
    idle = handler.build(moved, [("t", 0), ("t", 1)])
    assert (idle["session_epoch"], idle["topics"], idle["forgotten_topics_data"]) == (2, [], [])
    assert handler.handle_response(ErrorCode.NONE, 77)

    # a change whose request failed is named again by the full fetch that follows
    handler.build({**moved, ("t", 0): _entry(0, 6)}, [("t", 0)])
    assert not handler.handle_response(ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0)
    again = handler.build(moved, [])
    assert (again["session_id"], again["session_epoch"], len(again["topics"][0]["partitions"])) == (0, 0, 2)
    # no room in the leader's cache: full fetches continue
    assert handler.handle_response(ErrorCode.NONE, 0)
    assert handler.build(moved, [])["session_epoch"] == 0
