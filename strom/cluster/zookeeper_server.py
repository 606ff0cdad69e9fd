"""Starting a real ZooKeeper server from Debian's package, for `strom cluster` and the tests.

Debian's zkServer.sh assumes the /etc and /var/log layout of a system service, so the server is
started directly with a generated zoo.cfg (loopback only, no admin server).

``start`` makes a server that dies with the process that started it (a test session, a
strom.testing.Cluster), even when that process is killed with SIGKILL and runs no cleanup: the
child asks the kernel for SIGTERM when its parent dies (``prctl(PR_SET_PDEATHSIG)``, kept
across the exec of java, on which the JVM shuts down). Java cannot watch its parent's pid as a
broker does (strom.server.parent_watch), so the kernel has to. The kernel sends it when the
*thread* that forked the child ends, so every server is forked from one thread that lives as
long as the process (``_spawner``), never from the caller's thread, which may be short-lived.
``strom cluster start`` starts its ZooKeeper as a daemon instead, by its own means.
"""

from __future__ import annotations

import ctypes
import os
import random
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

JARS = [
    "zookeeper.jar",
    "zookeeper-jute.jar",
    "slf4j-api.jar",
    "netty-all.jar",
    "metrics-core.jar",
    "snappy-java.jar",
    "commons-cli.jar",
    "log4j-1.2.jar",
]
JAVA_DIR = "/usr/share/java"
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"


# Fixed ports are picked from here up to the start of the kernel's ephemeral range.
FIXED_PORTS_FROM = 20000
_handed_out: set[int] = set()


def port_free(port: int) -> bool:
    """Whether a server could bind ``port`` on 127.0.0.1 now (with SO_REUSEADDR, as the servers bind)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is no obstacle
        try:
            sock.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def ephemeral_port_range() -> tuple[int, int]:
    """The ports the kernel hands out as connections' source ports and to binds on port 0."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as handle:
            low, high = handle.read().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def free_port() -> int:
    """A free port for a server whose address is written down before it starts and must survive
    its restarts (a broker registered in ZooKeeper, a ZooKeeper named in zookeeper.connect).

    It is picked below the kernel's ephemeral range. A port from a bind on port 0 is in that range,
    so any outgoing connection may take it as its source port in the gap before the server binds
    it, or while the server is down: a CI run once failed on "Address already in use" that way.
    Ports below the range are only ever taken by an explicit bind.
    """
    low, _ = ephemeral_port_range()
    if low - FIXED_PORTS_FROM < 1000:  # an unusual range: settle for the kernel's pick
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return sock.getsockname()[1]
    for _ in range(500):
        port = random.randrange(FIXED_PORTS_FROM, low)
        if port not in _handed_out and port_free(port):
            _handed_out.add(port)
            return port
    raise RuntimeError(f"no free port on 127.0.0.1 between {FIXED_PORTS_FROM} and {low}")


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_spawner: ThreadPoolExecutor | None = None
_spawner_made = threading.Lock()


def _die_with_parent(parent: int) -> Callable[[], None]:
    """The child's preexec_fn: SIGTERM when the parent dies; exit at once if it already has.

    Everything it calls is resolved before the fork (between fork and exec only async-signal-safe
    work is safe in a process that has threads)."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    getppid, exit_now, sigterm = os.getppid, os._exit, int(signal.SIGTERM)

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, sigterm, 0, 0, 0)
        if getppid() != parent:  # died between the fork and the prctl: nobody would signal us
            exit_now(1)

    return preexec


def popen_dying_with_this_process(command: list[str], **kwargs) -> subprocess.Popen:
    """``subprocess.Popen`` of a child that gets SIGTERM when this process ends, however it ends."""
    global _spawner
    with _spawner_made:
        if _spawner is None:  # one worker thread, idle between starts, alive until the process ends
            _spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="strom-spawner")
    preexec = _die_with_parent(os.getpid())

    def popen() -> subprocess.Popen:
        return subprocess.Popen(command, preexec_fn=preexec, **kwargs)

    return _spawner.submit(popen).result()


def write_config(directory: str, port: int, host: str = "127.0.0.1") -> str:
    data_dir = os.path.join(directory, "data")
    os.makedirs(data_dir, exist_ok=True)
    path = os.path.join(directory, "zoo.cfg")
    with open(path, "w") as handle:
        handle.write(
            f"dataDir={data_dir}\nclientPort={port}\nclientPortAddress={host}\ntickTime=500\n"
            "initLimit=10\nsyncLimit=5\nmaxSessionTimeout=60000\nminSessionTimeout=1000\n"
            "admin.enableServer=false\n4lw.commands.whitelist=ruok,srvr\n"
        )
    return path


def start(
    directory: str,
    port: int = 0,
    timeout_s: float = 30.0,
    host: str = "127.0.0.1",
    prefix: Sequence[str] = (),
) -> tuple[subprocess.Popen, int]:
    """Start a server in ``directory``; returns (process, port) once it accepts connections.

    ``host`` is the address it listens on; ``prefix`` goes before the java command line, for a
    server started inside a network namespace (``ip netns exec NS``, which execs java in place,
    so the process and its parent-death signal are java's)."""
    missing = [jar for jar in JARS if not os.path.exists(os.path.join(JAVA_DIR, jar))]
    if missing:
        raise RuntimeError(f"ZooKeeper jars missing ({', '.join(missing)}): apt-get install zookeeper")
    port = port or free_port()
    config = write_config(directory, port, host)
    classpath = ":".join(os.path.join(JAVA_DIR, jar) for jar in JARS)
    log = open(os.path.join(directory, "zookeeper.log"), "ab")
    try:
        process = popen_dying_with_this_process(
            [*prefix, "java", "-Xmx256m", "-cp", classpath, MAIN_CLASS, config],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    finally:
        log.close()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"ZooKeeper exited with {process.returncode}; see {directory}/zookeeper.log")
        try:
            with socket.create_connection((host, port), timeout=1) as sock:
                sock.sendall(b"ruok")
                if sock.recv(4) == b"imok":
                    return process, port
        except OSError:
            pass
        time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"ZooKeeper did not start within {timeout_s}s")


def stop(process: subprocess.Popen, timeout_s: float = 10.0) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout_s)
