"""How many connections the broker, a listener and one address may hold, and how fast they may be
made: Kafka's ConnectionQuotas (KIPs 306, 402 and 612), asked once per new connection.

- ``max.connections.per.ip``, with ``max.connections.per.ip.overrides`` (``host-or-ip:count,...``):
  a connection over its address's limit is closed at once, as Kafka's TooManyConnectionsException.
- ``max.connections`` (broker-wide) and ``listener.name.L.max.connections``: the inter-broker
  listener is exempt from the broker-wide limit, as in Kafka, so replication never waits behind
  clients. Kafka's acceptor stops accepting at the limit and new connections wait in the kernel's
  backlog, unanswered, until their clients time out. strom closes the connection over the limit at
  once instead: the client knows straight away and reconnects after its backoff.
- ``max.connection.creation.rate`` (broker-wide, the inter-broker listener exempt) and
  ``listener.name.L.max.connection.creation.rate``: a connection that takes the rate over its bound
  is read only after Kafka's throttle time, ``(rate - bound) / bound * window`` (capped at the
  window), which is how long Kafka's acceptor would wait before accepting it.
- an address's ``connection_creation_rate`` quota (the client quotas' ``ip`` entity, its own or
  ``<default>``): a connection that takes the address over it is not served and is closed after
  the throttle time, as Kafka does, so that a client that reconnects at once is slowed down too.

Rates are measured as Kafka measures quotas, over ``quota.window.num`` samples of
``quota.window.size.seconds``. Refusals are logged at most once a second per listener and reason,
with how many there were, so that a flood cannot flood the log.
"""

from __future__ import annotations

import logging
import socket
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from time import monotonic
from typing import Protocol

from strom.metrics.stats import BrokerStats
from strom.server.quotas import Rate

log = logging.getLogger("strom.server")

UNLIMITED = 2**31 - 1  # Kafka's Int.MaxValue default for every limit here
LOG_EVERY_S = 1.0
MAX_IP_RATES = 10_000  # addresses whose connection rate is measured at once (Kafka expires idle sensors too)


class LimitsConfig(Protocol):
    """The broker configs these limits follow (``BrokerConfig`` has them)."""

    @property
    def max_connections(self) -> int: ...
    @property
    def max_connections_per_ip(self) -> int: ...
    @property
    def max_connections_per_ip_overrides(self) -> tuple[tuple[str, int], ...]: ...
    @property
    def max_connection_creation_rate(self) -> int: ...
    @property
    def quota_window_num(self) -> int: ...
    @property
    def quota_window_size_seconds(self) -> int: ...


@dataclass(frozen=True)
class Admission:
    """What to do with a new connection: ``refused`` names the limit it broke (close it, after
    ``delay_s`` if that is above 0); otherwise serve it, after ``delay_s`` if that is above 0."""

    refused: str | None = None
    delay_s: float = 0.0


ADMITTED = Admission()


@dataclass
class _Refusals:
    """Refusals since the last log line of one (listener, limit)."""

    count: int = 0
    last_logged: float = field(default=-LOG_EVERY_S)


