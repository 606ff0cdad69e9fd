"""KIP-226 on three brokers: the cluster default reaches every broker, and a TLS listener's
certificate is rotated with ``strom configs`` while a producer runs.

The rotation runs on ``strom cluster start --secure`` (SASL_SSL listeners CLIENT and INTERNAL, the
cluster's own CA): a new keystore is issued for one broker and put in service with
``listener.name.client.ssl.keystore.location``. A new TLS connection to that listener is then
served the new certificate (its serial), the INTERNAL listener keeps the old one, the idempotent
acks=all producer that was connected all along carries on, and every acknowledged record is read
back once, at its offset. The broker restarted afterwards serves the new certificate too: dynamic
configs are read at startup.
"""

from __future__ import annotations

import json
import socket
import ssl
import subprocess
import sys
import uuid
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic
from cryptography import x509
from kazoo.client import KazooClient

from strom.cli.secure_cluster import reissue_keystore
from strom.cluster import model
from strom.protocol.errors import ErrorCode
from tests.cluster.conftest import wait_until
from tests.cluster.test_cluster_cli import cleanup, pids, strom
from tests.cluster.test_secure_cluster_cli import start_secure_cluster
from tests.cluster.workload import Workload, verify

WAIT_S = 30


def configs(*args: str) -> subprocess.CompletedProcess[str]:
    return strom("configs", *args, timeout=60)


def described(admin: AdminClient, broker_id: int, key: str):
    [future] = admin.describe_configs([ConfigResource("broker", str(broker_id))], request_timeout=WAIT_S).values()
    return future.result(WAIT_S).get(key)


