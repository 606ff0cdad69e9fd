"""The counters the broker bumps as it works: plain integers in slotted objects, read at scrape time.

Nothing here touches prometheus_client: a Produce request adds a few integers to its topic's
``TopicStats`` (one dict look-up), and the scrape turns them into metric families in
``strom.metrics.collector``. The per-message and per-byte counts come from what the request
path already knows (the batch's byte length, the append's record count), so no record is parsed
for them. These counters are always kept, whether or not metrics are served: keeping them costs
an integer addition, and a switch would cost as much.

Request timing is different: it reads the clock several times per request, so it exists only
when ``metrics.listener`` is set (``RequestMetrics`` is None otherwise and the connection skips
it with one ``is None`` test).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Collection

from strom.protocol.frame import RequestHeader

# Upper bounds of the request-time histograms, in seconds (exported in ms: Kafka's *TimeMs).
TIME_BOUNDS_S: tuple[float, ...] = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)
FETCH = 1
FETCH_FOLLOWER = -1  # pseudo api keys for Kafka's FetchFollower / FetchConsumer request metrics
FETCH_CONSUMER = -2
FOLLOWER_CLIENT_ID_PREFIX = "strom-replica-fetcher"  # the client id strom's replica fetchers send


class TopicStats:
    """Kafka's BrokerTopicMetrics for one topic, as counts since the broker started.

    ``bytes_in`` is the size of the record batches as the producer sent them (Kafka's
    ``records.sizeInBytes``: batch headers and record framing included, the request's own
    framing not); ``messages_in`` counts records (a batch's record count); ``bytes_out`` counts
    record bytes sent to consumers (follower fetches are replication, not BytesOut, as in Kafka).
    """

    __slots__ = (
        "bytes_in",
        "bytes_out",
        "failed_fetch",
        "failed_produce",
        "fetch_requests",
        "messages_in",
        "produce_requests",
    )

    def __init__(self) -> None:
        self.messages_in = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.failed_produce = 0
        self.failed_fetch = 0
        self.produce_requests = 0  # partition appends (Kafka's TotalProduceRequestsPerSec counts per partition)
        self.fetch_requests = 0


class BrokerStats:
    """Counters of one broker that no other structure already holds."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicStats] = {}
        self.replication_bytes_in = 0
        self.replication_bytes_out = 0
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.connections_created: Counter[str] = Counter()  # per listener name
        self.connections_closed: Counter[str] = Counter()

    def topic(self, name: str) -> TopicStats:
        found = self.topics.get(name)
        if found is None:
            found = self.topics[name] = TopicStats()
        return found

    def forget_topics(self, keep: Collection[str]) -> None:
        """Drop the counters of deleted topics (a re-created topic starts from zero, as in Kafka)."""
        for name in [t for t in self.topics if t not in keep]:
            del self.topics[name]


class ApiTimes:
    """One API's request times: a histogram of the total, and the sum of each phase (seconds).

    Only the total gets buckets: a bisect per phase would double what timing costs a request,
    and dashboards draw the phases as means (sum over count) beside the total's percentiles.
    The count and the total's sum are derived at scrape time (the buckets' sum, the phases' sum).
    """

    __slots__ = ("also", "buckets", "local", "queue", "remote", "send")

    def __init__(self) -> None:
        self.queue = self.local = self.remote = self.send = 0.0
        self.buckets = [0] * (len(TIME_BOUNDS_S) + 1)
        self.also: bool | None = None  # set for Fetch, which is also timed as FetchFollower or FetchConsumer


class RequestMetrics:
    """Kafka's RequestMetrics: per API, how long requests spent queued, handled, waiting and sent.

    ``record`` is one bisect and a few additions on the API's slotted counters (no lock: it runs
    on the broker's event loop, and the scrape copies the counters there). It is called once per
    request, so every operation in it shows in the produce benchmark (strom.bench.metrics): a
    request answered at once is timed with two clock reads (one when pipelined behind another,
    whose end is its start), and its encoding counts as local time rather than response send.
    """

    def __init__(self) -> None:
        self.apis: dict[int, ApiTimes] = {}

    def record(self, header: RequestHeader, queue: float, local: float) -> None:
        """A request answered at once: its local time includes encoding the response."""
        times = self.apis.get(header.api_key) or self._add_api(header)
        times.queue += queue
        times.local += local
        times.buckets[bisect_left(TIME_BOUNDS_S, queue + local)] += 1
        if times.also is not None:  # Fetch: also FetchFollower or FetchConsumer, as Kafka times it
            self.record(self._fetch_kind(header), queue, local)

    def record_awaited(self, header: RequestHeader, queue: float, local: float, remote: float, send: float) -> None:
        """A request whose handler waited (remote) and whose response was then encoded and queued (send)."""
        times = self.apis.get(header.api_key) or self._add_api(header)
        times.queue += queue
        times.local += local
        times.remote += remote
        times.send += send
        times.buckets[bisect_left(TIME_BOUNDS_S, queue + local + remote + send)] += 1
        if times.also is not None:
            self.record_awaited(self._fetch_kind(header), queue, local, remote, send)

    @staticmethod
    def _fetch_kind(header: RequestHeader) -> RequestHeader:
        follower = (header.client_id or "").startswith(FOLLOWER_CLIENT_ID_PREFIX)
        return header._replace(api_key=FETCH_FOLLOWER if follower else FETCH_CONSUMER)

    def _add_api(self, header: RequestHeader) -> ApiTimes:
        times = self.apis[header.api_key] = ApiTimes()
        if header.api_key == FETCH:
            times.also = True
        return times

    def snapshot(self) -> dict[int, tuple[int, list[int], tuple[float, ...]]]:
        """api key -> (count, total-time bucket counts, sums of queue, local, remote, send, total)."""
        found: dict[int, tuple[int, list[int], tuple[float, ...]]] = {}
        for key, t in list(self.apis.items()):
            phases = (t.queue, t.local, t.remote, t.send)
            found[key] = (sum(t.buckets), list(t.buckets), (*phases, sum(phases)))
        return found
