"""One client connection: frames in, responses out, in request order.

As in Kafka, a connection's requests are processed one at a time: while a request waits (a
long-poll Fetch, a group join) the connection stops reading, so responses go back in request
order and a client cannot make the broker buffer without bound. Requests that need no waiting
are answered synchronously inside ``data_received``.

One exception, where strom does better than Kafka: an acks=all produce that has appended and
only waits for its replicas (``Replicating``) does not stop the connection. Up to
PIPELINED_ANSWERS of them wait together, later requests are served meanwhile, and every answer
is held until those before it are sent. Kafka mutes the connection for the whole replication
round trip, so a producer's five in-flight requests replicate one after another.

Fetch bodies are file slices: once the transport's buffer is empty they go from the segment
file to the socket with ``os.sendfile`` (no copy through Python); if the socket would block,
the rest is copied through the transport instead.

A connection takes the services it uses from a ``ConnectionServices`` (the Broker is one) and
answers frames through a ``FrameHandler`` (a listener's Dispatcher, or a SASL listener's gate
until the login); it imports neither the broker nor the SASL code.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import select
from collections import deque
from collections.abc import Iterable
from time import monotonic, perf_counter
from typing import TYPE_CHECKING, Any, Protocol

from strom.protocol.errors import DecodeError
from strom.protocol.frame import FrameDecoder, FrameError
from strom.server.dispatcher import CloseConnection, RawResponse, Replicating
from strom.storage.segment import FileSlice

if TYPE_CHECKING:
    from strom.metrics.stats import BrokerStats, RequestMetrics
    from strom.protocol.frame import RequestHeader
    from strom.server.config import BrokerConfig
    from strom.storage.log_manager import LogManager

log = logging.getLogger("strom.server")

# acks=all produces of one connection waiting for their replicas at once; more stop its reading.
# librdkafka and the Java client keep at most 5 requests in flight with idempotence.
PIPELINED_ANSWERS = 16


class FrameHandler(Protocol):
    """What answers a connection's frames: a listener's Dispatcher, or a SASL listener's gate."""

    @property
    def listener(self) -> str: ...
    def handle_frame(self, frame: Any, peer: str) -> tuple[RequestHeader | None, Any]: ...
    def encode(self, header: Any, response: Any) -> list[Any]: ...


class Admission(Protocol):
    @property
    def refused(self) -> str | None: ...
    @property
    def delay_s(self) -> float: ...


class ConnectionLimiter(Protocol):
    """strom.server.connection_limits.ConnectionLimits: whether a new connection is taken, and when."""

    def admit(self, listener: str, ip: str) -> Admission: ...
    def release(self, listener: str, ip: str) -> None: ...


class FrameQuotas(Protocol):
    """strom.server.quotas.QuotaManager: consulted for each frame only while some quota exists."""

    @property
    def active(self) -> bool: ...
    def handle_frame(self, connection: Connection, frame: Any) -> tuple[Any, Any]: ...


class ConnectionServices(Protocol):
    """What a connection uses of the broker that accepted it (strom.server.broker.Broker is one)."""

    @property
    def config(self) -> BrokerConfig: ...
    @property
    def dispatcher(self) -> FrameHandler: ...
    @property
    def log_manager(self) -> LogManager: ...
    @property
    def request_metrics(self) -> RequestMetrics | None: ...
    @property
    def quotas(self) -> FrameQuotas: ...
    @property
    def connections(self) -> set[Connection]: ...
    @property
    def stats(self) -> BrokerStats: ...
    @property
    def connection_limits(self) -> ConnectionLimiter: ...


class _Answer:
    """A request whose answer is awaited, in the connection's queue of answers in request order."""

    __slots__ = ("header", "response", "done", "timed", "task", "barrier")

    def __init__(self, header, timed: tuple[float, float, float] | None, barrier: bool = False):
        self.header = header
        self.response: Any = None
        self.done = False
        self.barrier = barrier  # reading stops until it is sent (every awaited answer but Replicating's)
        self.timed = timed  # queue, local, handled-at (metrics), if this request is timed
        self.task: asyncio.Future | None = None


