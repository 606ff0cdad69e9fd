"""``strom cluster``: a multi-broker cluster on this machine, as the seeds' quickstart builds by hand.

    strom cluster start --brokers 3 --dir ./cluster      # a ZooKeeper and brokers 1, 2, 3
    strom cluster status --dir ./cluster
    strom cluster stop --dir ./cluster

``start`` writes ``config/server-<id>.properties`` for every broker (its own broker.id,
listeners and log.dirs, the shared zookeeper.connect), starts a ZooKeeper server from Debian's
package unless ``--zookeeper HOST:PORT`` names one, then starts the brokers detached from the
terminal (their output goes to ``logs/``, their pids to ``pids/``), and prints the bootstrap
servers once every broker serves. Starting a stopped cluster's directory again reuses its
configuration and data. ``stop`` stops the brokers one after the other, each with a controlled
shutdown, then the ZooKeeper it started. ``status`` shows which brokers run and are registered
in ZooKeeper, the controller and the bootstrap servers of the running brokers; it exits 1 when
something is down.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
from typing import TypeGuard

from strom.cluster import zookeeper_server as zk
from strom.startup import port_holder, refusal_in

STATE_FILE = "cluster.json"
REGISTRY_URL_FILE = "strom.schema-registry"  # a broker's Schema Registry URL (strom.server.broker writes it)
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0


class ClusterError(Exception):
    pass


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    start = actions.add_parser("start", help="start ZooKeeper (unless given) and N brokers in the background")
    start.add_argument("--dir", required=True, help="the cluster's directory (configs, data, logs, pids)")
    start.add_argument("--brokers", type=int, default=3, help="number of brokers (default 3)")
    start.add_argument("--zookeeper", metavar="HOST:PORT[/CHROOT]", help="use this ZooKeeper instead of starting one")
    start.add_argument(
        "--base-port",
        type=int,
        metavar="PORT",
        help="listen on PORT, PORT+1, ... (default: free ports chosen once and kept)",
    )
    start.add_argument("--first-id", type=int, default=1, help="broker.id of the first broker (default 1)")
    start.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker config for every broker's properties file (repeatable)",
    )
    start.add_argument(
        "--secure",
        action="store_true",
        help="SASL_SSL only: make a CA, broker certificates and an admin SCRAM user, turn the ACL "
        "authorizer on, and write a client properties file for --command-config",
    )
    stop = actions.add_parser("stop", help="stop the brokers (controlled shutdown), then the ZooKeeper it started")
    stop.add_argument("--dir", required=True, help="the cluster's directory")
    status = actions.add_parser("status", help="which brokers are up, the controller, the bootstrap servers")
    status.add_argument("--dir", required=True, help="the cluster's directory")
    add = actions.add_parser(
        "add-broker",
        help="start one more broker in a running cluster (then reassign "
        "partitions onto it with `strom reassign-partitions`)",
    )
    add.add_argument("--dir", required=True, help="the cluster's directory")
    add.add_argument("--id", type=int, dest="broker_id", help="its broker.id (default: the highest id + 1)")


def run(args: argparse.Namespace) -> int:
    try:
        if args.action == "start":
            return start(args)
        if args.action == "stop":
            return stop(args.dir)
        if args.action == "add-broker":
            return add_broker(args.dir, args.broker_id)
        return status(args.dir)
    except ClusterError as exc:
        print(f"strom cluster {args.action}: {exc}", file=sys.stderr)
        return 1


# -- processes ---------------------------------------------------------------------------------------
def _process_state(pid: int) -> str | None:
    """The /proc state letter of ``pid``, or None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return None


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def is_running(pid: int | None, marker: str) -> TypeGuard[int]:
    """Whether ``pid`` is alive (not a zombie) and still the process we started (its command line
    contains ``marker``), so a recycled pid is never mistaken for ours."""
    if not pid:
        return False
    state = _process_state(pid)
    return state is not None and state != "Z" and marker in _cmdline(pid)


def _read_pid(path: str) -> int | None:
    try:
        with open(path) as handle:
            return int(handle.read().strip() or 0) or None
    except (OSError, ValueError):
        return None


def _write(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as handle:
        handle.write(text)
    os.replace(tmp, path)


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _spawn(command: list[str], log_path: str, pid_path: str, cwd: str | None = None) -> subprocess.Popen:
    """Start ``command`` in its own session (it outlives this command and the terminal)."""
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, cwd=cwd
        )
    _write(pid_path, f"{process.pid}\n")
    return process


