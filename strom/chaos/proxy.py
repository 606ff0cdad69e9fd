"""A fault-injecting TCP proxy on 127.0.0.1, to cut one process off from another.

``blackhole()`` makes the link silent without closing anything, as a network partition does:
bytes are dropped, nothing is answered, and new connections are accepted but go nowhere.
``blackhole("to_target")`` or ``("from_target")`` drops one direction only (the asymmetric
partition Jepsen found bugs with). ``heal()`` ends it; the connections that lived through the
partition are reset (a real TCP connection would have timed out), so both sides reconnect cleanly.

Every process on the machine reaches a proxy from 127.0.0.1, so a proxy in front of a broker
cannot tell its callers apart by address. Given ``identify`` (the caller's source port to a
name), it names each connection's source when it is accepted, and a blackhole can then cut one
source only: broker 2's connections to broker 1 can go silent while broker 3's and the clients'
pass. ``socket_owner`` finds the process that owns a loopback connection, through /proc.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable

DIRECTIONS = ("both", "to_target", "from_target")
EVERY_SOURCE = "*"


class TcpProxy:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1", identify: Callable[[int], str] | None = None):
        self.target = (target_host, target_port)
        self.identify = identify
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        # direction -> the sources whose bytes in that direction are dropped; replaced, never mutated,
        # so the pumps read it without a lock
        self._cuts: dict[str, frozenset[str]] = {"to_target": frozenset(), "from_target": frozenset()}
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._sockets: list[tuple[str, socket.socket]] = []
        threading.Thread(target=self._accept, name="tcp-proxy-accept", daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def cut(self) -> bool:
        return any(self._cuts.values())

    def blackhole(self, direction: str = "both", source: str = EVERY_SOURCE) -> None:
        """Drop bytes in ``direction`` on the connections of ``source`` (every source by default)."""
        if direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}, not {direction!r}")
        with self._lock:
            for name in self._cuts:
                if direction in ("both", name):
                    self._cuts[name] = self._cuts[name] | {source}

    def heal(self, source: str | None = None) -> None:
        """End the cuts of ``source`` (of every source if None) and reset the connections that lived through them."""
        with self._lock:
            for name, sources in self._cuts.items():
                self._cuts[name] = frozenset() if source is None else sources - {source}
        self._reset_all(source)

    def close(self) -> None:
        self._closed.set()
        self.listener.close()
        self._reset_all()

    def _dropping(self, source: str, direction: str) -> bool:
        sources = self._cuts[direction]
        return source in sources or EVERY_SOURCE in sources

    def _reset_all(self, source: str | None = None) -> None:
        with self._lock:
            doomed = [sock for name, sock in self._sockets if source in (None, name)]
            self._sockets = [(name, sock) for name, sock in self._sockets if source not in (None, name)]
        for sock in doomed:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, peer = self.listener.accept()
            except OSError:
                return
            source = "client"
            if self.identify is not None:
                try:
                    source = self.identify(peer[1])
                except OSError:
                    pass
            with self._lock:
                self._sockets.append((source, client))
            if self._dropping(source, "to_target"):
                continue  # held open, going nowhere, until heal() resets it
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets.append((source, upstream))
            for src, dst, direction in ((client, upstream, "to_target"), (upstream, client, "from_target")):
                threading.Thread(
                    target=self._pump, args=(src, dst, source, direction), name="tcp-proxy-pump", daemon=True
                ).start()

    def _pump(self, src: socket.socket, dst: socket.socket, source: str, direction: str) -> None:
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                break
            if not data:
                break
            if self._dropping(source, direction):
                continue  # dropped, as a partition drops packets
            try:
                dst.sendall(data)
            except OSError:
                break
        for sock in (src, dst):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def socket_owner(local_port: int, pids: dict[int, str], default: str = "client") -> str:
    """The name (from ``pids``) of the process holding the IPv4 loopback socket bound to ``local_port``.

    The kernel lists each socket with its inode in /proc/net/tcp; the owner is the process with
    that inode among its descriptors. Only the named processes are searched, so a connection from
    any other process (this one's clients) is ``default``.
    """
    wanted = f"0100007F:{local_port:04X}"
    inode = None
    with open("/proc/net/tcp") as table:
        next(table)
        for line in table:
            fields = line.split()
            if fields[1] == wanted:
                inode = fields[9]
                break
    if inode is None or inode == "0":
        return default
    link = f"socket:[{inode}]"
    for pid, name in pids.items():
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    if os.readlink(f"/proc/{pid}/fd/{fd}") == link:
                        return name
                except OSError:
                    continue
        except OSError:
            continue
    return default