class Connection(asyncio.Protocol):
    def __init__(self, broker: ConnectionServices):
        self.broker = broker
        self.dispatcher: FrameHandler = broker.dispatcher  # a SASL listener's gate until login
        self.decoder = FrameDecoder(broker.config.socket_request_max_bytes)
        self.transport: asyncio.Transport = None  # type: ignore[assignment]  # set in asyncio's first callback
        self.peer = "?"
        self._socket_fd = -1
        self._busy = False  # reading stopped (an answer awaited, a mute); frames stay queued in the decoder
        self._write_paused = False
        self._closed = False
        self._answers: deque[_Answer] = deque()  # awaited answers, in request order
        self._barriers = 0  # of them, the ones that stop reading until they are sent (all but Replicating)
        self._out: list = []  # response bytes of this drain, written with one syscall
        # (position in _out, chunks, header, response) of queued responses that acknowledge appends
        self._acks: list[tuple[int, int, Any, RawResponse]] = []
        self._write_behind = broker.log_manager.write_behind
        self._offline_dirs = broker.log_manager.offline_dirs
        # strom.metrics: requests are counted and timed only when metrics are served (None otherwise)
        self._timing = broker.request_metrics
        # when handling of the frames that arrived with the last bytes began (0.0: not yet): a timed
        # request's queue time starts there
        self._received_at = 0.0
        self.listener = "?"
        self._quotas = broker.quotas  # strom.server.quotas: consulted only while some quota exists
        self._muted: asyncio.TimerHandle | None = None
        self._throttle_after = 0  # ms to mute for once the awaited response is sent
        self.last_received = monotonic()  # for connections.max.idle.ms (close_idle_connections)
        self._admitted_ip: str | None = None  # counted by the broker's connection limits until closed

    # -- asyncio.Protocol --------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        sock = transport.get_extra_info("socket")
        self._socket_fd = sock.fileno() if sock is not None else -1
        self.broker.connections.add(self)
        self.listener = self.dispatcher.listener
        self.broker.stats.connections_created[self.listener] += 1
        ip = peer[0] if peer else "?"
        admission = self.broker.connection_limits.admit(self.listener, ip)
        if admission.refused is not None:
            self._closed = True
            if admission.delay_s > 0:  # over its address's connection rate: held unread, then closed
                self.transport.pause_reading()
                asyncio.get_running_loop().call_later(admission.delay_s, self.transport.abort)
            else:
                self.transport.abort()
            return
        self._admitted_ip = ip
        if admission.delay_s > 0:  # over a connection creation rate: read once the throttle time is over
            self.mute(int(admission.delay_s * 1000))

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        if self._muted is not None:
            self._muted.cancel()
            self._muted = None
        self.broker.connections.discard(self)
        self.broker.stats.connections_closed[self.listener] += 1
        if self._admitted_ip is not None:
            self.broker.connection_limits.release(self.listener, self._admitted_ip)
            self._admitted_ip = None
        for answer in self._answers:
            if answer.task is not None and not answer.task.done():
                answer.task.cancel()

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self._process()

    def data_received(self, data: bytes) -> None:
        self._received_at = 0.0
        self.last_received = monotonic()
        try:
            self.decoder.feed(data)
        except FrameError as exc:
            self._abort(f"malformed frame: {exc}")
            return
        self._process()

    # -- processing --------------------------------------------------------------------------------
    @property
    def idle(self) -> bool:
        """No answer awaited (a muted connection only waits out its throttle)."""
        return not self._answers

    def _process(self) -> None:
        try:
            self._drain()
        finally:
            self._flush()

    def _drain(self) -> None:
        timing = self._timing
        while not self._busy and not self._write_paused and not self._closed:
            try:
                frame = self.decoder.next_frame()
            except FrameError as exc:
                self._abort(f"malformed frame: {exc}")
                return
            if frame is None:
                return
            started = 0.0  # when this request's handling began, if it is timed
            if timing is not None:  # count every request, time one in timing.every (inline: per request)
                timing.countdown -= 1
                if timing.countdown <= 0:
                    timing.rearm()
                    started = perf_counter()
                    if not self._received_at:
                        self._received_at = started
                elif not self._received_at:  # the first request of these bytes: queue times start now
                    self._received_at = perf_counter()
            try:
                if self._quotas.active:
                    header, result = self._quotas.handle_frame(self, frame)
                else:
                    header, result = self.dispatcher.handle_frame(frame, self.peer)
            except (DecodeError, CloseConnection) as exc:
                self._abort(f"malformed request: {exc}")
                return
            except Exception:
                log.exception("request from %s failed; closing the connection", self.peer)
                self._abort("internal error")
                return
            if result is None:
                if timing is not None:  # acks=0: no response
                    if started:
                        timing.record(header, started - self._received_at, perf_counter() - started)
                    else:
                        timing.count(header)
                continue
            if type(result) is not RawResponse and hasattr(result, "__await__"):
                timed = None
                if started:
                    handled = perf_counter()
                    timed = (started - self._received_at, handled - started, handled)
                answer = _Answer(header, timed, type(result) is not Replicating)
                self._answers.append(answer)
                answer.task = asyncio.ensure_future(self._await_answer(answer, result))
                self._barriers += answer.barrier
                if self._barriers or len(self._answers) >= PIPELINED_ANSWERS:
                    self._stop_reading()
                    return
                continue
            if self._answers:  # answered at once, but after the awaited answers before it
                answer = _Answer(header, None)
                answer.response, answer.done = result, True
                self._answers.append(answer)
                if timing is not None:
                    if started:
                        timing.record(header, started - self._received_at, perf_counter() - started)
                    else:
                        timing.count(header)
                continue
            self._send(header, result)
            if timing is not None:  # answered at once: local time includes encoding the response
                if started:
                    timing.record(header, started - self._received_at, perf_counter() - started)
                else:
                    timing.count(header)

    def _stop_reading(self) -> None:
        if not self._busy:
            self._busy = True
            self.transport.pause_reading()

    async def _await_answer(self, answer: _Answer, awaitable) -> None:
        try:
            answer.response = await awaitable
        except asyncio.CancelledError:
            return
        except Exception:
            log.exception("request from %s failed; closing the connection", self.peer)
            self._abort("internal error")
            return
        answer.done = True
        if self._closed:
            return
        if self._answers[0] is answer:
            self._send_answers()

    def _send_answers(self) -> None:
        """Send the answers at the head of the queue that are ready, then read on if reading
        stopped only for them (not while muted by a quota)."""
        answers = self._answers
        while answers and answers[0].done:
            answer = answers.popleft()
            header, response, timed = answer.header, answer.response, answer.timed
            replied = perf_counter() if timed is not None else 0.0
            if response is not None:
                self._send(header, response)
            self._barriers -= answer.barrier
            if answer.task is not None:
                if self._timing is not None:
                    if timed is not None:
                        queue, local, handled = timed
                        self._timing.record_awaited(header, queue, local, replied - handled, perf_counter() - replied)
                    else:
                        self._timing.count(header)
            if self._throttle_after:
                self._flush()
                self.mute(self._throttle_after)
                self._throttle_after = 0
        self._flush()
        if self._busy and self._muted is None and not self._barriers and len(answers) < PIPELINED_ANSWERS:
            self._busy = False
            self.transport.resume_reading()
            self._process()

    # -- quotas (KIP-219) ---------------------------------------------------------------------------
    def mute(self, throttle_ms: int) -> None:
        """Read nothing from this client for ``throttle_ms`` (its response still goes out now)."""
        self._stop_reading()
        if self._muted is not None:
            self._muted.cancel()
        self._muted = asyncio.get_running_loop().call_later(throttle_ms / 1000, self._unmute)

    def throttle_after_response(self, throttle_ms: int) -> None:
        """Mute once the response being awaited has been sent."""
        self._throttle_after = throttle_ms

    def _unmute(self) -> None:
        self._muted = None
        if self._closed or self._barriers or len(self._answers) >= PIPELINED_ANSWERS:
            return  # reading resumes once the awaited answers are sent
        self._busy = False
        self.transport.resume_reading()
        self._process()

    def _send(self, header, response: Any) -> None:
        """Queue a response; bytes wait in ``_out`` so pipelined responses share one write."""
        chunks = self.dispatcher.encode(header, response)
        if type(response) is RawResponse and response.revise is not None:
            self._acks.append((len(self._out), len(chunks), header, response))
        for chunk in chunks:
            if isinstance(chunk, FileSlice):
                self._flush()
                self._send_file(chunk)
            else:
                self._out.append(chunk)

    def _flush(self) -> None:
        """Send queued responses, after the appends they acknowledge have reached the log files.

        When a log dir has failed, a queued acknowledgement may be for an append that never
        reached its file: such responses are revised before anything is sent.
        """
        out = self._out
        if out:
            self._write_behind.write_all()
            if self._acks:
                if self._offline_dirs:
                    self._revise_acks(out)
                self._acks = []
            self._out = []
            if not self._closed:
                self.transport.write(out[0] if len(out) == 1 else b"".join(out))

    def _revise_acks(self, out: list) -> None:
        for position, count, header, response in reversed(self._acks):
            revised = response.revise()
            if revised is not None:
                out[position : position + count] = self.dispatcher.encode(header, revised)

    def _send_file(self, file_slice: FileSlice) -> None:
        position, remaining = file_slice.position, file_slice.length
        if self._socket_fd >= 0 and self.transport.get_write_buffer_size() == 0:
            try:
                while remaining > 0:
                    sent = os.sendfile(self._socket_fd, file_slice.fd, position, remaining)
                    if sent == 0:
                        break
                    position += sent
                    remaining -= sent
            except BlockingIOError:
                pass
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EINTR):
                    self._abort(f"sendfile failed: {exc}")
                    return
        if remaining > 0:
            self.transport.write(os.pread(file_slice.fd, remaining, position))

    def _abort(self, reason: str) -> None:
        if not self._closed:
            log.warning("closing connection from %s: %s", self.peer, reason)
            self._closed = True
            if self.transport is not None:
                self.transport.abort()


