"""A proxy in front of ZooKeeper that strikes at one chosen request of a broker.

A fault timed by the clock hits a step of a broker's startup or of a topic creation only by luck
on a loaded machine. This proxy reads the client's ZooKeeper requests as they pass (each is a
size-prefixed frame: xid, op type, then, for most ops, the znode path) and calls ``on_trip``
just before it forwards the first one that ``match`` accepts, so the fault lands exactly there.
The request itself still reaches ZooKeeper: a fault that drops the answer leaves the request
done but unacknowledged, the hardest case for a retry. Unless ``on_trip`` returns False: then
the request never reaches ZooKeeper and the connection is reset, as a link that drops at that
moment does (the client reconnects to the same session).
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import threading
import time
from collections.abc import Callable

from strom.chaos.proxy import TcpProxy

CREATE_OPS = frozenset({1, 15, 19, 21})  # create, create2, createContainer, createTTL
GET_CHILDREN_OPS = frozenset({8, 12})
MULTI = 14
_PATH_FIRST = CREATE_OPS | GET_CHILDREN_OPS | {2, 3, 4, 5}  # and delete, exists, getData, setData


def request_path(frame: bytes) -> tuple[int, str]:
    """(op type, path) of a request frame without its size; a multi's path is its first op's."""
    if len(frame) < 8:
        return -1, ""
    _, op = struct.unpack_from(">ii", frame, 0)
    offset = 8
    if op == MULTI:  # MultiHeader: op type, done flag, error; then the op's own body
        offset += 9
    elif op not in _PATH_FIRST:
        return op, ""
    if len(frame) < offset + 4:
        return op, ""
    (length,) = struct.unpack_from(">i", frame, offset)
    return op, frame[offset + 4 : offset + 4 + max(0, length)].decode(errors="replace")


def stop_process(pid: int, timeout_s: float = 5.0) -> None:
    """SIGSTOP ``pid`` and return once every one of its threads is stopped.

    kill() only marks the signal pending and wakes one thread of the process to take it; that
    thread then stops the others. Until it gets a CPU, the rest run on: on a loaded machine
    ZooKeeper's I/O thread once answered the very request forwarded "after" the SIGSTOP.
    """
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if all(_thread_state(pid, tid) in ("T", "t", "X", "Z", "") for tid in os.listdir(f"/proc/{pid}/task")):
            return
        time.sleep(0.001)
    raise AssertionError(f"process {pid} was not stopped within {timeout_s}s of its SIGSTOP")


def _thread_state(pid: int, tid: str) -> str:
    """The state letter in /proc/PID/task/TID/stat ("" once the thread is gone)."""
    try:
        with open(f"/proc/{pid}/task/{tid}/stat") as handle:
            stat = handle.read()
    except OSError:
        return ""
    return stat[stat.rindex(")") + 2 :][:1]


class ZkTripwire(TcpProxy):
    """``match(op, path)`` picks the request; ``on_trip(proxy)`` runs once, before it is forwarded
    (or instead: it returns False)."""

    def __init__(
        self,
        zookeeper_port: int,
        match: Callable[[int, str], bool],
        on_trip: Callable[[ZkTripwire], bool | None],
    ):
        self.match = match
        self.on_trip = on_trip
        self.tripped = threading.Event()
        self._trip_lock = threading.Lock()
        super().__init__(zookeeper_port)

    def _pump(self, src: socket.socket, dst: socket.socket, source: str, direction: str) -> None:
        if direction != "to_target":
            super()._pump(src, dst, source, direction)
            return
        buffer = b""
        connect_request = True  # a connection's first frame is its ConnectRequest, which has no header
        open_ = True
        while open_:
            try:
                data = src.recv(65536)
            except OSError:
                break
            if not data:
                break
            if self._dropping(source, direction):
                continue
            buffer += data
            while len(buffer) >= 4:
                (size,) = struct.unpack_from(">i", buffer, 0)
                if len(buffer) < 4 + size:
                    break
                frame, buffer = buffer[: 4 + size], buffer[4 + size :]
                if connect_request:
                    connect_request = False
                elif not self.tripped.is_set() and not self._maybe_trip(frame[4:]):
                    open_ = False  # dropped: the connection is reset below
                    break
                try:
                    dst.sendall(frame)
                except OSError:
                    open_ = False
                    break
        for sock in (src, dst):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _maybe_trip(self, frame: bytes) -> bool:
        """Whether to forward ``frame``."""
        op, path = request_path(frame)
        if not self.match(op, path):
            return True
        with self._trip_lock:
            if self.tripped.is_set():
                return True
            forward = self.on_trip(self) is not False
            self.tripped.set()
            return forward