# -- the cluster's files -----------------------------------------------------------------------------
class Layout:
    def __init__(self, directory: str):
        self.dir = os.path.abspath(directory)
        self.state = os.path.join(self.dir, STATE_FILE)
        self.config = os.path.join(self.dir, "config")
        self.logs = os.path.join(self.dir, "logs")
        self.pids = os.path.join(self.dir, "pids")
        self.zookeeper = os.path.join(self.dir, "zookeeper")

    def properties(self, broker_id: int) -> str:
        return os.path.join(self.config, f"server-{broker_id}.properties")

    def data(self, broker_id: int) -> str:
        return os.path.join(self.dir, "data", f"kafka-logs-{broker_id}")

    def broker_pid(self, broker_id: int) -> str:
        return os.path.join(self.pids, f"server-{broker_id}.pid")

    def broker_log(self, broker_id: int) -> str:
        return os.path.join(self.logs, f"server-{broker_id}.log")

    @property
    def zookeeper_pid(self) -> str:
        return os.path.join(self.pids, "zookeeper.pid")

    def load(self) -> dict | None:
        try:
            with open(self.state) as handle:
                return json.load(handle)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise ClusterError(f"cannot read {self.state}: {exc}") from None


def _properties_text(
    broker_id: int,
    port: int,
    data_dir: str,
    zookeeper: str,
    count: int,
    overrides: dict[str, str],
    metrics_port: int = 0,
    registry_port: int = 0,
    registry_scheme: str = "http",
) -> str:
    lines = [
        "# written by `strom cluster start`; edit and `strom cluster stop/start` to apply",
        f"broker.id={broker_id}",
        f"listeners=PLAINTEXT://127.0.0.1:{port}",
        f"metrics.listener=http://127.0.0.1:{metrics_port}",
        f"log.dirs={data_dir}",
        f"zookeeper.connect={zookeeper}",
        f"offsets.topic.replication.factor={min(3, count)}",
    ]
    # https with HTTP Basic (the SCRAM users) on --secure clusters: the broker's keystore serves it
    lines.insert(4, f"schema.registry.listeners={registry_scheme}://127.0.0.1:{registry_port}")
    lines = [line for line in lines if line.split("=", 1)[0] not in overrides]  # an override replaces a default
    for key, value in overrides.items():
        lines.append(f"{key}={value}")
    return "\n".join(lines) + "\n"


def _parse_overrides(items: list[str]) -> dict[str, str]:
    result = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ClusterError(f"--override expects KEY=VALUE, got {item!r}")
        result[key.strip()] = value.strip()
    return result


# -- start -------------------------------------------------------------------------------------------
def _start_zookeeper(layout: Layout) -> tuple[int, str]:
    """A ZooKeeper server from Debian's package on a free loopback port; returns (pid, host:port)."""
    missing = [jar for jar in zk.JARS if not os.path.exists(os.path.join(zk.JAVA_DIR, jar))]
    if missing:
        raise ClusterError(
            f"ZooKeeper jars missing ({', '.join(missing)}): apt-get install zookeeper, or pass --zookeeper HOST:PORT"
        )
    os.makedirs(layout.zookeeper, exist_ok=True)
    config_path = os.path.join(layout.zookeeper, "zoo.cfg")
    port = None
    if os.path.exists(config_path):  # a restart keeps the port the brokers were configured with
        with open(config_path) as handle:
            for line in handle:
                if line.startswith("clientPort="):
                    port = int(line.split("=", 1)[1])
    if port is None or not zk.port_free(port):
        port = zk.free_port()
    config = zk.write_config(layout.zookeeper, port)
    classpath = ":".join(os.path.join(zk.JAVA_DIR, jar) for jar in zk.JARS)
    process = _spawn(
        ["java", "-Xmx256m", "-cp", classpath, zk.MAIN_CLASS, config],
        os.path.join(layout.logs, "zookeeper.log"),
        layout.zookeeper_pid,
    )
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ClusterError(f"ZooKeeper exited with {process.returncode}; see {layout.logs}/zookeeper.log")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                sock.sendall(b"ruok")
                if sock.recv(4) == b"imok":
                    return process.pid, f"127.0.0.1:{port}"
        except OSError:
            pass
        time.sleep(0.1)
    _terminate(process.pid, "QuorumPeerMain")
    raise ClusterError(f"ZooKeeper did not answer within {START_TIMEOUT_S:.0f}s")


