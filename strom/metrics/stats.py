"""The counters the broker bumps as it works: plain integers in slotted objects, read at scrape time.

Nothing here touches prometheus_client: a Produce request adds a few integers to its topic's
``TopicStats`` (one dict look-up), and the scrape turns them into metric families in
``strom.metrics.collector``. The per-message and per-byte counts come from what the request
path already knows (the batch's byte length, the append's record count), so no record is parsed
for them. These counters are always kept, whether or not metrics are served: keeping them costs
an integer addition, and a switch would cost as much.

Request timing is different: it reads the clock several times per request, so it exists only
when ``metrics.listener`` is set (``RequestMetrics`` is None otherwise and the connection skips
it with one ``is None`` test), and it is sampled once requests are many (see ``RequestMetrics``).
"""

from __future__ import annotations

import asyncio
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
        # strom.server.connection_limits: (listener, limit broken) -> connections refused, and
        # listener -> accept throttle time handed out over a connection creation rate, in ms
        self.connections_refused: Counter[tuple[str, str]] = Counter()
        self.connection_accept_throttle_ms: Counter[str] = Counter()

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
    """One API's timed requests: a histogram of the total, and the sum of each phase (seconds).

    Only the total gets buckets: a bisect per phase would double what timing costs a request,
    and dashboards draw the phases as means (sum over count) beside the total's percentiles.
    The timed count and the total's sum are derived at scrape time (the buckets' sum, the phases' sum).
    """

    __slots__ = ("buckets", "local", "queue", "remote", "send")

    def __init__(self) -> None:
        self.queue = self.local = self.remote = self.send = 0.0
        self.buckets = [0] * (len(TIME_BOUNDS_S) + 1)


class RequestMetrics:
    """Kafka's RequestMetrics: per API, how many requests were answered (every one) and how long
    they spent queued, handled, waiting and sent (a sample, when requests are many).

    Timing reads the clock twice and bisects a histogram, about a microsecond a request, which the
    produce benchmark (strom.bench.metrics) showed as 5-10% of a one-message Produce request. So
    the connection counts every request but times one in ``every`` (it reads the clock once per
    read from the socket, where queue times start, and twice per timed request), and ``adapt``
    sets ``every`` each ``WINDOW_S`` from the requests of the last window, for about
    ``TIMED_PER_WINDOW`` timed requests a window (``rearm`` doubles it within a window that has
    timed that many already: a burst after a quiet spell). Up to that rate (about 500 requests a
    second; ``metrics.request.timing.samples.per.second``, 0 for no limit) every request is timed, as in Kafka; above it the histograms and phase sums describe a sample
    whose choice does not depend on the request, which keeps their percentiles and means, while the
    request counts stay exact (``count``). Kafka's own latency histograms are sampled too (a
    reservoir of 1028).

    Everything runs on the broker's event loop (no lock); the scrape copies the counters there.
    """

    WINDOW_S = 0.25
    TIMED_PER_WINDOW = 128  # the default of metrics.request.timing.samples.per.second, per window

    def __init__(self, samples_per_second: int = round(TIMED_PER_WINDOW / WINDOW_S)) -> None:
        """``samples_per_second`` is metrics.request.timing.samples.per.second; 0 times every request."""
        # timed requests a window before timing thins out; None: never (every request is timed)
        self.timed_per_window = max(1, round(samples_per_second * self.WINDOW_S)) if samples_per_second else None
        self.apis: dict[int, ApiTimes] = {}
        self.counts: dict[int, int] = {}  # api key (and the Fetch pseudo keys) -> requests answered
        # read and written by the connection once per request, inline (a call costs as much)
        self.every = 1  # time one request in this many
        self.countdown = 1  # requests until the next timed one
        self._counted = 0  # requests counted up to the last window
        self._timed = 0  # requests timed in this window

    async def adapt(self, stop: asyncio.Event) -> None:
        """Each window: time one request in as many as keep the next window near TIMED_PER_WINDOW."""
        while not stop.is_set():
            await asyncio.sleep(self.WINDOW_S)
            self.next_window()

    def next_window(self) -> None:
        counted = sum(n for key, n in self.counts.items() if key >= 0)  # not the Fetch pseudo keys
        per_window = self.timed_per_window
        self.every = 1 if per_window is None else max(1, (counted - self._counted) // per_window)
        self.countdown = min(self.countdown, self.every)
        self._counted = counted
        self._timed = 0

    def rearm(self) -> None:
        """The connection times a request: count down to the next (further once the window has enough)."""
        if self.timed_per_window is not None and self._timed >= self.timed_per_window:
            self.every *= 2
        self.countdown = self.every

    def count(self, header: RequestHeader) -> None:
        """A request answered and not timed."""
        key = header.api_key
        counts = self.counts
        try:
            counts[key] += 1
        except KeyError:
            counts[key] = 1
        if key == FETCH:  # Fetch: also FetchFollower or FetchConsumer, as Kafka counts it
            kind = self._fetch_kind(header)
            counts[kind] = counts.get(kind, 0) + 1

    def record(self, header: RequestHeader, queue: float, local: float) -> None:
        """A request answered at once: its local time includes encoding the response."""
        self.count(header)
        self._time(header.api_key, queue, local, 0.0, 0.0)
        if header.api_key == FETCH:
            self._time(self._fetch_kind(header), queue, local, 0.0, 0.0)

    def record_awaited(self, header: RequestHeader, queue: float, local: float, remote: float, send: float) -> None:
        """A request whose handler waited (remote) and whose response was then encoded and queued (send)."""
        self.count(header)
        self._time(header.api_key, queue, local, remote, send)
        if header.api_key == FETCH:
            self._time(self._fetch_kind(header), queue, local, remote, send)

    def _time(self, key: int, queue: float, local: float, remote: float, send: float) -> None:
        times = self.apis.get(key)
        if times is None:
            times = self.apis[key] = ApiTimes()
        times.queue += queue
        times.local += local
        times.remote += remote
        times.send += send
        times.buckets[bisect_left(TIME_BOUNDS_S, queue + local + remote + send)] += 1
        self._timed += 1

    @staticmethod
    def _fetch_kind(header: RequestHeader) -> int:
        return FETCH_FOLLOWER if (header.client_id or "").startswith(FOLLOWER_CLIENT_ID_PREFIX) else FETCH_CONSUMER

    def snapshot(self) -> dict[int, tuple[int, list[int], tuple[float, ...]]]:
        """api key -> (requests, timed requests' bucket counts, their sums of queue, local, remote, send, total)."""
        found: dict[int, tuple[int, list[int], tuple[float, ...]]] = {}
        for key, count in list(self.counts.items()):
            t = self.apis.get(key) or ApiTimes()
            phases = (t.queue, t.local, t.remote, t.send)
            found[key] = (count, list(t.buckets), (*phases, sum(phases)))
        return found
