"""ZooKeeper and three strom brokers, each in a network namespace of its own, cut apart by the kernel.

strom.chaos.cluster puts a TCP proxy on every link. A proxy cuts a link per pair, but every
connection then ends at the proxy, which the client reaches even when the broker behind it is
cut: what a real network partition does to the client's view is not what a proxy does. Here
each node has its own network stack, as separate machines have:

- a bridge in the root namespace (``strombr<N>``, 10.77.N.1/24) and one namespace per node,
  joined to it by a veth pair: ZooKeeper at 10.77.N.10:2181, broker ``i`` at 10.77.N.(10+i):9092;
- the client (a test's producer and consumer) stays in the root namespace, so it reaches every
  node through the bridge, from 10.77.N.1;
- a cut is an nftables rule in the receiving node's namespace (``drop`` of ``source``'s packets
  on input; on output, to the client, which has no namespace to filter in). Packets vanish as on
  a broken link: no reset, no ICMP; TCP retransmits until its own timeouts give up;
- the root namespace also gets an ``unreachable 10.77.0.0/16`` route, kept: where no bridge's
  /24 is, a client left open after its cluster is gone gets "unreachable" at once, and none of
  its packets leave the machine by the default route.

Everything is made under a lock, with names that carry the subnet's number N and this process's
pid (``strom<N>-<pid>-b1``), so parallel test workers get different subnets and a run that was
killed before it cleaned up is cleaned up by the next one (its pid is gone). Needs root (``ip
netns add``) and ``nft`` (Debian's nftables; scripts/setup.sh installs it); without either,
``start`` fails saying so rather than running a weaker test.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from strom.testing.cluster import LAG_TIME_MAX_MS, SESSION_TIMEOUT_MS
from strom.testing.nodes import ProcessNode, wait_ready

if TYPE_CHECKING:
    from collections.abc import Iterable

START_TIMEOUT_S = 30.0
COMMAND_TIMEOUT_S = 20.0
BROKER_PORT = 9092
ZOOKEEPER_PORT = 2181
ZOOKEEPER = "zookeeper"
CLIENT = "client"
_NAMESPACE = re.compile(r"^strom(\d+)-(\d+)-(\w+)$")
_TABLE = "strom_cut"

Node = int | str  # a broker id, "zookeeper" or "client"


def _run(*cmd: str, stdin: str | None = None) -> str:
    try:
        done = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    except FileNotFoundError as exc:
        raise RuntimeError(f"{cmd[0]} is not installed: {exc}") from exc
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def require_tools() -> None:
    """Fail loudly, naming what is missing: these tests are never skipped."""
    if os.geteuid() != 0:
        raise RuntimeError("network namespaces need root (ip netns add); run the suite as root, as CI does")
    for tool, package in (("ip", "iproute2"), ("nft", "nftables")):
        if shutil.which(tool) is None:
            raise RuntimeError(f"{tool} not found: apt-get install {package} (scripts/setup.sh does)")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _namespaces() -> list[str]:
    try:
        return sorted(os.listdir("/run/netns"))
    except FileNotFoundError:
        return []


def _remove_stale() -> None:
    """Namespaces and bridges left by a run whose process is gone (killed before its cleanup)."""
    stale: set[int] = set()
    for name in _namespaces():
        match = _NAMESPACE.match(name)
        if match and not _alive(int(match.group(2))):
            stale.add(int(match.group(1)))
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=COMMAND_TIMEOUT_S)
    for index in stale:
        for link in _links(index):
            subprocess.run(["ip", "link", "del", link], capture_output=True, timeout=COMMAND_TIMEOUT_S)


def _links(index: int) -> list[str]:
    """The root namespace's interfaces of subnet ``index``: its bridge and its veths' ends."""
    try:
        names = os.listdir("/sys/class/net")
    except FileNotFoundError:
        return []
    return sorted(n for n in names if n == f"strombr{index}" or n.startswith(f"stv{index}x"))


class Network:
    """A bridge and a namespace per node; the cuts between nodes as nftables rules."""

    def __init__(self, names: Iterable[str]):
        self.names = list(names)
        self.index = -1
        self.bridge = ""
        self.addresses: dict[str, str] = {}
        self.namespaces: dict[str, str] = {}
        self.drops: set[tuple[str, str]] = set()  # (source, target) whose packets vanish

    def create(self) -> Network:
        require_tools()
        lock_path = Path(tempfile.gettempdir()) / "strom-netns.lock"
        with open(lock_path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            _remove_stale()
            used = {int(m.group(1)) for m in map(_NAMESPACE.match, _namespaces()) if m}
            free = [i for i in range(1, 255) if i not in used and not _links(i)]
            if not free:
                raise RuntimeError("no free 10.77.N.0/24 subnet for a test network (254 in use)")
            self.index = free[0]
            self.bridge = f"strombr{self.index}"
            try:
                self._make()
            except BaseException:
                self.close()
                raise
        return self

    def _make(self) -> None:
        n, pid = self.index, os.getpid()
        self.addresses[CLIENT] = f"10.77.{n}.1"
        commands = [
            # once a bridge is gone, its subnet's packets (a client left open) must not take the
            # default route off this machine: the /16 answers "unreachable" where no /24 is
            "route replace unreachable 10.77.0.0/16",
            f"link add {self.bridge} type bridge",
            f"addr add 10.77.{n}.1/24 dev {self.bridge}",
            f"link set {self.bridge} up",
        ]
        inside: dict[str, list[str]] = {}
        for offset, name in enumerate(self.names):
            namespace = self.namespaces[name] = f"strom{n}-{pid}-{name}"
            address = self.addresses[name] = f"10.77.{n}.{10 + offset}"
            veth = f"stv{n}x{offset}"
            commands += [
                f"netns add {namespace}",
                f"link add {veth} type veth peer name eth0 netns {namespace}",
                f"link set {veth} master {self.bridge}",
                f"link set {veth} up",
            ]
            inside[namespace] = [f"addr add {address}/24 dev eth0", "link set eth0 up", "link set lo up"]
        _run("ip", "-batch", "-", stdin="\n".join(commands) + "\n")
        for namespace, lines in inside.items():
            _run("ip", "-n", namespace, "-batch", "-", stdin="\n".join(lines) + "\n")
        for name in self.names:
            self._apply(name)

    def prefix(self, name: str) -> list[str]:
        """What runs a command inside ``name``'s namespace."""
        return ["ip", "netns", "exec", self.namespaces[name]]

    def set_drop(self, source: str, target: str, dropped: bool) -> None:
        if source == target:
            raise ValueError("a node cannot be cut off from itself")
        for node in (source, target):
            if node not in self.addresses:
                raise ValueError(f"no node {node!r} (nodes: {', '.join(self.addresses)})")
        if dropped:
            self.drops.add((source, target))
        else:
            self.drops.discard((source, target))
        self._apply(target if target != CLIENT else source)

    def heal(self) -> None:
        touched = {t if t != CLIENT else s for s, t in self.drops}
        self.drops.clear()
        for name in touched:
            self._apply(name)

    def _apply(self, name: str) -> None:
        """Write ``name``'s whole rule set at once (nft -f is atomic)."""
        inbound = sorted(self.addresses[s] for s, t in self.drops if t == name)
        outbound = sorted(self.addresses[t] for s, t in self.drops if s == name and t == CLIENT)
        rules = [f"table inet {_TABLE}", f"delete table inet {_TABLE}", f"table inet {_TABLE} {{"]
        rules.append("  chain input { type filter hook input priority 0; policy accept;")
        if inbound:
            rules.append(f"    ip saddr {{ {', '.join(inbound)} }} drop")
        rules.append("  }")
        rules.append("  chain output { type filter hook output priority 0; policy accept;")
        if outbound:
            rules.append(f"    ip daddr {{ {', '.join(outbound)} }} drop")
        rules += ["  }", "}"]
        _run(*self.prefix(name), "nft", "-f", "-", stdin="\n".join(rules) + "\n")

    def close(self) -> None:
        """Remove every namespace and the bridge (their veths go with them); safe to call twice."""
        for namespace in self.namespaces.values():
            if os.path.exists(f"/run/netns/{namespace}"):
                subprocess.run(["ip", "netns", "del", namespace], capture_output=True, timeout=COMMAND_TIMEOUT_S)
        # a namespace goes away asynchronously, and its veths with it: delete them now, so that
        # the next cluster can take the same names at once
        for link in _links(self.index) if self.index >= 0 else []:
            subprocess.run(["ip", "link", "del", link], capture_output=True, timeout=COMMAND_TIMEOUT_S)


