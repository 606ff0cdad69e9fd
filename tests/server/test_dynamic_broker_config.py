"""KIP-226 dynamic broker configs on one broker, through real clients.

Kafka 3.9's whole list of broker keys is walked with confluent-kafka's incremental_alter_configs
on the broker (validate_only, so the broker keeps running as it was) and with raw requests on the
cluster default (librdkafka cannot name the resource ""): each key is accepted or refused exactly
as Kafka's update mode says. Then keys are set for real and what a user notices is checked: a
producer's record refused by a lowered message.max.bytes, a third connection refused by
max.connections.per.ip, a topic's retention.ms following the cluster default, secrets stored
encoded and described as null.
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
import time
from pathlib import Path

import pytest
import trustme
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from cryptography import x509

from strom.bench.connections import api_versions_frame
from strom.cluster.zookeeper_server import free_port
from strom.protocol.api import ApiKey
from strom.protocol.errors import ErrorCode
from strom.server.dynamic_config_keys import (
    CLUSTER_WIDE,
    DYNAMIC_TYPES,
    KNOWN_KEYS,
    LISTENER_ONLY_KEYS,
    PER_BROKER,
    QUOTA_KEYS,
    READ_ONLY,
    update_mode,
)
from tests.broker_process import BrokerProcess
from tests.processes import alive, children_by_parent
from tests.server.test_admin_apis import create_topic, raw

WAIT_S = 15
SECRET = "dynamic-config-secret"
SAMPLES = {"int": "1", "long": "1", "short": "1", "double": "0.5", "boolean": "true", "list": "a", "string": "x"}
SAMPLES |= {"class": "org.example.Plugin", "password": "p4ss"}


@pytest.fixture
def broker(tmp_path):
    with BrokerProcess(tmp_path / "data", {"password.encoder.secret": SECRET}) as process:
        yield process


@pytest.fixture
def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def alter(admin, name: str, values: dict[str, str | None], validate_only: bool = False):
    """IncrementalAlterConfigs on broker ``name``: None if accepted, else the KafkaError."""
    entries = [
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET if v is not None else AlterConfigOpType.DELETE)
        for k, v in values.items()
    ]
    resource = ConfigResource("broker", name, incremental_configs=entries)
    [future] = admin.incremental_alter_configs([resource], validate_only=validate_only).values()
    try:
        future.result(WAIT_S)
    except KafkaException as exc:
        return exc.args[0]
    return None


def alter_default(broker, values: dict[str, str | None], validate_only: bool = False) -> tuple[int, str | None]:
    """IncrementalAlterConfigs on the cluster default (resource name "") as a raw request."""
    configs = [{"name": k, "config_operation": 0 if v is not None else 1, "value": v} for k, v in values.items()]
    body = {
        "resources": [{"resource_type": 4, "resource_name": "", "configs": configs}],
        "validate_only": validate_only,
    }
    [result] = raw(broker, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body).responses
    return result.error_code, result.error_message


def describe(admin, name: str = "0") -> dict:
    [future] = admin.describe_configs([ConfigResource("broker", name)], request_timeout=WAIT_S).values()
    return future.result(WAIT_S)


def sample(key: str, described: dict) -> str:
    """A value the key takes: the broker's own where it has one, else one of the key's type."""
    entry = described.get(key)
    if entry is not None and entry.value is not None:
        return entry.value
    return SAMPLES.get(DYNAMIC_TYPES.get(key, "string"), "x")


def test_the_table_is_kafka_3_9s():
    """Spot checks against Kafka 3.9's broker config reference, so the walk below walks Kafka's list."""
    assert (len(READ_ONLY), len(PER_BROKER), len(CLUSTER_WIDE)) == (225, 37, 52)
    assert update_mode("sasl.kerberos.min.time.before.relogin") == "per-broker"
    assert update_mode("log.cleaner.threads") == update_mode("log.retention.ms") == "cluster-wide"
    assert update_mode("broker.id") == update_mode("log.dirs") == update_mode("zookeeper.connect") == "read-only"
    assert update_mode("listener.name.client.ssl.keystore.location") == "per-broker"
    assert update_mode("listener.name.client.max.connections") == "cluster-wide"
    assert update_mode("my.plugin.setting") is None


def test_every_kafka_key_is_accepted_or_refused_as_kafka_does(broker, admin):
    described = describe(admin)
    on_broker, on_default = {}, {}
    for key in sorted(KNOWN_KEYS | QUOTA_KEYS):
        value = sample(key, described)
        found = alter(admin, "0", {key: value}, validate_only=True)
        on_broker[key] = None if found is None else (found.code(), found.str())
        on_default[key] = alter_default(broker, {key: value}, validate_only=True)
    for key in sorted(KNOWN_KEYS | QUOTA_KEYS):
        if key in READ_ONLY:
            message = f"Cannot update these configs dynamically: Set({key})"
            assert on_broker[key] is not None and on_broker[key][0] == ErrorCode.INVALID_REQUEST, key
            assert message in on_broker[key][1] and message in on_default[key][1], key
            assert on_default[key][0] == ErrorCode.INVALID_REQUEST, key
        elif key in LISTENER_ONLY_KEYS:
            message = f"can be dynamically updated only per-listener using the listener prefix: Set({key})"
            assert on_broker[key] is not None and message in on_broker[key][1], key
            assert on_default[key][0] == ErrorCode.INVALID_REQUEST and message in on_default[key][1], key
        elif key in PER_BROKER:
            assert on_broker[key] is None, (key, on_broker[key])
            message = f"Cannot update these configs at default cluster level, broker id must be specified: Set({key})"
            assert on_default[key][0] == ErrorCode.INVALID_REQUEST and message in on_default[key][1], key
        else:  # cluster-wide and the replication quotas: on a broker and as the default
            assert on_broker[key] is None, (key, on_broker[key])
            assert on_default[key] == (ErrorCode.NONE, None), (key, on_default[key])
    # every answer came with the resource named as Kafka names it
    refused = next(found for found in on_broker.values() if found is not None)
    assert "Invalid config value for resource ConfigResource(type=BROKER, name='0'): " in refused[1]
    assert all(entry.source != ConfigSource.DYNAMIC_BROKER_CONFIG.value for entry in describe(admin).values())


def test_a_per_broker_sasl_setting_as_in_the_client_test(broker, admin):
    """The admin test from the issue: sasl.kerberos.min.time.before.relogin on one broker."""
    key = "sasl.kerberos.min.time.before.relogin"
    assert alter(admin, "0", {key: "120000"}) is None
    entry = describe(admin)[key]
    assert (entry.value, entry.source, entry.is_read_only) == (
        "120000",
        ConfigSource.DYNAMIC_BROKER_CONFIG.value,
        False,
    )
    bad = alter(admin, "0", {key: "soon"})
    assert bad.code() == ErrorCode.INVALID_REQUEST
    assert f"Invalid value soon for configuration {key}: Not a number of type LONG" in bad.str()
    code, message = alter_default(broker, {key: "1000"})
    assert code == ErrorCode.INVALID_REQUEST and "broker id must be specified" in message
    body = {
        "resources": [{"resource_type": 4, "resource_name": "0", "configuration_keys": [key]}],
        "include_synonyms": True,
        "include_documentation": False,
    }
    [result] = raw(broker, ApiKey.DESCRIBE_CONFIGS, 4, body).results  # every synonym (librdkafka keeps one a name)
    [described] = result.configs
    assert [(s.value, s.source) for s in described.synonyms] == [("120000", 2), ("60000", 5)]
    assert (described.read_only, described.config_type) == (False, 5)  # LONG
    assert alter(admin, "0", {key: None}) is None
    entry = describe(admin)[key]  # listed with Kafka's default, as Kafka lists it
    assert (entry.value, entry.source) == ("60000", ConfigSource.DEFAULT_CONFIG.value)
    body = {"resources": [{"resource_type": 4, "resource_name": "1", "configs": []}], "validate_only": False}
    [other] = raw(broker, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body).responses  # another broker's id, sent here
    assert (other.error_code, other.error_message) == (
        ErrorCode.INVALID_REQUEST,
        "unexpected broker id, expected 0 or empty string, but received 1",
    )


def accepted_connections(broker, count: int) -> list[bool]:
    """Open ``count`` connections at once; which of them an ApiVersions request is answered on."""
    host, port = broker.bootstrap.rsplit(":", 1)
    sockets = [socket.create_connection((host, int(port)), timeout=WAIT_S) for _ in range(count)]
    try:
        answered = []
        for i, sock in enumerate(sockets):
            try:
                sock.sendall(api_versions_frame(i))
                answered.append(bool(sock.recv(4)))
            except OSError:  # reset: refused
                answered.append(False)
        return answered
    finally:
        for sock in sockets:
            sock.close()


def test_limits_and_topic_defaults_apply_without_a_restart(broker, admin):
    assert accepted_connections(broker, 3) == [True, True, True]
    code, _ = alter_default(broker, {"max.connections.per.ip": "2"})
    assert code == ErrorCode.NONE
    # librdkafka's own connection counts too: wait for the admin client's to be the only other one
    deadline = time.monotonic() + WAIT_S
    while accepted_connections(broker, 3).count(True) != 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert accepted_connections(broker, 3).count(True) <= 2
    assert alter_default(broker, {"max.connections.per.ip": None})[0] == ErrorCode.NONE
    assert accepted_connections(broker, 3) == [True, True, True]

    create_topic(broker, "defaults")
    assert alter(admin, "0", {"message.max.bytes": "1000"}) is None
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "message.max.bytes": 100_000})
    errors = []
    producer.produce("defaults", value=b"x" * 5000, on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(WAIT_S) == 0
    assert errors and errors[0] is not None and errors[0].code() == ErrorCode.MESSAGE_TOO_LARGE
    assert alter(admin, "0", {"message.max.bytes": None}) is None
    errors.clear()
    producer.produce("defaults", value=b"x" * 5000, on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(WAIT_S) == 0 and [e is None for e in errors] == [True]

    assert alter_default(broker, {"log.retention.ms": "3600000"})[0] == ErrorCode.NONE
    [future] = admin.describe_configs([ConfigResource("topic", "defaults")], request_timeout=WAIT_S).values()
    retention = future.result(WAIT_S)["retention.ms"]
    assert (retention.value, retention.source) == ("3600000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    assert [s.source for s in retention.synonyms.values()][:1] == [ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value]


def test_synonyms_in_kafkas_order_with_kafka_python(broker):
    """kafka-python (which, like librdkafka, cannot name the default entity) on the broker, raw requests on ""."""
    from kafka.admin import ConfigResource as KPConfigResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    assert alter_default(broker, {"log.cleaner.threads": "2"}) == (ErrorCode.NONE, None)
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=WAIT_S * 1000)
    try:
        result = client.alter_configs(
            [KPConfigResource(ConfigResourceType.BROKER, "0", {"log.cleaner.threads": "3"})], incremental=True
        )
        assert result["broker"]["0"] == "OK", result
        found = client.describe_configs(
            [KPConfigResource(ConfigResourceType.BROKER, "0", ["log.cleaner.threads"])],
            include_synonyms=True,
            config_filter="all",
        )
        entry = found["broker"]["0"]["log.cleaner.threads"]
        assert (entry["value"], entry["config_source"], entry["read_only"]) == ("3", "DYNAMIC_BROKER_CONFIG", False)
        assert [(s["value"], s["source"]) for s in entry["synonyms"]] == [
            ("3", "DYNAMIC_BROKER_CONFIG"),
            ("2", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
            ("1", "DEFAULT_CONFIG"),
        ]
    finally:
        client.close()
    body = {
        "resources": [{"resource_type": 4, "resource_name": "", "configuration_keys": None}],
        "include_synonyms": True,
        "include_documentation": False,
    }
    [resource] = raw(broker, ApiKey.DESCRIBE_CONFIGS, 4, body).results
    assert [(c.name, c.value, c.config_source, [s.source for s in c.synonyms]) for c in resource.configs] == [
        ("log.cleaner.threads", "2", 3, [3])  # the default's synonyms leave out DYNAMIC_BROKER_CONFIG, as Kafka's
    ]


def test_secrets_are_stored_encoded_and_described_as_null(broker, admin, tmp_path):
    key = "listener.name.plaintext.plain.sasl.jaas.config"
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'
    assert alter(admin, "0", {key: jaas}) is None
    entry = describe(admin)[key]
    assert (entry.value, entry.is_sensitive, entry.source) == (None, True, ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    nodes = json.loads((broker.data_dir / "__cluster_metadata.json").read_text())  # the embedded store's file
    stored = json.loads(base64.b64decode(nodes["/config/brokers/0"]["data"]))["config"][key]
    assert "alice-secret" not in stored and "encryptedPassword:" in stored
    code, message = alter_default(broker, {"sasl.jaas.config": jaas})
    assert code == ErrorCode.INVALID_REQUEST and "broker id must be specified" in message


def test_a_secret_needs_password_encoder_secret(tmp_path):
    with BrokerProcess(tmp_path / "data") as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        refused = alter(admin, "0", {"listener.name.plaintext.ssl.key.password": "k3y"})
        assert refused.code() == ErrorCode.INVALID_REQUEST
        assert refused.str().endswith("Password encoder secret not configured")
        assert alter(admin, "0", {"log.cleaner.backoff.ms": "1000"}) is None  # anything else is fine


def test_a_keystore_renewed_in_place_is_read_again(tmp_path):
    """Setting a listener's keystore location again, to the same path, reads the file again (as Kafka's
    reloadUpdatedFilesWithoutConfigChange): a certificate renewed in place goes into service."""
    ca = trustme.CA()
    keystore = tmp_path / "keystore.pem"

    def issue(name: str = "broker-0") -> int:
        cert = ca.issue_cert("127.0.0.1", common_name=name, organization_unit_name="brokers")
        cert.private_key_and_cert_chain_pem.write_to_path(str(keystore))
        return x509.load_pem_x509_certificate(cert.cert_chain_pems[0].bytes()).serial_number

    def served() -> int:
        context = ssl.create_default_context()
        ca.configure_trust(context)
        with socket.create_connection(("127.0.0.1", tls_port), timeout=WAIT_S) as sock:
            with context.wrap_socket(sock, server_hostname="127.0.0.1") as tls:
                return x509.load_der_x509_certificate(tls.getpeercert(binary_form=True)).serial_number

    first = issue()
    plain_port, tls_port = free_port(), free_port()
    overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain_port},SSL://127.0.0.1:{tls_port}",
        "ssl.keystore.location": str(keystore),
    }
    with BrokerProcess(tmp_path / "data", overrides) as broker:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{plain_port}"})
        key = "listener.name.ssl.ssl.keystore.location"
        assert served() == first
        assert alter(admin, "0", {key: str(keystore)}) is None
        assert served() == first
        second = issue()  # renewed in place: nothing reads it yet
        assert served() == first
        assert alter(admin, "0", {key: str(keystore)}) is None
        assert served() == second
        issue("another-broker")  # Kafka keeps the subject and alternative names of the certificate in service
        refused = alter(admin, "0", {key: str(keystore)})
        assert refused.code() == ErrorCode.INVALID_REQUEST and key in refused.str(), refused
        assert "Keystore DistinguishedName or SubjectAltNames do not match" in refused.str()
        assert served() == second
        keystore.write_text("not a key")
        refused = alter(admin, "0", {key: str(keystore)})
        assert refused.code() == ErrorCode.INVALID_REQUEST and key in refused.str(), refused
        assert served() == second
        assert broker.process.poll() is None


def test_a_sasl_listeners_users_change_for_new_connections(tmp_path):
    """listener.name.<l>.plain.sasl.jaas.config set at run time: a new user logs in on a new
    connection, and a producer logged in before keeps producing on its connection."""
    plain_port, sasl_port = free_port(), free_port()
    module = "org.apache.kafka.common.security.plain.PlainLoginModule required"
    overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain_port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": f'{module} user_alice="alice-secret";',
        "password.encoder.secret": SECRET,
    }
    with BrokerProcess(tmp_path / "data", overrides):
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{plain_port}"})
        [future] = admin.create_topics([NewTopic("users", 1, 1)], request_timeout=WAIT_S).values()
        future.result(WAIT_S)

        def producer(user: str, **extra) -> Producer:
            return Producer(
                {
                    "bootstrap.servers": f"127.0.0.1:{sasl_port}",
                    "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": "PLAIN",
                    "sasl.username": user,
                    "sasl.password": f"{user}-secret",
                    "linger.ms": 0,
                    **extra,
                }
            )

        def delivered(client: Producer, value: bytes) -> list:
            """[None] when delivered (compare with [None] only what is None: KafkaError's == against
            None leaves a TypeError set)."""
            errors: list = []
            client.produce("users", value=value, on_delivery=lambda err, msg: errors.append(err))
            client.flush(WAIT_S)
            return [None if e is None else str(e) for e in errors]

        alice = producer("alice")
        assert delivered(alice, b"a1") == [None]
        stranger = producer("bob", **{"message.timeout.ms": 2000})
        [refused] = delivered(stranger, b"b0")  # not a user yet
        assert refused is not None
        key = "listener.name.sasl_plaintext.plain.sasl.jaas.config"
        jaas = f'{module} user_alice="alice-secret" user_bob="bob-secret";'
        assert alter(admin, "0", {key: jaas}) is None
        assert delivered(producer("bob"), b"b1") == [None]
        assert delivered(alice, b"a2") == [None]  # the connection made before carries on
        entry = describe(admin)[key]
        assert (entry.value, entry.is_sensitive) == (None, True)


def test_a_listener_added_and_removed_at_run_time(tmp_path):
    """listeners and listener.security.protocol.map set on a running broker: the new listener serves
    and is published in the registration (a client bootstrapping from it is told its address); taken
    away, it accepts nothing more and its connections are closed."""
    plain_port, extra_port = free_port(), free_port()
    with BrokerProcess(tmp_path / "data", {"listeners": f"PLAINTEXT://127.0.0.1:{plain_port}"}) as broker:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{plain_port}"})
        added = {
            "listeners": f"PLAINTEXT://127.0.0.1:{plain_port},EXTRA://127.0.0.1:{extra_port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTRA:PLAINTEXT",
        }
        assert alter(admin, "0", added) is None
        extra = AdminClient({"bootstrap.servers": f"127.0.0.1:{extra_port}"})
        assert [(b.host, b.port) for b in extra.list_topics(timeout=WAIT_S).brokers.values()] == [
            ("127.0.0.1", extra_port)
        ]
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{extra_port}", "linger.ms": 0})
        errors: list = []
        producer.produce("through-extra", value=b"v", on_delivery=lambda err, msg: errors.append(err))
        assert producer.flush(WAIT_S) == 0 and [e is None for e in errors] == [True]
        broker.stop()  # started again, the broker reads its dynamic configs and serves the listener again
        broker.start()
        extra = AdminClient({"bootstrap.servers": f"127.0.0.1:{extra_port}"})
        assert [b.port for b in extra.list_topics(timeout=WAIT_S).brokers.values()] == [extra_port]
        held = socket.create_connection(("127.0.0.1", extra_port), timeout=WAIT_S)

        assert alter(admin, "0", {"listeners": None, "listener.security.protocol.map": None}) is None
        assert held.recv(1) == b""  # closed by the broker
        held.close()
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", extra_port), timeout=1).close()
            except OSError:
                break
            time.sleep(0.1)
        else:
            raise AssertionError("the removed listener still accepts connections")
        assert list(admin.list_topics(timeout=WAIT_S).brokers.values())[0].port == plain_port


def test_a_listener_keeps_its_security_protocol():
    from strom.server import dynamic_listeners
    from strom.server.config import BrokerConfig
    from strom.storage.log_config import ConfigError

    base = {"listeners": "A://127.0.0.1:0,B://127.0.0.1:0", "listener.security.protocol.map": "A:PLAINTEXT,B:PLAINTEXT"}
    old = BrokerConfig.from_mapping(base)
    changed = BrokerConfig.from_mapping(
        {
            **base,
            "listener.security.protocol.map": "A:PLAINTEXT,B:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        }
    )
    with pytest.raises(ConfigError, match="Security protocol cannot be updated for existing listener B"):
        dynamic_listeners.check(old, changed)
    dynamic_listeners.check(old, BrokerConfig.from_mapping({**base, "listeners": "A://127.0.0.1:0"}))


def test_append_and_subtract_on_a_brokers_list_keys(broker, admin):
    """As Kafka's prepareIncrementalConfigs: list keys only, from the stored value or the default."""

    def operate(key: str, value: str, op: AlterConfigOpType):
        resource = ConfigResource(
            "broker", "0", incremental_configs=[ConfigEntry(key, value, incremental_operation=op)]
        )
        [future] = admin.incremental_alter_configs([resource]).values()
        try:
            future.result(WAIT_S)
        except KafkaException as exc:
            return exc.args[0]
        return None

    assert operate("log.cleanup.policy", "compact", AlterConfigOpType.APPEND) is None
    appended = describe(admin)["log.cleanup.policy"].value.split(",")  # to the default (shown in strom's order)
    assert sorted(appended) == ["compact", "delete"]
    assert operate("log.cleanup.policy", "delete", AlterConfigOpType.SUBTRACT) is None
    entry = describe(admin)["log.cleanup.policy"]
    assert (entry.value, entry.source) == ("compact", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    refused = operate("log.cleaner.threads", "2", AlterConfigOpType.APPEND)
    assert refused.code() == ErrorCode.INVALID_CONFIG
    assert refused.str() == "Config value append is not allowed for config key: log.cleaner.threads"


def test_log_cleaner_threads_resizes_the_cleaner_processes(tmp_path):
    """log.cleaner.threads set at run time: as many cleaner processes as it says, without a restart."""

    def cleaners(pid: int) -> list[int]:
        found = []
        for child in children_by_parent().get(pid, []):
            try:
                if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes() and alive(child):
                    found.append(child)
            except OSError:
                continue
        return found

    def wait_for(pid: int, count: int) -> list[int]:
        deadline = time.monotonic() + WAIT_S
        found = cleaners(pid)
        while len(found) != count and time.monotonic() < deadline:
            time.sleep(0.05)
            found = cleaners(pid)
        return found

    with BrokerProcess(tmp_path / "data", {"log.cleaner.threads": "1"}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        pid = broker.process.pid
        first = wait_for(pid, 1)
        assert len(first) == 1
        assert alter_default(broker, {"log.cleaner.threads": "3"}) == (ErrorCode.NONE, None)
        resized = wait_for(pid, 3)
        assert len(resized) == 3 and not set(first) & set(resized)
        assert alter(admin, "0", {"log.cleaner.threads": "2"}) is None  # the broker's own wins over the default
        assert len(wait_for(pid, 2)) == 2
