"""pytest plugin: aiokafka's own test suite against a strom broker instead of its docker image.

Loaded by ``scripts/client_suites.py`` (``-p strom_aiokafka_plugin``), which starts the broker with
the listeners aiokafka's image has and passes their ports in ``STROM_AIOKAFKA_PORTS``
(PLAINTEXT,SSL,SASL_PLAINTEXT,SASL_SSL) and the certificates in ``STROM_AIOKAFKA_SSL_DIR``.

aiokafka's conftest defines the docker fixtures in the tests' own directory, where a plugin's
fixture of the same name cannot override them; the ``pytest_fixture_setup`` hook answers them
instead. The image's ``kafka-acls.sh`` and ``kafka-configs.sh`` (which the suite runs with
``docker exec``) become ``strom acls`` and ``strom configs``: their options are Kafka's.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ADMIN_CONFIG = "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=admin\nsasl.password=admin\n"
# what aiokafka's tests pass as the client key's password (their gen-ssl-certs.sh uses it)
KEY_PASSWORD = b"abcdefgh"


def make_ssl_folder(directory: Path) -> Path:
    """ca.crt, client.crt and client.key (encrypted, as the suite expects), and the broker's PEM keystore."""
    import trustme
    from cryptography.hazmat.primitives import serialization

    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA(organization_name="aiokafka-suite")
    ca.cert_pem.write_to_path(str(directory / "ca.crt"))
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(str(directory / "broker.pem"))
    client = ca.issue_cert("client@aiokafka.example", common_name="client")
    client.cert_chain_pems[0].write_to_path(str(directory / "client.crt"))
    key = serialization.load_pem_private_key(client.private_key_pem.bytes(), password=None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(KEY_PASSWORD),
    )
    (directory / "client.key").write_bytes(encrypted)
    return directory


def _ports() -> list[int]:
    return [int(p) for p in os.environ["STROM_AIOKAFKA_PORTS"].split(",")]


class StromContainer:
    """What the suite asks of its Kafka container: ``exec_run`` of Kafka's admin scripts."""

    def __init__(self, sasl_port: int, config_dir: Path):
        self.bootstrap = f"127.0.0.1:{sasl_port}"
        config_dir.mkdir(parents=True, exist_ok=True)
        self.admin_config = config_dir / "admin.properties"
        self.admin_config.write_text(ADMIN_CONFIG)

    def exec_run(self, cmd: str | list[str], **_: Any) -> tuple[int, bytes]:
        args = shlex.split(cmd) if isinstance(cmd, str) else list(cmd)
        tool = Path(args[0]).name
        rest = _drop_zookeeper(args[1:])
        if tool == "kafka-acls.sh":
            command = ["acls", *rest]
        elif tool == "kafka-configs.sh":
            command = ["configs", *rest]
        else:
            return 127, f"{tool}: not part of strom (the suite's docker image has it)".encode()
        full = [
            os.environ.get("STROM_PYTHON", sys.executable),
            "-m",
            "strom.cli.main",
            *command,
            "--bootstrap-server",
            self.bootstrap,
            "--command-config",
            str(self.admin_config),
        ]
        done = subprocess.run(full, capture_output=True, timeout=60, check=False)
        return done.returncode, done.stdout + done.stderr


def _drop_zookeeper(args: list[str]) -> list[str]:
    """strom's tools talk to the broker: ZooKeeper connection options have no meaning for them."""
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg in ("--authorizer-properties", "--zookeeper"):
            skip = True
            continue
        out.append(arg)
    return out


@dataclass
class StromKafkaServer:
    host: str
    port: int
    ssl_port: int
    sasl_plain_port: int
    sasl_ssl_port: int
    container: StromContainer

    @property
    def hosts(self) -> list[str]:
        return [f"{self.host}:{self.port}"]


def _kafka_server(request: pytest.FixtureRequest, fixturedef: Any) -> StromKafkaServer:
    plain, ssl, sasl_plain, sasl_ssl = _ports()
    container = StromContainer(sasl_plain, Path(os.environ["STROM_AIOKAFKA_SSL_DIR"]) / "tools")
    return StromKafkaServer("127.0.0.1", plain, ssl, sasl_plain, sasl_ssl, container)


def _kerberos_utils(request: pytest.FixtureRequest, fixturedef: Any) -> Any:
    """The suite's own helper, without the keytab it would make for the image's KDC: strom serves no
    GSSAPI, so the Kerberos tests fail at kinit."""
    kerberos_utils = fixturedef.func.__globals__["KerberosUtils"]
    return kerberos_utils(request.getfixturevalue("kafka_server").container)


class NoDocker:
    """The docker client the suite would use: nothing asks it anything once the fixtures below are answered
    (and ``pytest_fixture_setup`` must return something other than None to answer)."""


REPLACED = {
    "docker": lambda request, fixturedef: NoDocker(),
    "kafka_image": lambda request, fixturedef: request.config.getoption("--docker-image"),
    "ssl_folder": lambda request, fixturedef: Path(os.environ["STROM_AIOKAFKA_SSL_DIR"]),
    "kafka_server": _kafka_server,
    "kerberos_utils": _kerberos_utils,
}


@pytest.hookimpl(tryfirst=True)
def pytest_fixture_setup(fixturedef: Any, request: pytest.FixtureRequest) -> object | None:
    make = REPLACED.get(fixturedef.argname)
    if make is None:
        return None
    result = make(request, fixturedef)
    fixturedef.cached_result = (result, fixturedef.cache_key(request), None)
    return result


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep the tests that need a broker; the unit tests say nothing about strom."""
    keep = [item for item in items if "kafka_server" in getattr(item, "fixturenames", ())]
    dropped = [item for item in items if item not in keep]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep
