"""A broker that cannot start says why in one line on stderr that names the setting, and exits 1.

Its logs go to stdout, so stderr holds that line alone; the traceback shows only with
--log-level DEBUG. The order of startup decides what a refusal leaves behind: the config and the
log dirs are checked before anything is made, then every log dir is created and locked (its
``.lock``, as Kafka's), then the listeners are bound, ZooKeeper or the embedded store opened and
only then anything else written. The tests check the data dir for exactly that.
"""

from __future__ import annotations

import errno
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from strom.cluster import zookeeper_server
from strom.startup import port_holder
from tests.broker_process import start_expecting_failure
from tests.small_disk import tmpfs
from tests.tls_certs import make_certificates

LOCK_ONLY = {".lock"}


def refused(result, key: str, code: int = 1) -> str:
    """The one line of stderr, which names ``key``; no traceback anywhere."""
    assert result.returncode == code, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("strom server-start: "), result.stderr
    assert key in result.stderr, result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    return result.stderr.strip()


@pytest.fixture
def shared_dir():
    """A directory every user may enter but only root may write (pytest's tmp_path is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="strom-startup-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def owned_by_nobody(path: Path) -> Path:
    path.mkdir()
    nobody = pwd.getpwnam("nobody")
    os.chown(path, nobody.pw_uid, nobody.pw_gid)
    return path


def test_a_port_in_use_names_listeners_the_port_and_the_process_holding_it(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = start_expecting_failure(tmp_path / "data", f"listeners=PLAINTEXT://127.0.0.1:{port}")
    line = refused(result, "listeners")
    assert line.startswith(
        "strom server-start: cannot start: listeners: "
        f"Socket server failed to bind to 127.0.0.1:{port}: Address already in use (held by pid {os.getpid()}: "
    ), line
    assert set(os.listdir(tmp_path / "data")) <= LOCK_ONLY  # the lock is taken before the ports are bound


def test_debug_shows_the_traceback_in_the_log_and_keeps_stderr_one_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = start_expecting_failure(
            tmp_path / "data", f"listeners=PLAINTEXT://127.0.0.1:{port}", args=("--log-level", "DEBUG")
        )
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "listeners: Socket server failed to bind" in result.stderr
    assert "Traceback" in result.stdout and "OSError: [Errno 98] Address already in use" in result.stdout


def test_a_port_not_permitted_says_what_binding_it_needs(shared_dir):
    data = owned_by_nobody(shared_dir / "data")
    result = start_expecting_failure(data, "listeners=PLAINTEXT://127.0.0.1:80", user="nobody")
    line = refused(result, "listeners")
    assert line.endswith(
        "Socket server failed to bind to 127.0.0.1:80: Permission denied "
        "(ports below 1024 need root or CAP_NET_BIND_SERVICE)"
    ), line
    assert set(os.listdir(data)) <= LOCK_ONLY


def test_an_address_not_on_this_host_is_named(tmp_path):
    # 192.0.2.1 is TEST-NET-1 (RFC 5737), on no machine: bind() fails at once, nothing is sent
    result = start_expecting_failure(tmp_path / "data", "listeners=PLAINTEXT://192.0.2.1:0")
    line = refused(result, "listeners")
    assert line.endswith(
        "Socket server failed to bind to 192.0.2.1:0: Cannot assign requested address (not an address of this host)"
    ), line
    assert set(os.listdir(tmp_path / "data")) <= LOCK_ONLY


def test_a_log_dir_under_a_file_cannot_be_created(tmp_path):
    (tmp_path / "file").write_text("")
    result = start_expecting_failure(tmp_path / "file" / "data")
    line = refused(result, "log.dirs")
    assert line.endswith(f"cannot create log dir {tmp_path}/file/data: {tmp_path}/file is not a directory"), line
    assert sorted(os.listdir(tmp_path)) == ["file"]


def test_a_log_dir_another_user_owns_is_refused_when_not_root(shared_dir):
    result = start_expecting_failure(shared_dir / "data", user="nobody")
    line = refused(result, "log.dirs")
    assert line.endswith(
        f"cannot create log dir {shared_dir}/data: {shared_dir} is not writable by user nobody (Permission denied)"
    ), line
    result = start_expecting_failure(shared_dir, user="nobody")
    line = refused(result, "log.dirs")
    assert line.endswith(f"log dir {shared_dir} is not writable by user nobody (Permission denied)"), line
    assert os.listdir(shared_dir) == []


def test_a_full_disk_at_start_is_refused_before_anything_is_written(tmp_path):
    with tmpfs(tmp_path / "disk", "1m") as disk:
        with open(disk / "filler", "wb") as filler:
            with pytest.raises(OSError) as full:
                while True:
                    filler.write(b"\0" * 65536)
                    filler.flush()
        assert full.value.errno == errno.ENOSPC
        result = start_expecting_failure(disk / "data")
        line = refused(result, "log.dirs")
        assert line.endswith(f"log dir {disk}/data: No space left on device ({disk} is full)"), line
        assert os.listdir(disk) == ["filler"]


def test_an_unreadable_key_names_its_key(shared_dir):
    certs = make_certificates(shared_dir / "certs")
    certs.broker.chmod(0o600)  # root's: nobody cannot read it
    data = owned_by_nobody(shared_dir / "data")
    result = start_expecting_failure(
        data, "listeners=SSL://127.0.0.1:0", f"ssl.keystore.location={certs.broker}", user="nobody"
    )
    line = refused(result, "ssl.keystore.location", code=2)
    assert line == f"strom server-start: invalid configuration: ssl.keystore.location: {certs.broker} is not readable"
    assert set(os.listdir(data)) <= LOCK_ONLY


def test_an_unreachable_zookeeper_is_named_after_its_timeout(tmp_path):
    port = zookeeper_server.free_port()  # nothing listens there
    result = start_expecting_failure(
        tmp_path / "data", f"zookeeper.connect=127.0.0.1:{port}", "zookeeper.connection.timeout.ms=1500"
    )
    line = refused(result, "zookeeper.connect")
    assert "within 1.5s (zookeeper.connection.timeout.ms)" in line
    assert set(os.listdir(tmp_path / "data")) <= LOCK_ONLY


@pytest.mark.parametrize(
    "damage",
    [b'{"/brokers": {"data": "', b"[1, 2]", b'{"/brokers": {"data": "", "version": "x"}}', b"\xff\xfe"],
    ids=["truncated", "not-an-object", "bad-version", "not-utf8"],
)
def test_a_damaged_embedded_store_is_named_and_left_as_found(tmp_path, damage):
    data = tmp_path / "data"
    data.mkdir()
    (data / "__cluster_metadata.json").write_bytes(damage)
    result = start_expecting_failure(data)
    line = refused(result, "log.dirs")
    assert f"the embedded metadata store {data}/__cluster_metadata.json is damaged (" in line
    assert line.endswith("restore it from a backup, or move it away to start with empty cluster metadata")
    assert (data / "__cluster_metadata.json").read_bytes() == damage
    assert set(os.listdir(data)) == {".lock", "__cluster_metadata.json"}


def test_port_holder_names_the_listening_process_or_nothing():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert (port_holder(port) or "").startswith(f"pid {os.getpid()}: ")
    assert port_holder(port) is None


# -- the commands that start brokers or servers: the same one line, naming their own option -------------
def strom(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "strom.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_cluster_start_on_a_base_port_in_use_names_it_and_starts_nothing(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = strom(
            "cluster", "start", "--brokers", "1", "--dir", str(tmp_path / "cluster"), "--base-port", str(port)
        )
    assert result.returncode == 1
    assert result.stderr.startswith(
        f"strom cluster start: --base-port {port}: port {port} is in use by pid {os.getpid()}: "
    ), result.stderr
    assert result.stderr.count("\n") == 1
    assert not (tmp_path / "cluster").exists()  # no ZooKeeper started, no config written


def test_cluster_start_says_why_its_broker_could_not_start(tmp_path):
    port = zookeeper_server.free_port()  # no ZooKeeper there
    result = strom(
        "cluster",
        "start",
        "--brokers",
        "1",
        "--dir",
        str(tmp_path / "cluster"),
        "--zookeeper",
        f"127.0.0.1:{port}",
        "--override",
        "zookeeper.connection.timeout.ms=1500",
    )
    assert result.returncode == 1
    assert result.stderr.startswith(
        f"strom cluster start: broker 1 did not start: cannot start: no ZooKeeper session with 127.0.0.1:{port} "
        "(zookeeper.connect) within 1.5s (zookeeper.connection.timeout.ms) (see "
    ), result.stderr
    assert result.stderr.count("\n") == 1
    assert set(os.listdir(tmp_path / "cluster" / "data" / "kafka-logs-1")) <= LOCK_ONLY


def test_console_on_a_port_in_use_names_the_option_and_the_holder_at_once(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = time.monotonic()
        # no broker at 127.0.0.1:1 either: the port is refused before the cluster's 5 s reachability check
        result = strom("console", "--bootstrap-server", "127.0.0.1:1", "--port", str(port))
        took = time.monotonic() - started
    assert result.returncode == 1
    assert result.stderr.startswith(
        f"strom console: cannot start: --port: Socket server failed to bind to 127.0.0.1:{port}: "
        f"Address already in use (held by pid {os.getpid()}: "
    ), result.stderr
    assert result.stderr.count("\n") == 1
    assert took < 4.5, took


def test_demo_says_why_its_broker_could_not_start(tmp_path):
    data = tmp_path / "demo" / "data"
    data.mkdir(parents=True)
    (data / "__cluster_metadata.json").write_bytes(b"[1]")
    result = strom("demo", "--dir", str(tmp_path / "demo"), "--duration", "5")
    assert result.returncode == 1
    assert result.stderr.startswith(
        "strom demo: the broker did not start: cannot start: log.dirs: the embedded metadata store "
        f"{data}/__cluster_metadata.json is damaged ("
    ), result.stderr
    assert result.stderr.count("\n") == 1
    assert (data / "__cluster_metadata.json").read_bytes() == b"[1]"
    assert set(os.listdir(data)) == {".lock", "__cluster_metadata.json"}


def test_demo_names_a_dir_it_cannot_create(tmp_path):
    (tmp_path / "file").write_text("")
    result = strom("demo", "--dir", str(tmp_path / "file" / "demo"))
    assert result.returncode == 1
    assert result.stderr == (
        f"strom demo: --dir {tmp_path}/file/demo: cannot create {tmp_path}/file/demo: Not a directory\n"
    )