def close_idle_connections(connections: Iterable[Connection], max_idle_ms: int) -> int:
    """connections.max.idle.ms, as Kafka's Selector applies it: a connection that has sent nothing
    for that long and waits for no response is closed (a long-polling Fetch is not idle). The
    client reconnects when it next needs the broker. Returns how many were closed."""
    deadline = monotonic() - max_idle_ms / 1000
    closed = 0
    for connection in list(connections):
        if connection.last_received < deadline and connection.idle and not connection._busy and not connection._closed:
            log.debug("closing %s: idle for over %d ms (connections.max.idle.ms)", connection.peer, max_idle_ms)
            connection.transport.close()
            closed += 1
    return closed


# what the kernel reports on a socket whose peer has closed or reset it
_PEER_GONE = select.POLLRDHUP | select.POLLHUP | select.POLLERR


def close_departed_connections(connections: Iterable[Connection]) -> int:
    """Close the connections whose reading is stopped and whose client has gone.

    A connection stops reading while a request of its waits (a JoinGroup parked until its
    rebalance completes, a long-polling Fetch, a quota's mute), so its peer's FIN or reset is not
    seen until the answer is written: a consumer killed during a rebalance would count as joined
    until then. TLS connections see it anyway (the TLS layer reads on), so without this a dead
    member's fate depended on the listener's security protocol. The kernel is asked with one
    ``poll`` of timeout 0, which reads nothing; closing the transport runs ``connection_lost``,
    which cancels the parked requests, and their services learn that the client is gone.
    Returns how many were closed."""
    waiting = {c._socket_fd: c for c in connections if c._busy and not c._closed and c._socket_fd >= 0}
    if not waiting:
        return 0
    poller = select.poll()
    for fd in waiting:
        poller.register(fd, select.POLLRDHUP)
    closed = 0
    for fd, events in poller.poll(0):
        connection = waiting.get(fd)
        if connection is not None and events & _PEER_GONE and not connection._closed:
            log.info(
                "closing connection from %s: the client closed it while a request of its was waiting", connection.peer
            )
            connection._closed = True
            connection.transport.abort()
            closed += 1
    return closed