class NetnsCluster:
    """ZooKeeper and ``size`` brokers (ids 1..size), each in its own namespace; the client in the root one."""

    def __init__(self, root: Path, size: int = 3, overrides: dict[str, str] | None = None, listener: str = "PLAINTEXT"):
        self.root = Path(root)
        self.size = size
        self.listener = listener  # the one listener's name and protocol, for clients and brokers alike
        self.overrides = dict(overrides or {})
        self.network = Network([ZOOKEEPER, *(_name(b) for b in range(1, size + 1))])
        self.nodes: dict[int, ProcessNode] = {}
        self._zookeeper: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{self.address(b)}:{BROKER_PORT}" for b in self.nodes)

    @property
    def zookeeper_address(self) -> str:
        """ZooKeeper as the root namespace reaches it (an observer that no broker's cut blinds)."""
        return f"{self.address(ZOOKEEPER)}:{ZOOKEEPER_PORT}"

    def address(self, node: Node) -> str:
        return self.network.addresses[_name(node)]

    def start(self) -> NetnsCluster:
        from strom.cluster import zookeeper_server

        self.network.create()
        try:
            (self.root / "zookeeper").mkdir(parents=True, exist_ok=True)
            self._zookeeper, _ = zookeeper_server.start(
                str(self.root / "zookeeper"),
                ZOOKEEPER_PORT,
                START_TIMEOUT_S,
                host=self.address(ZOOKEEPER),
                prefix=self.network.prefix(ZOOKEEPER),
            )
            for broker_id in range(1, self.size + 1):
                node = self.nodes[broker_id] = ProcessNode(
                    broker_id,
                    self.root / f"broker-{broker_id}",
                    {
                        "listeners": f"{self.listener}://{self.address(broker_id)}:{BROKER_PORT}",
                        "zookeeper.connect": self.zookeeper_address,
                        "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
                        "replica.lag.time.max.ms": str(LAG_TIME_MAX_MS),
                        "offsets.topic.replication.factor": str(min(3, self.size)),
                        **self.overrides,
                    },
                )
                node.prefix = self.network.prefix(_name(broker_id))
                node.host = self.address(broker_id)
                node.spawn()
            wait_ready(list(self.nodes.values()), START_TIMEOUT_S)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Kill every process, then remove the namespaces and the bridge."""
        from strom.cluster import zookeeper_server

        try:
            for node in self.nodes.values():
                node.kill()
            if self._zookeeper is not None:
                zookeeper_server.stop(self._zookeeper)
                self._zookeeper = None
        finally:
            self.network.close()

    def __enter__(self) -> NetnsCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- faults ------------------------------------------------------------------------------------
    def drop(self, source: Node, target: Node) -> None:
        """Drop every packet from ``source`` to ``target`` (a broker id, "zookeeper" or "client").

        The other direction still flows, so no TCP connection between them works, but each side
        learns it only from its own timeouts; a connection's open half keeps delivering.
        """
        self.network.set_drop(_name(source), _name(target), True)

    def partition(self, a: Node, b: Node) -> None:
        """Cut the link between ``a`` and ``b`` both ways."""
        self.drop(a, b)
        self.drop(b, a)

    def cut_from_zookeeper(self, broker_id: int, direction: str = "both") -> None:
        """``direction``: "both", "to_target" (only the broker's packets to ZooKeeper vanish) or "from_target"."""
        if direction in ("both", "to_target"):
            self.drop(broker_id, ZOOKEEPER)
        if direction in ("both", "from_target"):
            self.drop(ZOOKEEPER, broker_id)

    def isolate(self, broker_id: int) -> None:
        """Cut a broker off from every other broker (ZooKeeper and clients still reach it)."""
        for other in self.nodes:
            if other != broker_id:
                self.partition(broker_id, other)

    def heal_all(self) -> None:
        self.network.heal()

    def log_tail(self, broker_id: int, chars: int = 4000) -> str:
        return self.nodes[broker_id].log_tail(chars)


def _name(node: Node) -> str:
    return f"b{node}" if isinstance(node, int) else node
