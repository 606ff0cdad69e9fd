"""Client quotas (Kafka's ClientQuotaManager, KIP-13/55/124/219): byte rates and request time per user/client-id.

Configs live where Kafka's ZooKeeper mode keeps them, as ``{"version":1,"config":{...}}`` znodes:
``/config/users/<user>``, ``/config/users/<user>/clients/<client-id>``, ``/config/clients/<client-id>``,
with ``<default>`` for the defaults (the user node also holds the user's SCRAM credentials). Every
broker caches them and re-reads on a watch, so an AlterClientQuotas on one broker applies on all.

Which config applies to a request is Kafka's order, most specific first, per quota key:
/config/users/<user>/clients/<client-id>, /config/users/<user>/clients/<default>, /config/users/<user>,
/config/users/<default>/clients/<client-id>, /config/users/<default>/clients/<default>,
/config/users/<default>, /config/clients/<client-id>, /config/clients/<default>. The matched level
also decides who shares a rate: a <default> stands for each user (client-id) separately.

Enforcement as Kafka's (KIP-219): each (quota key, user, client-id) has a rate over
``quota.window.num`` samples of ``quota.window.size.seconds``; when a request takes it over the
bound the throttle time is ``(rate - bound) / bound * window`` (capped at the whole window), the
response carries it in ``throttle_time_ms`` and the connection stops reading for that long after
the response. Produce counts the request's size, Fetch the response's (a throttled Fetch is
answered empty and its bytes are not counted, as Kafka does), request_percentage the time the
event loop spends on the request, in percent of one thread: decoding it and running its handler,
and, for a handler that goes on asynchronously, every later step of it until the response exists
(``LoopTime``), but not the time it waits (Kafka counts its request handler threads' time, which
waits in the purgatory do not occupy either). Broker-to-broker fetches and the login APIs are exempt.

When no quota is configured anywhere, ``active`` is False and the connection never calls in.

The empty Fetch response is the Fetch handler's encoding (``empty_fetch``, given by the broker),
so this module does not import the handlers, which import it for the quota APIs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
import struct
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from strom.cluster import model
from strom.cluster.entity_config import entity_configs, update_entity_config
from strom.cluster.store import (
    MetadataStore,
    NoNodeError,
)
from strom.cluster.watched import WatchedView
from strom.protocol.api import ApiKey
from strom.protocol.frame import parse_request_header
from strom.server.dispatcher import Dispatcher, RawResponse

if TYPE_CHECKING:
    from strom.server.connection import Connection

log = logging.getLogger("strom.quotas")

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
QUOTA_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE)
DEFAULT = "<default>"  # Kafka's ConfigEntityName.Default, written unsanitized
CONFIG_CLIENTS = "/config/clients"
USER, CLIENT_ID = "user", "client-id"  # DescribeClientQuotas/AlterClientQuotas entity types
# KIP-612: an address's connection creation rate, in /config/ips/<ip> or /config/ips/<default>;
# enforced by strom.server.connection_limits, not per request
IP = "ip"
CONFIG_IPS = "/config/ips"
CONNECTION_CREATION_RATE = "connection_creation_rate"

# (user, client-id) of a configured entity; None: that part is not given, DEFAULT: the default.
Entity = tuple[str | None, str | None]

# Login and version discovery must never wait, and Kafka exempts them from request quotas.
_EXEMPT = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
_NANOS_TO_PERCENT = 100 / 1e9
_I32 = struct.Struct(">i")
_MAX_SENSORS = 10_000


def entity_path(entity: Entity) -> str:
    """The znode of an entity: /config/users/<u>[/clients/<c>] or /config/clients/<c>."""
    user, client = entity
    if user is not None:
        path = f"{model.CONFIG_USERS}/{_node_name(user)}"
        return path if client is None else f"{path}/clients/{_node_name(client)}"
    if client is None:
        raise ValueError("an entity names a user, a client-id or both")
    return f"{CONFIG_CLIENTS}/{_node_name(client)}"


def _node_name(name: str) -> str:
    return name if name == DEFAULT else quote(name, safe="").replace("~", "%7E")


def _entity_name(node: str) -> str:
    return node if node == DEFAULT else unquote(node)


def _quota_values(configs: dict[str, str], where: str) -> dict[str, float]:
    values = {}
    for key in QUOTA_KEYS:
        if key in configs:
            try:
                values[key] = float(configs[key])
            except ValueError:
                log.warning("ignoring %s=%r of %s: not a number", key, configs[key], where)
    return values


class Rate:
    """Kafka's Rate over a SampledStat: ``samples`` windows of ``window_ms``, the oldest reused.

    The measured window is padded to ``samples - 1`` full windows while younger (so the first
    requests of a client are not judged over a few milliseconds) and at least 1 ms.
    """

    __slots__ = ("current", "last_ms", "samples", "starts", "values", "window_ms")

    def __init__(self, samples: int, window_ms: int, now_ms: float):
        self.samples, self.window_ms = samples, window_ms
        self.starts = [now_ms]
        self.values = [0.0]
        self.current = 0
        self.last_ms = now_ms

    def record(self, value: float, now_ms: float) -> None:
        self.last_ms = now_ms
        if now_ms - self.starts[self.current] >= self.window_ms:
            self.current = (self.current + 1) % self.samples
            if self.current >= len(self.starts):
                self.starts.append(now_ms)
                self.values.append(0.0)
            else:
                self.starts[self.current], self.values[self.current] = now_ms, 0.0
        self.values[self.current] += value

    def _purge(self, now_ms: float) -> None:
        expire = self.samples * self.window_ms
        for i, start in enumerate(self.starts):
            if now_ms - start >= expire:
                self.starts[i], self.values[i] = now_ms, 0.0

    def window(self, now_ms: float) -> float:
        """The window the rate is measured over, in ms (Kafka's Rate.windowSize)."""
        self._purge(now_ms)
        elapsed = now_ms - min(self.starts)
        full = int(elapsed // self.window_ms)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1.0)

    def measure(self, now_ms: float) -> float:
        """Per second."""
        window = self.window(now_ms)
        return sum(self.values) / (window / 1000)


class QuotaManager(WatchedView):
    """The quota configs of every entity (kept current by watches) and the rates of every client."""

    what = "client quotas"

    def __init__(
        self,
        store: MetadataStore | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
        *,
        window_num: int = 11,
        window_size_s: int = 1,
        empty_fetch: Callable[[int], RawResponse],
    ):
        self.store: MetadataStore = store  # type: ignore[assignment]  # None until start(), before any read
        super().__init__(loop)
        self.window_num, self.window_ms = window_num, window_size_s * 1000
        self.empty_fetch = empty_fetch  # version -> a Fetch response with no partitions
        self.max_throttle_ms = window_num * window_size_s * 1000
        self.entities: dict[Entity, dict[str, float]] = {}
        self.ip_rates: dict[str, float] = {}  # ip or DEFAULT -> connection_creation_rate
        self.active = False  # any quota configured anywhere: the connection's one test
        self._resolved: dict[tuple[str, str, str], tuple[float, tuple[str, str]] | None] = {}
        self._rates: dict[tuple[str, str, str], Rate] = {}

    # -- configs ----------------------------------------------------------------------------------
    def start(self, store: MetadataStore, loop: asyncio.AbstractEventLoop | None) -> None:
        self.store, self._loop = store, loop
        self.load()

    def load(self) -> None:
        """Re-read every quota entity (watching every node read when a loop was given)."""
        watch = self.watch
        found: dict[Entity, dict[str, float]] = {}
        for user_node in self._children(model.CONFIG_USERS, watch):
            user = _entity_name(user_node)
            user_path = f"{model.CONFIG_USERS}/{user_node}"
            self._read((user, None), user_path, watch, found)
            if "clients" in self._children(user_path, watch):
                for client_node in self._children(f"{user_path}/clients", watch):
                    self._read((user, _entity_name(client_node)), f"{user_path}/clients/{client_node}", watch, found)
        for client_node in self._children(CONFIG_CLIENTS, watch):
            self._read((None, _entity_name(client_node)), f"{CONFIG_CLIENTS}/{client_node}", watch, found)
        ip_rates = {}
        for ip_node in self._children(CONFIG_IPS, watch):
            try:
                data, _ = self.store.get(f"{CONFIG_IPS}/{ip_node}", watch)
            except NoNodeError:
                continue
            rate = entity_configs(data).get(CONNECTION_CREATION_RATE)
            try:
                if rate is not None:
                    ip_rates[_entity_name(ip_node)] = float(rate)
            except ValueError:
                log.warning(
                    "ignoring %s=%r of %s/%s: not a number", CONNECTION_CREATION_RATE, rate, CONFIG_IPS, ip_node
                )
        self.ip_rates = ip_rates
        self.entities = found
        self._resolved = {}
        self.active = bool(found)
        if not found:
            self._rates = {}

    def _children(self, path: str, watch) -> list[str]:
        try:
            return self.store.children(path, watch)
        except NoNodeError:
            if watch is not None and self.store.exists(path, watch):  # created meanwhile
                return self._children(path, watch)
            return []

    def _read(self, entity: Entity, path: str, watch, found: dict[Entity, dict[str, float]]) -> None:
        try:
            data, _ = self.store.get(path, watch)
        except NoNodeError:
            return
        values = _quota_values(entity_configs(data), path)
        if values:
            found[entity] = values

    def alter(self, entity: Entity, changes: dict[str, float | None]) -> None:
        """Set (a number) or remove (None) quota keys of one entity, keeping the node's other keys
        (a user's SCRAM credentials)."""

        def change(configs: dict[str, str]) -> None:
            for key, value in changes.items():
                if value is None:
                    configs.pop(key, None)
                else:
                    configs[key] = _format(value)

        update_entity_config(self.store, entity_path(entity), change)
        self.load()

    def alter_ip(self, ip: str, rate: float | None) -> None:
        """Set (a number) or remove (None) an address's (or DEFAULT's) connection creation rate."""

        def change(configs: dict[str, str]) -> None:
            if rate is None:
                configs.pop(CONNECTION_CREATION_RATE, None)
            else:
                configs[CONNECTION_CREATION_RATE] = _format(rate)

        update_entity_config(self.store, f"{CONFIG_IPS}/{_node_name(ip)}", change)
        self.load()

    def ip_connection_rate(self, ip: str) -> float | None:
        """The connection creation rate bound of ``ip``: its own, else the default, else None."""
        rates = self.ip_rates
        return rates.get(ip, rates.get(DEFAULT)) if rates else None

    # -- which quota applies ------------------------------------------------------------------------
    def _candidates(self, user: str, client: str) -> Iterator[tuple[Entity, tuple[str, str]]]:
        """Kafka's precedence, each with the tags (user, client-id) whose clients share one rate."""
        yield (user, client), (user, client)
        yield (user, DEFAULT), (user, client)
        yield (user, None), (user, "")
        yield (DEFAULT, client), (user, client)
        yield (DEFAULT, DEFAULT), (user, client)
        yield (DEFAULT, None), (user, "")
        yield (None, client), ("", client)
        yield (None, DEFAULT), ("", client)

    def quota(self, key: str, user: str, client: str) -> tuple[float, tuple[str, str]] | None:
        """(bound, rate tags) of ``key`` for this user and client-id, or None when unlimited."""
        cache_key = (key, user, client)
        try:
            return self._resolved[cache_key]
        except KeyError:
            pass
        found = None
        for entity, tags in self._candidates(user, client):
            values = self.entities.get(entity)
            if values is not None and key in values:
                found = (values[key], tags)
                break
        if len(self._resolved) > _MAX_SENSORS:
            self._resolved.clear()
        self._resolved[cache_key] = found
        return found

    def record(self, key: str, user: str, client: str, value: float, now_ms: float) -> int:
        """Record ``value`` against the client's rate; the throttle time in ms (0: within quota)."""
        quota = self.quota(key, user, client)
        if quota is None:
            return 0
        bound, tags = quota
        rate = self._rate(key, tags, now_ms)
        rate.record(value, now_ms)
        measured = rate.measure(now_ms)
        if measured <= bound:
            return 0
        if bound <= 0:
            return self.max_throttle_ms
        throttle = round((measured - bound) / bound * rate.window(now_ms))
        return min(throttle, self.max_throttle_ms)

    def unrecord(self, key: str, user: str, client: str, value: float, now_ms: float) -> None:
        quota = self.quota(key, user, client)
        if quota is not None:
            self._rate(key, quota[1], now_ms).record(-value, now_ms)

    def _rate(self, key: str, tags: tuple[str, str], now_ms: float) -> Rate:
        rate_key = (key, *tags)
        rate = self._rates.get(rate_key)
        if rate is None:
            if len(self._rates) >= _MAX_SENSORS:
                self._expire(now_ms)
            rate = self._rates[rate_key] = Rate(self.window_num, self.window_ms, now_ms)
        return rate

    def _expire(self, now_ms: float) -> None:
        """Forget rates idle for a whole window (Kafka expires idle sensors too)."""
        horizon = now_ms - self.max_throttle_ms
        self._rates = {k: r for k, r in self._rates.items() if r.last_ms >= horizon}

    # -- the connection's hook --------------------------------------------------------------------
    def handle_frame(self, connection: Connection, frame) -> tuple[Any, Any]:
        """Serve one request as the dispatcher would, recording it against the client's quotas.

        A throttled response carries the throttle time; the connection is muted for that long
        once the response is on its way (``Connection.mute``).
        """
        dispatcher = connection.dispatcher
        if not isinstance(dispatcher, Dispatcher):  # a SASL login in progress: not a client yet
            return dispatcher.handle_frame(frame, connection.peer)
        started = time.perf_counter_ns()
        header, result = dispatcher.handle_frame(frame, connection.peer)
        elapsed_ns = time.perf_counter_ns() - started
        api_key = header.api_key
        if api_key in _EXEMPT:
            return header, result
        if api_key == ApiKey.FETCH and _replica_id(frame) >= 0:  # a follower: replication is not a client's traffic
            return header, result
        principal = dispatcher.principal
        user = principal.partition(":")[2] if ":" in principal else principal
        client = header.client_id or ""
        now_ms = time.monotonic() * 1000
        byte_ms = self.record(PRODUCER_BYTE_RATE, user, client, len(frame), now_ms) if api_key == ApiKey.PRODUCE else 0
        if type(result) is not RawResponse and hasattr(result, "__await__"):
            # its request time is known once the response exists: the steps it runs on the loop count too
            return header, self._later(connection, header, LoopTime(result), elapsed_ns, user, client, byte_ms)
        request_ms = self.record(REQUEST_PERCENTAGE, user, client, elapsed_ns * _NANOS_TO_PERCENT, now_ms)
        if api_key == ApiKey.FETCH and type(result) is RawResponse:
            return header, self._fetched(connection, header, result, user, client, request_ms, now_ms)
        throttle = max(byte_ms, request_ms)
        if not throttle:
            return header, result
        connection.mute(throttle)
        return header, with_throttle(header, result, throttle)

    def _fetched(
        self,
        connection: Connection,
        header,
        response: RawResponse,
        user: str,
        client: str,
        request_ms: int,
        now_ms: float,
        *,
        later: bool = False,
    ) -> Any:
        byte_ms = self.record(CONSUMER_BYTE_RATE, user, client, response.size, now_ms)
        throttle = max(byte_ms, request_ms)
        if not throttle:
            return response
        if byte_ms:
            # Kafka answers a throttled fetch empty and does not count what it did not send
            self.unrecord(CONSUMER_BYTE_RATE, user, client, response.size, now_ms)
            response = self.empty_fetch(header.api_version)
        if later:
            connection.throttle_after_response(throttle)
        else:
            connection.mute(throttle)
        return with_throttle(header, response, throttle)

    async def _later(
        self, connection: Connection, header, timed: LoopTime, sync_ns: int, user: str, client: str, byte_ms: int
    ) -> Any:
        """A request that went on after its handler returned (acks=all, a long-poll fetch, a group
        join): its request time is the handler's synchronous part plus the loop time of its later
        steps, recorded and throttled once its response exists."""
        response = await timed
        now_ms = time.monotonic() * 1000
        request_ms = self.record(REQUEST_PERCENTAGE, user, client, (sync_ns + timed.ns) * _NANOS_TO_PERCENT, now_ms)
        if response is None:
            return response
        if header.api_key == ApiKey.FETCH and type(response) is RawResponse:
            return self._fetched(connection, header, response, user, client, request_ms, now_ms, later=True)
        throttle = max(byte_ms, request_ms)
        if throttle:
            connection.throttle_after_response(throttle)
            return with_throttle(header, response, throttle)
        return response


class LoopTime:
    """Awaits a handler's awaitable and adds up the time each of its steps runs on the event loop.

    A step is what runs between two suspensions (the handler's own code and the coroutines it
    awaits inline); the time suspended, waiting in the purgatory, for a long poll, for another
    broker or for the loop's turn, is not counted. Two clock reads per resumption.
    """

    __slots__ = ("_inner", "ns")

    def __init__(self, awaitable: Any):
        self._inner = awaitable.__await__()
        self.ns = 0

    def __await__(self) -> LoopTime:
        return self

    def __iter__(self) -> LoopTime:
        return self

    def __next__(self) -> Any:
        return self.send(None)

    def send(self, value: Any) -> Any:
        started = time.perf_counter_ns()
        try:
            return self._inner.send(value)
        finally:
            self.ns += time.perf_counter_ns() - started

    def throw(self, *args: Any) -> Any:
        started = time.perf_counter_ns()
        try:
            return self._inner.throw(*args)
        finally:
            self.ns += time.perf_counter_ns() - started

    def close(self) -> None:
        self._inner.close()


def _replica_id(frame) -> int:
    """Fetch v4-12 start their body with replica_id."""
    _, offset = parse_request_header(frame)
    return _I32.unpack_from(frame, offset)[0]


def with_throttle(header, response: Any, throttle_ms: int) -> Any:
    """The response with its throttle_time_ms set, where its API and version have one."""
    if response is None:
        return None
    if type(response) is RawResponse:
        chunks = response.chunks
        first = chunks[0]
        if header.api_key == ApiKey.FETCH and type(first) is bytes:  # v1+: the first field
            patched = RawResponse([_I32.pack(throttle_ms) + first[4:], *chunks[1:]], response.size)
        elif header.api_key == ApiKey.PRODUCE and len(chunks) == 1 and type(first) is bytes:  # v1+: the last
            end = len(first) - (1 if header.api_version >= 9 else 0)  # v9+ ends with empty tagged fields
            patched = RawResponse([first[: end - 4] + _I32.pack(throttle_ms) + first[end:]], response.size)
        else:
            return response
        patched.revise = response.revise
        return patched
    if hasattr(response, "throttle_time") and dataclasses.is_dataclass(response):
        kio_response: Any = response  # a kio response object (frozen dataclass)
        return dataclasses.replace(kio_response, throttle_time=datetime.timedelta(milliseconds=throttle_ms))
    return response


def _format(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))