def test_the_cluster_default_reaches_every_broker(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    done = configs(
        "--bootstrap-server",
        cluster.bootstrap,
        "--entity-type",
        "brokers",
        "--entity-default",
        "--alter",
        "--add-config",
        "message.max.bytes=1000,log.cleaner.threads=2",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Completed updating default config for brokers in the cluster."

    def everywhere() -> bool:
        entries = [described(admin, b, "message.max.bytes") for b in cluster.brokers]
        return all((e.value, e.source) == ("1000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value) for e in entries)

    wait_until(everywhere, WAIT_S, "message.max.bytes=1000 from the cluster default on every broker")
    one = configs(
        "--bootstrap-server", cluster.bootstrap, "--broker", "1", "--alter", "--add-config", "message.max.bytes=3000"
    )
    assert one.returncode == 0, one.stderr
    wait_until(lambda: described(admin, 1, "message.max.bytes").value == "3000", WAIT_S, "broker 1's own value")
    assert described(admin, 0, "message.max.bytes").value == "1000"

    # what a producer notices: a 2,000-byte record fits broker 1 alone
    assignment = [[0], [1], [2]]
    for future in admin.create_topics(
        [NewTopic("sized", num_partitions=3, replica_assignment=assignment)], request_timeout=WAIT_S
    ).values():
        future.result(WAIT_S)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 0, "message.max.bytes": 100_000})
    outcome: dict[int, int] = {}
    for partition in range(3):
        producer.produce(
            "sized",
            value=b"x" * 2000,
            partition=partition,
            on_delivery=lambda err, msg: outcome.__setitem__(msg.partition(), err.code() if err else 0),
        )
    assert producer.flush(WAIT_S) == 0
    assert outcome == {0: ErrorCode.MESSAGE_TOO_LARGE, 1: 0, 2: ErrorCode.MESSAGE_TOO_LARGE}

    # a broker that starts again starts with them (read from /config/brokers before it serves)
    cluster.brokers[2].stop()
    cluster.brokers[2].start()
    wait_until(
        lambda: described(admin, 2, "log.cleaner.threads").value == "2", WAIT_S, "the default on the restarted broker"
    )
    shown = configs(
        "--bootstrap-server", cluster.bootstrap, "--entity-type", "brokers", "--entity-name", "1", "--describe"
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == [
        "Dynamic configs for broker 1 are:",
        "  message.max.bytes=3000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:message.max.bytes=3000, "
        "DYNAMIC_DEFAULT_BROKER_CONFIG:message.max.bytes=1000, DEFAULT_CONFIG:message.max.bytes=1048588}",
    ]


def serial_of(address: str, ca: str) -> int:
    """The serial of the certificate a new TLS connection to ``address`` is served (checked against the CA)."""
    host, port = address.rsplit(":", 1)
    context = ssl.create_default_context(cafile=ca)
    with socket.create_connection((host, int(port)), timeout=WAIT_S) as sock:
        with context.wrap_socket(sock, server_hostname=host) as tls:
            return x509.load_der_x509_certificate(tls.getpeercert(binary_form=True)).serial_number


def keystore_serial(path: Path) -> int:
    return x509.load_pem_x509_certificates(path.read_bytes())[0].serial_number


def test_rotating_a_tls_listeners_certificate_with_strom_configs(tmp_path, zookeeper):
    directory = tmp_path / "cluster"
    chroot = f"/rotate-{uuid.uuid4().hex[:8]}"
    zk = KazooClient(hosts=zookeeper + chroot, timeout=10)
    try:
        _, bootstrap, properties, java, secure = start_secure_cluster(directory, zookeeper + chroot)
        ca = java["ssl.truststore.location"]
        admin = AdminClient({"bootstrap.servers": bootstrap, **secure})
        for future in admin.create_topics(
            [NewTopic("rotated", 3, 3, config={"min.insync.replicas": "2"})], request_timeout=WAIT_S
        ).values():
            future.result(WAIT_S)
        workload = Workload(bootstrap, "rotated", 3, extra=secure).start()
        workload.wait_progress(range(3), 20, WAIT_S)

        victim = 2
        zk.start(timeout=30)
        endpoints = json.loads(zk.get(model.broker_path(victim))[0])["endpoints"]
        client, internal = (
            next(e.split("//")[1] for e in endpoints if e.startswith(f"{n}://")) for n in ("CLIENT", "INTERNAL")
        )
        old_serial = serial_of(client, ca)
        assert serial_of(internal, ca) == old_serial  # one keystore for both listeners, from server.properties

        rotated = directory / "secrets" / f"broker-{victim}-rotated.pem"
        reissue_keystore(str(directory / "secrets"), victim, str(rotated))
        new_serial = keystore_serial(rotated)
        assert new_serial != old_serial
        key = "listener.name.client.ssl.keystore.location"
        done = configs(
            "--bootstrap-server",
            bootstrap,
            "--command-config",
            properties,
            "--entity-type",
            "brokers",
            "--entity-name",
            str(victim),
            "--alter",
            "--add-config",
            f"{key}={rotated}",
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == f"Completed updating config for broker {victim}."
        assert serial_of(client, ca) == new_serial  # a new connection: the new certificate
        assert serial_of(internal, ca) == old_serial  # the other listener keeps its own

        workload.wait_progress(range(3), 20, WAIT_S)  # the producer connected before carries on
        missing = configs(  # a keystore that does not load is refused, naming the key, and changes nothing
            "--bootstrap-server",
            bootstrap,
            "--command-config",
            properties,
            "--broker",
            str(victim),
            "--alter",
            "--add-config",
            f"{key}={directory / 'missing.pem'}",
        )
        assert missing.returncode == 1 and key in missing.stderr and "does not exist" in missing.stderr, missing.stderr
        assert serial_of(client, ca) == new_serial

        # a secret: --secure clusters have a password.encoder.secret, so it is stored encoded
        jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="x" password="s3cr3t";'
        secret = configs(
            "--bootstrap-server",
            bootstrap,
            "--command-config",
            properties,
            "--broker",
            str(victim),
            "--alter",
            "--add-config",
            f"sasl.jaas.config=[{jaas}]",  # brackets keep its = signs in the value, as kafka-configs.sh
        )
        assert secret.returncode == 0, secret.stderr
        assert b"s3cr3t" not in zk.get(model.broker_config_path(str(victim)))[0]
        shown = configs(
            "--bootstrap-server", bootstrap, "--command-config", properties, "--broker", str(victim), "--describe"
        )
        assert shown.returncode == 0, shown.stderr
        assert f"  {key}={rotated} sensitive=false synonyms={{DYNAMIC_BROKER_CONFIG:{key}={rotated}}}" in shown.stdout
        assert "  sasl.jaas.config=null sensitive=true synonyms={DYNAMIC_BROKER_CONFIG:sasl.jaas.config=null}" in (
            shown.stdout
        )

        # the broker started again serves the rotated certificate (its dynamic configs are read at startup)
        restart(directory, victim, client)
        wait_until(lambda: serial_of(client, ca) == new_serial, WAIT_S, "the rotated certificate after a restart")
        workload.wait_progress(range(3), 20, WAIT_S)
        workload.stop()
        verify(bootstrap, workload, extra=secure)  # every acknowledged record, once, at its offset
        assert not workload.failed, workload.failed[:5]
        stopped = strom("cluster", "stop", "--dir", str(directory))
        assert stopped.returncode == 0, stopped.stderr
    finally:
        zk.stop()
        zk.close()
        cleanup(directory)


def _refused(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
    except OSError:
        return True
    return False


def restart(directory: Path, broker_id: int, address: str) -> None:
    """Stop a ``strom cluster`` broker (SIGTERM) and start it as a supervisor would; back once ``address`` accepts."""
    subprocess.run(["kill", str(pids(directory)[f"server-{broker_id}"])], check=True, timeout=10)
    wait_until(lambda: _refused(address), WAIT_S, f"broker {broker_id} stopped")
    config = directory / "config" / f"server-{broker_id}.properties"
    with open(directory / "logs" / f"server-{broker_id}.log", "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "strom.cli.main", "server-start", str(config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    (directory / "pids" / f"server-{broker_id}.pid").write_text(f"{process.pid}\n")
    wait_until(lambda: not _refused(address), WAIT_S, f"broker {broker_id} serving again")


def test_a_new_ca_for_the_inter_broker_listener_without_a_restart_of_the_others(tmp_path, zookeeper):
    """CA rotation on the INTERNAL listener: every broker is told to trust the old and the new CA
    (listener.name.internal.ssl.truststore.location, which also rebuilds its client side towards the
    other brokers), then broker 2 serves a certificate of the new CA. Once it restarts, brokers 1
    and 3 connect to it again: acks=all with min.insync.replicas=3 on a partition it leads succeeds
    only if they trust the new CA without having been restarted."""
    from strom.cli.secure_cluster import _make_ca

    directory = tmp_path / "cluster"
    chroot = f"/ca-{uuid.uuid4().hex[:8]}"
    zk = KazooClient(hosts=zookeeper + chroot, timeout=10)
    try:
        _, bootstrap, properties, java, secure = start_secure_cluster(directory, zookeeper + chroot)
        zk.start(timeout=30)
        new_ca = tmp_path / "new-ca"
        new_ca.mkdir()
        _make_ca(str(new_ca))
        bundle = tmp_path / "both-cas.pem"
        bundle.write_bytes(Path(java["ssl.truststore.location"]).read_bytes() + (new_ca / "ca.pem").read_bytes())
        for broker_id in (1, 2, 3):
            trusted = configs(
                "--bootstrap-server",
                bootstrap,
                "--command-config",
                properties,
                "--broker",
                str(broker_id),
                "--alter",
                "--add-config",
                f"listener.name.internal.ssl.truststore.location={bundle}",
            )
            assert trusted.returncode == 0, trusted.stderr
        keystore = tmp_path / "broker-2-new-ca.pem"
        reissue_keystore(str(new_ca), 2, str(keystore))
        served = configs(
            "--bootstrap-server",
            bootstrap,
            "--command-config",
            properties,
            "--broker",
            "2",
            "--alter",
            "--add-config",
            f"listener.name.internal.ssl.keystore.location={keystore}",
        )
        assert served.returncode == 0, served.stderr
        endpoints = json.loads(zk.get(model.broker_path(2))[0])["endpoints"]
        internal = next(e.split("//")[1] for e in endpoints if e.startswith("INTERNAL://"))
        assert serial_of(internal, str(bundle)) == keystore_serial(keystore)

        restart(directory, 2, internal)
        wait_until(lambda: zk.exists(model.broker_path(2)), WAIT_S, "broker 2 registered again")
        admin = AdminClient({"bootstrap.servers": bootstrap, **secure})
        topic = NewTopic(
            "led-by-2", num_partitions=1, replica_assignment=[[2, 1, 3]], config={"min.insync.replicas": "3"}
        )
        for future in admin.create_topics([topic], request_timeout=WAIT_S).values():
            future.result(WAIT_S)
        producer = Producer({"bootstrap.servers": bootstrap, **secure, "acks": "all", "message.timeout.ms": 20000})
        outcome: list = []
        for i in range(20):
            producer.produce("led-by-2", value=b"%d" % i, on_delivery=lambda err, msg: outcome.append(err))
        assert producer.flush(WAIT_S) == 0
        failed = [str(e) for e in outcome if e is not None]  # (no == on KafkaError against None)
        assert len(outcome) == 20 and not failed, failed[:3]
        stopped = strom("cluster", "stop", "--dir", str(directory))
        assert stopped.returncode == 0, stopped.stderr
    finally:
        zk.stop()
        zk.close()
        cleanup(directory)