def _broker_ports(count: int, base_port: int | None) -> list[int]:
    if base_port is None:
        return [zk.free_port() for _ in range(count)]  # free_port never hands out a port twice
    ports = list(range(base_port, base_port + count))
    busy = [p for p in ports if not zk.port_free(p)]
    if busy:
        held = "; ".join(f"port {p} is in use by {port_holder(p) or 'another process'}" for p in busy)
        raise ClusterError(f"--base-port {base_port}: {held}")
    return ports


def start(args: argparse.Namespace) -> int:
    layout = Layout(args.dir)
    overrides = _parse_overrides(args.override)
    state = layout.load()
    if state is not None:
        running = [
            b
            for b, info in state["brokers"].items()
            if is_running(_read_pid(layout.broker_pid(int(b))), "server-start")
        ]
        if running:
            raise ClusterError(f"brokers {', '.join(running)} of {layout.dir} are running; `strom cluster stop` first")
        if args.brokers != len(state["brokers"]):
            raise ClusterError(f"{layout.dir} holds a cluster of {len(state['brokers'])} brokers, not {args.brokers}")
    elif args.brokers < 1:
        raise ClusterError("--brokers must be at least 1")
    if state is not None and getattr(args, "secure", False) and not state.get("secure"):
        raise ClusterError(f"{layout.dir} holds a cluster started without --secure; use a new --dir")
    # before anything is made or started: a --base-port in use leaves no ZooKeeper running
    ports = _broker_ports(args.brokers, args.base_port) if state is None else []
    try:
        for path in (layout.dir, layout.config, layout.logs, layout.pids):
            os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise ClusterError(f"--dir {layout.dir}: cannot create {exc.filename}: {exc.strerror}") from None

    managed = args.zookeeper is None and (state is None or state.get("zookeeper_managed", True))
    if managed:
        zk_pid = _read_pid(layout.zookeeper_pid)
        if is_running(zk_pid, "QuorumPeerMain"):
            if state is None:  # its address was in the state file
                raise ClusterError(
                    f"ZooKeeper (pid {zk_pid}) of {layout.dir} is running but {STATE_FILE} is missing; stop it first"
                )
            zookeeper = state["zookeeper"]
        else:
            zk_pid, zookeeper = _start_zookeeper(layout)
            print(f"started ZooKeeper on {zookeeper} (pid {zk_pid})", flush=True)
    elif args.zookeeper:
        zookeeper = args.zookeeper
    else:  # started with --zookeeper before: the state names the ensemble
        assert state is not None  # without --zookeeper, only a state saying so makes it unmanaged
        zookeeper = state["zookeeper"]

    if state is None:
        ids = list(range(args.first_id, args.first_id + args.brokers))
        # metrics ports are fixed like the broker ports, so a Prometheus config written once keeps working
        metrics_ports = [p for p in _broker_ports(2 * args.brokers, None) if p not in ports][: args.brokers]
        # and so are the Schema Registry's: a client's schema.registry.url keeps working after a restart
        taken_ports = set(ports) | set(metrics_ports)
        registry_ports = [p for p in _broker_ports(3 * args.brokers, None) if p not in taken_ports][: args.brokers]
        state = {
            "zookeeper": zookeeper,
            "zookeeper_managed": managed,
            "brokers": {
                str(b): {"port": p, "metrics_port": m, "registry_port": r}
                for b, p, m, r in zip(ids, ports, metrics_ports, registry_ports)
            },
        }
        if getattr(args, "secure", False):
            state["secure"] = True
            taken = set(ports) | set(metrics_ports)
            internal = [p for p in _broker_ports(3 * args.brokers, None) if p not in taken][: args.brokers]
            for info, internal_port in zip(state["brokers"].values(), internal):
                info["internal_port"] = internal_port
    state["zookeeper"], state["zookeeper_managed"] = zookeeper, managed
    made = None
    if state.get("secure"):
        from strom.cli import secure_cluster

        made = secure_cluster.prepare(layout.dir, [int(b) for b in state["brokers"]])
        secure_cluster.write_users(zookeeper, made)
    count = len(state["brokers"])
    for key, info in state["brokers"].items():
        broker_id = int(key)
        path = layout.properties(broker_id)
        if not os.path.exists(path) or overrides:
            own = overrides
            if made is not None:
                own = {
                    **secure_cluster.broker_overrides(made, broker_id, info["port"], info["internal_port"]),
                    **overrides,
                }
            _write(
                path,
                _properties_text(
                    broker_id,
                    info["port"],
                    layout.data(broker_id),
                    zookeeper,
                    count,
                    own,
                    info.get("metrics_port", 0),
                    info.get("registry_port", 0),
                    "https" if made is not None else "http",
                ),
            )
        else:  # keep the user's edits; only the ZooKeeper address may have moved (a restarted ZooKeeper)
            _rewrite_key(path, "zookeeper.connect", zookeeper)
    _write(layout.state, json.dumps(state, indent=2) + "\n")

    processes = {}
    log_offsets = {}  # where each broker's output of this start begins in its log
    for key in state["brokers"]:
        broker_id = int(key)
        os.makedirs(layout.data(broker_id), exist_ok=True)
        for stale in ("strom.port", REGISTRY_URL_FILE):  # written anew by the broker once it serves
            if os.path.exists(os.path.join(layout.data(broker_id), stale)):
                os.unlink(os.path.join(layout.data(broker_id), stale))
        log_offsets[broker_id] = (
            os.path.getsize(layout.broker_log(broker_id)) if os.path.exists(layout.broker_log(broker_id)) else 0
        )
        processes[broker_id] = _spawn(
            [sys.executable, "-m", "strom.cli.main", "server-start", layout.properties(broker_id)],
            layout.broker_log(broker_id),
            layout.broker_pid(broker_id),
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    waiting = set(processes)
    while waiting and time.monotonic() < deadline:
        for broker_id in sorted(waiting):
            process = processes[broker_id]
            if process.poll() is not None:
                log_path = layout.broker_log(broker_id)
                reason = refusal_in(log_path, log_offsets[broker_id]) or f"exited with {process.returncode}"
                stop(layout.dir)  # the brokers and the ZooKeeper this start left running
                raise ClusterError(f"broker {broker_id} did not start: {reason} (see {log_path})")
            if os.path.exists(os.path.join(layout.data(broker_id), "strom.port")):
                waiting.discard(broker_id)
        time.sleep(0.05)
    if waiting:
        raise ClusterError(f"brokers {sorted(waiting)} did not start within {START_TIMEOUT_S:.0f}s; see {layout.logs}")
    for broker_id, process in sorted(processes.items()):
        port = state["brokers"][str(broker_id)]["port"]
        print(
            f"started broker {broker_id} on 127.0.0.1:{port} (pid {process.pid}, "
            f"config {layout.properties(broker_id)})",
            flush=True,
        )
        metrics_file = os.path.join(layout.data(broker_id), "strom.metrics")
        if os.path.exists(metrics_file):
            with open(metrics_file) as handle:
                print(f"  metrics: {handle.read().strip()}", flush=True)
    registries = registry_urls(layout, state)
    if made is not None:
        client_properties = os.path.join(layout.config, "client.properties")
        secure_cluster.write_client_properties(client_properties, made, bootstrap(state))
        print(f"Client properties (admin, SASL_SSL): {client_properties}", flush=True)
    print(f"Bootstrap servers: {bootstrap(state)}", flush=True)
    if registries:
        print(f"Schema Registry: {','.join(registries)}", flush=True)
        if made is not None:
            print(
                f"  (HTTP Basic: a SCRAM user's credentials, the admin's as in the client properties; "
                f"the CA: {made.ca})",
                flush=True,
            )
    return 0


def registry_urls(layout: Layout, state: dict) -> list[str]:
    """The URL each broker of the cluster serves the Schema Registry on (from the file it writes)."""
    urls = []
    for key in sorted(state["brokers"], key=int):
        path = os.path.join(layout.data(int(key)), REGISTRY_URL_FILE)
        if os.path.exists(path):
            with open(path) as handle:
                urls.append(handle.read().strip())
    return urls


def _rewrite_key(path: str, key: str, value: str) -> None:
    with open(path) as handle:
        lines = handle.read().splitlines()
    out = [f"{key}={value}" if line.split("=", 1)[0].strip() == key else line for line in lines]
    _write(path, "\n".join(out) + "\n")


def bootstrap(state: dict, only: set[int] | None = None) -> str:
    return ",".join(
        f"127.0.0.1:{info['port']}"
        for key, info in sorted(state["brokers"].items(), key=lambda kv: int(kv[0]))
        if only is None or int(key) in only
    )


# -- add-broker --------------------------------------------------------------------------------------
def add_broker(directory: str, broker_id: int | None) -> int:
    """One more broker with the first broker's settings (its own id, port and data dir; on a
    ``--secure`` cluster also its own INTERNAL port and a certificate from the cluster's CA).

    It joins the cluster's ZooKeeper and holds no partition until some are reassigned onto it
    (Kafka does not move partitions by itself either). The cluster's state file lists it, so
    `stop` and `status` include it and `start --brokers N` restarts all N.
    """
    layout = Layout(directory)
    state = layout.load()
    if state is None:
        raise ClusterError(f"{layout.dir} holds no cluster ({STATE_FILE} is missing); `strom cluster start` first")
    ids = sorted(int(b) for b in state["brokers"])
    if not any(is_running(_read_pid(layout.broker_pid(b)), "server-start") for b in ids):
        raise ClusterError(f"no broker of {layout.dir} is running; `strom cluster start --dir {directory}` first")
    if state.get("zookeeper_managed") and not is_running(_read_pid(layout.zookeeper_pid), "QuorumPeerMain"):
        raise ClusterError(f"the ZooKeeper of {layout.dir} is not running; `strom cluster start` first")
    broker_id = max(ids) + 1 if broker_id is None else broker_id
    if str(broker_id) in state["brokers"]:
        raise ClusterError(f"broker {broker_id} is already part of {layout.dir}")
    if broker_id < 0:
        raise ClusterError(f"--id must not be negative, got {broker_id}")
    taken = {
        info.get(kind, 0)
        for info in state["brokers"].values()
        for kind in ("port", "metrics_port", "internal_port", "registry_port")
    }
    ports = [p for p in _broker_ports(6, None) if p not in taken]
    port, metrics_port, registry_port = ports[0], ports[1], ports[3]
    with open(layout.properties(ids[0])) as handle:
        template = handle.read().splitlines()
    own = {
        "broker.id": str(broker_id),
        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "metrics.listener": f"http://127.0.0.1:{metrics_port}",
        "log.dirs": layout.data(broker_id),
    }
    scheme = "https" if state.get("secure") else "http"
    own["schema.registry.listeners"] = f"{scheme}://127.0.0.1:{registry_port}"
    added: dict[str, int] = {"port": port, "metrics_port": metrics_port, "registry_port": registry_port}
    if state.get("secure"):
        # the same CA issues its certificate; SASL, ACL and super-user keys come with the template
        from strom.cli import secure_cluster

        made = secure_cluster.prepare(layout.dir, [broker_id])
        added["internal_port"] = ports[2]
        secured = secure_cluster.broker_overrides(made, broker_id, port, ports[2])
        own["listeners"] = secured["listeners"]
        own["ssl.keystore.location"] = secured["ssl.keystore.location"]
    lines = [
        f"{line.split('=', 1)[0].strip()}={own[line.split('=', 1)[0].strip()]}"
        if line.split("=", 1)[0].strip() in own
        else line
        for line in template
    ]
    lines = [line for line in lines if not line.strip().startswith("advertised.listeners")]
    lines += [f"{k}={v}" for k, v in own.items() if not any(line.startswith(f"{k}=") for line in lines)]
    _write(layout.properties(broker_id), "\n".join(lines) + "\n")
    state["brokers"][str(broker_id)] = added
    os.makedirs(layout.data(broker_id), exist_ok=True)
    port_file = os.path.join(layout.data(broker_id), "strom.port")
    if os.path.exists(port_file):
        os.unlink(port_file)
    process = _spawn(
        [sys.executable, "-m", "strom.cli.main", "server-start", layout.properties(broker_id)],
        layout.broker_log(broker_id),
        layout.broker_pid(broker_id),
    )
    deadline = time.monotonic() + START_TIMEOUT_S
    while not os.path.exists(port_file):
        if process.poll() is not None:
            raise ClusterError(
                f"broker {broker_id} exited with {process.returncode}; see {layout.broker_log(broker_id)}"
            )
        if time.monotonic() > deadline:
            _terminate(process.pid, "server-start")
            raise ClusterError(
                f"broker {broker_id} did not start within {START_TIMEOUT_S:.0f}s; see {layout.broker_log(broker_id)}"
            )
        time.sleep(0.05)
    _write(layout.state, json.dumps(state, indent=2) + "\n")
    print(
        f"started broker {broker_id} on 127.0.0.1:{port} (pid {process.pid}, config {layout.properties(broker_id)})",
        flush=True,
    )
    print(f"Bootstrap servers: {bootstrap(state)}", flush=True)
    registries = registry_urls(layout, state)
    if registries:
        print(f"Schema Registry: {','.join(registries)}", flush=True)
    return 0


# -- stop --------------------------------------------------------------------------------------------
def _terminate(pid: int, marker: str, timeout_s: float = STOP_TIMEOUT_S) -> bool:
    """SIGTERM, wait, SIGKILL; returns whether it had to kill."""
    if not is_running(pid, marker):
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not is_running(pid, marker):
            return False
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while is_running(pid, marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    return True


def stop(directory: str) -> int:
    layout = Layout(directory)
    state = layout.load()
    if state is None:
        raise ClusterError(f"{layout.dir} holds no cluster ({STATE_FILE} is missing)")
    # one at a time, highest id first: each hands its leaderships to brokers still running
    for key in sorted(state["brokers"], key=int, reverse=True):
        broker_id = int(key)
        pid = _read_pid(layout.broker_pid(broker_id))
        if not is_running(pid, "server-start"):
            print(f"broker {broker_id} is not running")
            continue
        killed = _terminate(pid, "server-start")
        print(f"stopped broker {broker_id} (pid {pid}{', killed after the timeout' if killed else ''})", flush=True)
    if state.get("zookeeper_managed"):
        pid = _read_pid(layout.zookeeper_pid)
        if is_running(pid, "QuorumPeerMain"):
            _terminate(pid, "QuorumPeerMain")
            print(f"stopped ZooKeeper (pid {pid})", flush=True)
    return 0


# -- status ------------------------------------------------------------------------------------------
def _zookeeper_view(connect: str) -> tuple[set[int] | None, int]:
    """(registered broker ids, controller id) from ZooKeeper; (None, -1) when it cannot be reached."""
    import logging

    logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    logging.getLogger("strom.zookeeper").setLevel(logging.CRITICAL)
    from strom.cluster import model
    from strom.cluster.store import NoNodeError, StoreError
    from strom.cluster.zk_store import ZkStore

    try:
        store = ZkStore(connect, session_timeout_ms=10000, connection_timeout_ms=3000)
    except StoreError:
        return None, -1
    try:
        try:
            registered = {int(c) for c in store.children(model.BROKERS_IDS)}
        except NoNodeError:
            registered = set()
        found = store.get_or_none(model.CONTROLLER)
        controller = json.loads(found[0])["brokerid"] if found else -1
        return registered, controller
    except StoreError:
        return None, -1
    finally:
        store.close()


def status(directory: str) -> int:
    layout = Layout(directory)
    state = layout.load()
    if state is None:
        raise ClusterError(f"{layout.dir} holds no cluster ({STATE_FILE} is missing)")
    all_up = True
    zookeeper = state["zookeeper"]
    if state.get("zookeeper_managed"):
        pid = _read_pid(layout.zookeeper_pid)
        up = is_running(pid, "QuorumPeerMain")
        all_up &= up
        print(f"ZooKeeper {zookeeper}: {'up' if up else 'down'}" + (f" (pid {pid})" if up else ""))
    else:
        print(f"ZooKeeper {zookeeper}: external")
    registered, controller = _zookeeper_view(zookeeper)
    if registered is None:
        print(f"ZooKeeper {zookeeper} cannot be reached: registrations and controller unknown")
    live = set()
    for key in sorted(state["brokers"], key=int):
        broker_id = int(key)
        port = state["brokers"][key]["port"]
        pid = _read_pid(layout.broker_pid(broker_id))
        running = is_running(pid, "server-start")
        serving = running and _accepts("127.0.0.1", port)
        if serving:
            live.add(broker_id)
        all_up &= serving and (registered is None or broker_id in registered)
        text = "up" if serving else ("starting" if running else "down")
        details = [f"127.0.0.1:{port}"]
        if running:
            details.append(f"pid {pid}")
        if registered is not None:
            details.append("registered" if broker_id in registered else "not registered")
        print(f"broker {broker_id}: {text} ({', '.join(details)})")
    print(f"controller: {('broker ' + str(controller)) if controller >= 0 else 'none'}")
    print(f"Bootstrap servers: {bootstrap(state, live)}")
    return 0 if all_up else 1
