"""A fault-injecting TCP proxy on 127.0.0.1, to cut one process off from another.

``blackhole()`` makes the link silent without closing anything, as a network partition does:
bytes are dropped, nothing is answered, and new connections are accepted but go nowhere.
``blackhole("to_target")`` or ``("from_target")`` drops one direction only (the asymmetric
partition Jepsen found bugs with). ``heal()`` ends it; the connections that lived through the
partition are reset (a real TCP connection would have timed out), so both sides reconnect cleanly.
"""

from __future__ import annotations

import socket
import threading

DIRECTIONS = ("both", "to_target", "from_target")


class TcpProxy:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1"):
        self.target = (target_host, target_port)
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self._dropping = {"to_target": threading.Event(), "from_target": threading.Event()}
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, name="tcp-proxy-accept", daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def cut(self) -> bool:
        return any(event.is_set() for event in self._dropping.values())

    def blackhole(self, direction: str = "both") -> None:
        if direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}, not {direction!r}")
        for name, event in self._dropping.items():
            if direction in ("both", name):
                event.set()

    def heal(self) -> None:
        for event in self._dropping.values():
            event.clear()
        self._reset_all()

    def close(self) -> None:
        self._closed.set()
        self.listener.close()
        self._reset_all()

    def _reset_all(self) -> None:
        with self._lock:
            doomed, self._sockets = self._sockets, []
        for sock in doomed:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self._lock:
                self._sockets.append(client)
            if self._dropping["to_target"].is_set():
                continue  # held open, going nowhere, until heal() resets it
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets.append(upstream)
            for src, dst, direction in ((client, upstream, "to_target"), (upstream, client, "from_target")):
                threading.Thread(target=self._pump, args=(src, dst, self._dropping[direction]),
                                 name="tcp-proxy-pump", daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket, dropping: threading.Event) -> None:
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                break
            if not data:
                break
            if dropping.is_set():
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