class ConnectionLimits:
    """Counts the connections it admitted, by listener and address, until they are released."""

    def __init__(
        self,
        config: LimitsConfig,
        inter_broker_listener: str | None,
        listener_limit: Callable[[str, str], int | None],
        stats: BrokerStats,
        ip_rate: Callable[[str], float | None] = lambda ip: None,
        resolve: Callable[[str], str] = socket.gethostbyname,
    ):
        """``listener_limit(listener, key)``: the value of ``listener.name.<listener>.<key>``, or None
        where that listener has none (the broker-wide key is checked apart: it exempts the
        inter-broker listener). ``ip_rate(ip)``: the address's connection_creation_rate quota, or
        None. ``resolve`` turns the overrides' host names into addresses."""
        self.config = config
        self.inter_broker_listener = inter_broker_listener
        self.listener_limit = listener_limit
        self.per_ip_overrides = {resolve(host): count for host, count in config.max_connections_per_ip_overrides}
        self.total = 0
        self.by_listener: Counter[str] = Counter()
        self.by_ip: Counter[str] = Counter()
        self.stats = stats
        self.ip_rate = ip_rate
        self._ip_rates: dict[str, Rate] = {}
        self._window_ms = config.quota_window_size_seconds * 1000
        self._broker_rate: Rate | None = None
        self._listener_rates: dict[str, Rate] = {}
        self._refusals: dict[tuple[str, str], _Refusals] = {}

    def reconfigure(
        self,
        config: LimitsConfig,
        listener_limit: Callable[[str, str], int | None],
        resolve: Callable[[str], str] = socket.gethostbyname,
    ) -> None:
        """New limits (dynamic broker configs): the connections open now stay counted, and a limit
        lowered below them refuses new connections until enough have closed, as in Kafka."""
        self.config = config
        self.listener_limit = listener_limit
        self.per_ip_overrides = {resolve(host): count for host, count in config.max_connections_per_ip_overrides}
        if config.max_connection_creation_rate >= UNLIMITED:
            self._broker_rate = None

    def limit_of(self, ip: str) -> int:
        return self.per_ip_overrides.get(ip, self.config.max_connections_per_ip)

    def admit(self, listener: str, ip: str) -> Admission:
        """A new connection on ``listener`` from ``ip``: counted if admitted (release it later)."""
        config = self.config
        exempt = listener == self.inter_broker_listener
        bound = self.ip_rate(ip)
        if bound is not None:
            now_ms = monotonic() * 1000
            delay_ms = self._throttle(self._ip_rate_of(ip, now_ms), bound, now_ms) if bound > 0 else self._window_ms
            if delay_ms > 0:
                refused = self._refuse(listener, ip, "connection_creation_rate", int(bound))
                return Admission(refused=refused.refused, delay_s=delay_ms / 1000)
        if self.by_ip[ip] >= self.limit_of(ip):
            return self._refuse(listener, ip, "max.connections.per.ip", self.limit_of(ip))
        listener_max = self.listener_limit(listener, "max.connections") or UNLIMITED
        if self.by_listener[listener] >= listener_max:
            return self._refuse(listener, ip, f"listener.name.{listener.lower()}.max.connections", listener_max)
        if not exempt and self.total - self.by_listener[self.inter_broker_listener or ""] >= config.max_connections:
            return self._refuse(listener, ip, "max.connections", config.max_connections)
        self.total += 1
        self.by_listener[listener] += 1
        self.by_ip[ip] += 1
        now_ms = monotonic() * 1000
        delay_ms = self._throttle(self._listener_rate(listener, now_ms), self._listener_rate_bound(listener), now_ms)
        if not exempt and config.max_connection_creation_rate < UNLIMITED:
            if self._broker_rate is None:
                self._broker_rate = Rate(config.quota_window_num, self._window_ms, now_ms)
            delay_ms = max(delay_ms, self._throttle(self._broker_rate, config.max_connection_creation_rate, now_ms))
        if delay_ms <= 0:
            return ADMITTED
        self.stats.connection_accept_throttle_ms[listener] += int(delay_ms)
        return Admission(delay_s=delay_ms / 1000)

    def release(self, listener: str, ip: str) -> None:
        """An admitted connection closed."""
        self.total -= 1
        self.by_listener[listener] -= 1
        self.by_ip[ip] -= 1
        if self.by_ip[ip] <= 0:
            del self.by_ip[ip]  # one entry per address that has connections now, not ever had

    def _ip_rate_of(self, ip: str, now_ms: float) -> Rate:
        rate = self._ip_rates.get(ip)
        if rate is None:
            if len(self._ip_rates) >= MAX_IP_RATES:  # forget the addresses idle for a whole window
                horizon = now_ms - self.config.quota_window_num * self._window_ms
                self._ip_rates = {k: r for k, r in self._ip_rates.items() if r.last_ms >= horizon}
            rate = self._ip_rates[ip] = Rate(self.config.quota_window_num, self._window_ms, now_ms)
        return rate

    def _listener_rate_bound(self, listener: str) -> int:
        return self.listener_limit(listener, "max.connection.creation.rate") or UNLIMITED

    def _listener_rate(self, listener: str, now_ms: float) -> Rate | None:
        if self._listener_rate_bound(listener) >= UNLIMITED:
            return None
        rate = self._listener_rates.get(listener)
        if rate is None:
            rate = self._listener_rates[listener] = Rate(self.config.quota_window_num, self._window_ms, now_ms)
        return rate

    def _throttle(self, rate: Rate | None, bound: float, now_ms: float) -> float:
        """Record one connection; Kafka's throttle time in ms if that takes the rate over ``bound``."""
        if rate is None:
            return 0.0
        rate.record(1, now_ms)
        measured = rate.measure(now_ms)
        if measured <= bound:
            return 0.0
        window = rate.window(now_ms)
        return min((measured - bound) / bound * window, window)

    def _refuse(self, listener: str, ip: str, limit: str, value: int) -> Admission:
        self.stats.connections_refused[(listener, limit)] += 1
        refusals = self._refusals.setdefault((listener, limit), _Refusals())
        refusals.count += 1
        now = monotonic()
        if now - refusals.last_logged >= LOG_EVERY_S:
            log.info(
                "refused %d connection(s) on %s in the last %.0f s, the latest from %s: %s is %d",
                refusals.count,
                listener,
                LOG_EVERY_S,
                ip,
                limit,
                value,
            )
            refusals.count, refusals.last_logged = 0, now
        return Admission(refused=limit)
