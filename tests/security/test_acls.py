"""The ACL authorizer with real clients: for each API, the principal with exactly the needed ACL succeeds
and one without it gets Kafka's error code; DENY beats ALLOW; prefixed and wildcard patterns; Metadata
hides what a principal may not Describe; a fake follower is refused; ACLs survive a restart; ``strom acls``.

One broker with a SASL_PLAINTEXT listener (PLAIN users alice, bob, carol and admin, the super user) and
a PLAINTEXT one (User:ANONYMOUS, for raw requests). Each test names its own topics and groups, so the
ACLs of one test do not decide another's.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from strom.cluster.zookeeper_server import free_port
from strom.protocol.api import ApiKey
from tests.broker_process import BrokerProcess
from tests.integration.clients import WAIT_S, RawClient

JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-pw" '
    'user_bob="bob-pw" user_carol="carol-pw" user_admin="admin-pw";'
)
PASSWORDS = {"alice": "alice-pw", "bob": "bob-pw", "carol": "carol-pw", "admin": "admin-pw"}
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LITERAL, PREFIXED = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
TOPIC_DENIED, GROUP_DENIED, TXN_DENIED = 29, 30, 53


class Secured:
    def __init__(self, broker: BrokerProcess, sasl_port: int, plain_port: int):
        self.broker, self.sasl_port, self.plain_port = broker, sasl_port, plain_port
        self._admins: dict[str, AdminClient] = {}  # kept: a collected client fails its pending futures

    def config(self, user: str, **extra) -> dict:
        return {
            "bootstrap.servers": f"127.0.0.1:{self.sasl_port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": PASSWORDS[user],
            **extra,
        }

    def kafka_python(self, user: str) -> dict:
        return {
            "bootstrap_servers": f"127.0.0.1:{self.sasl_port}",
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN",
            "sasl_plain_username": user,
            "sasl_plain_password": PASSWORDS[user],
        }

    def admin(self, user: str = "admin") -> AdminClient:
        if user not in self._admins:
            self._admins[user] = AdminClient(self.config(user))
        return self._admins[user]

    def allow(self, restype, name, principal, *ops, pattern=LITERAL, permission=ALLOW) -> None:
        bindings = [AclBinding(restype, name, pattern, principal, "*", op, permission) for op in ops]
        for future in self.admin().create_acls(bindings, request_timeout=WAIT_S).values():
            future.result(timeout=WAIT_S)

    def topic(self, prefix: str = "acl") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        for future in self.admin().create_topics([NewTopic(name, 1, 1)], request_timeout=WAIT_S).values():
            future.result(timeout=WAIT_S)
        return name


def overrides(sasl_port: int, plain_port: int) -> dict[str, str]:
    return {
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{sasl_port},PLAINTEXT://127.0.0.1:{plain_port}",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
        "offsets.topic.num.partitions": "1",
        "transaction.state.log.num.partitions": "1",
    }


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    sasl_port, plain_port = free_port(), free_port()
    with BrokerProcess(tmp_path_factory.mktemp("acls") / "data", overrides(sasl_port, plain_port)) as broker:
        yield Secured(broker, sasl_port, plain_port)


def produce(config: dict, topic: str, value: bytes = b"v") -> KafkaError | None:
    producer = Producer({**config, "message.timeout.ms": 8000})
    errors: list = []
    producer.produce(topic, value, on_delivery=lambda err, msg: errors.append(err))
    producer.flush(WAIT_S)
    assert errors, "no delivery report"
    return errors[0]


def consume_assigned(config: dict, topic: str) -> tuple[list[bytes], KafkaError | None]:
    consumer = Consumer({**config, "group.id": "unused", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() in (KafkaError._PARTITION_EOF, GROUP_DENIED):
                    continue  # librdkafka looks up the coordinator of group.id even when assigning
                return [], msg.error()
            return [msg.value()], None
        return [], None
    finally:
        consumer.close()


def test_produce_and_fetch_need_write_and_read(secured):
    topic = secured.topic()
    secured.allow(ResourceType.TOPIC, topic, "User:alice", AclOperation.WRITE, AclOperation.READ)
    assert produce(secured.config("alice"), topic, b"alice-1") is None
    assert produce(secured.config("bob"), topic).code() == TOPIC_DENIED
    assert consume_assigned(secured.config("alice"), topic) == ([b"alice-1"], None)
    secured.allow(ResourceType.TOPIC, topic, "User:bob", AclOperation.DESCRIBE)  # sees it, may not read it
    values, error = consume_assigned(secured.config("bob"), topic)
    assert values == [] and error is not None and error.code() == TOPIC_DENIED


def test_kafka_python_produce_and_fetch(secured):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTopicPartition
    from kafka.errors import TopicAuthorizationFailedError

    topic = secured.topic()
    secured.allow(ResourceType.TOPIC, topic, "User:bob", AclOperation.WRITE, AclOperation.READ)
    producer = KafkaProducer(**secured.kafka_python("bob"), api_version=(2, 8))
    producer.send(topic, b"from-bob").get(timeout=WAIT_S)
    producer.close()
    consumer = KafkaConsumer(**secured.kafka_python("bob"), api_version=(2, 8), enable_auto_commit=False)
    consumer.assign([KTopicPartition(topic, 0)])
    consumer.seek(KTopicPartition(topic, 0), 0)
    values: list[bytes] = []
    deadline = time.monotonic() + WAIT_S
    while not values and time.monotonic() < deadline:
        values = [m.value for batch in consumer.poll(200).values() for m in batch]
    consumer.close()
    assert values == [b"from-bob"]
    denied = KafkaProducer(**secured.kafka_python("alice"), api_version=(2, 8), max_block_ms=5000)
    with pytest.raises(TopicAuthorizationFailedError):
        denied.send(topic, b"no").get(timeout=WAIT_S)
    denied.close()


def test_metadata_hides_topics_without_describe(secured):
    visible, hidden = secured.topic("seen"), secured.topic("unseen")
    secured.allow(ResourceType.TOPIC, visible, "User:carol", AclOperation.DESCRIBE)
    topics = set(secured.admin("carol").list_topics(timeout=WAIT_S).topics)
    assert visible in topics and hidden not in topics
    assert hidden in set(secured.admin("admin").list_topics(timeout=WAIT_S).topics)
    # asked for by name, a topic without Describe answers TOPIC_AUTHORIZATION_FAILED (and is not created)
    named = secured.admin("carol").list_topics(topic=f"ghost-{uuid.uuid4().hex[:6]}", timeout=WAIT_S)
    assert [t.error.code() for t in named.topics.values()] == [TOPIC_DENIED]
    # auto-creation (a producer's Metadata) needs Create as well as Describe
    prefix = f"auto-{uuid.uuid4().hex[:6]}-"
    secured.allow(ResourceType.TOPIC, prefix, "User:carol", AclOperation.DESCRIBE, AclOperation.WRITE, pattern=PREFIXED)
    assert produce(secured.config("carol"), prefix + "a").code() == TOPIC_DENIED
    assert prefix + "a" not in secured.admin().list_topics(timeout=WAIT_S).topics
    secured.allow(ResourceType.TOPIC, prefix, "User:carol", AclOperation.CREATE, pattern=PREFIXED)
    assert produce(secured.config("carol"), prefix + "b") is None


def test_create_and_delete_topics(secured):
    prefix = f"alice-{uuid.uuid4().hex[:6]}-"
    secured.allow(ResourceType.TOPIC, prefix, "User:alice", AclOperation.CREATE, AclOperation.DELETE, pattern=PREFIXED)
    admin = secured.admin("alice")
    mine, other = prefix + "t", f"other-{uuid.uuid4().hex[:6]}"
    futures = admin.create_topics([NewTopic(mine, 1, 1), NewTopic(other, 1, 1)], request_timeout=WAIT_S)
    futures[mine].result(timeout=WAIT_S)
    with pytest.raises(KafkaException) as refused:
        futures[other].result(timeout=WAIT_S)
    assert refused.value.args[0].code() == TOPIC_DENIED
    someone_elses = secured.topic()
    futures = admin.delete_topics([mine, someone_elses], request_timeout=WAIT_S)
    futures[mine].result(timeout=WAIT_S)
    with pytest.raises(KafkaException) as refused:
        futures[someone_elses].result(timeout=WAIT_S)
    assert refused.value.args[0].code() == TOPIC_DENIED


def group_consume(config: dict, topic: str, group: str) -> tuple[list[bytes], KafkaError | None]:
    consumer = Consumer({**config, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + WAIT_S * 2
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error() is not None:
                return [], msg.error()
            consumer.commit(asynchronous=False)
            committed = consumer.committed([TopicPartition(topic, 0)], timeout=WAIT_S)
            assert committed[0].offset == msg.offset() + 1
            return [msg.value()], None
        return [], None
    finally:
        consumer.close()


def test_groups_need_read_on_the_group(secured):
    topic, group = secured.topic(), f"g-{uuid.uuid4().hex[:6]}"
    assert produce(secured.config("admin"), topic, b"grouped") is None
    for user in ("alice", "bob"):
        secured.allow(ResourceType.TOPIC, topic, f"User:{user}", AclOperation.READ)
    secured.allow(ResourceType.GROUP, group, "User:alice", AclOperation.READ)
    assert group_consume(secured.config("alice"), topic, group) == ([b"grouped"], None)
    values, error = group_consume(secured.config("bob"), topic, group)
    assert values == [] and error is not None and error.code() == GROUP_DENIED
    # kafka-python: the same refusal, raised from poll
    from kafka import KafkaConsumer
    from kafka.errors import GroupAuthorizationFailedError

    consumer = KafkaConsumer(topic, **secured.kafka_python("bob"), api_version=(2, 8), group_id=group)
    with pytest.raises(GroupAuthorizationFailedError):
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            consumer.poll(200)
    consumer.close()
    # OffsetFetch: Describe on the group, then Describe on each topic (User:ANONYMOUS, raw)
    body = {
        "groups": [{"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]}],
        "require_stable": False,
    }
    with RawClient(f"127.0.0.1:{secured.plain_port}") as client:
        refused = client.request(ApiKey.OFFSET_FETCH, 8, body).groups[0]
        secured.allow(ResourceType.GROUP, group, "User:ANONYMOUS", AclOperation.DESCRIBE)
        partly = client.request(ApiKey.OFFSET_FETCH, 8, body).groups[0]
        secured.allow(ResourceType.TOPIC, topic, "User:ANONYMOUS", AclOperation.DESCRIBE)
        answered = client.request(ApiKey.OFFSET_FETCH, 8, body).groups[0]
    assert refused.error_code == GROUP_DENIED
    assert partly.error_code == 0 and partly.topics[0].partitions[0].error_code == TOPIC_DENIED
    assert answered.topics[0].partitions[0].committed_offset == 1


def test_transactions_need_write_on_the_transactional_id(secured):
    topic, txn = secured.topic(), f"tx-{uuid.uuid4().hex[:6]}"
    secured.allow(ResourceType.TOPIC, topic, "User:alice", AclOperation.WRITE)
    secured.allow(ResourceType.TRANSACTIONAL_ID, txn, "User:alice", AclOperation.WRITE)
    producer = Producer(secured.config("alice", **{"transactional.id": txn}))
    producer.init_transactions(WAIT_S)
    producer.begin_transaction()
    producer.produce(topic, b"in-txn")
    producer.commit_transaction(WAIT_S)
    secured.allow(ResourceType.TOPIC, topic, "User:bob", AclOperation.WRITE)
    intruder = Producer(secured.config("bob", **{"transactional.id": txn}))
    with pytest.raises(KafkaException) as refused:
        intruder.init_transactions(WAIT_S)
    assert refused.value.args[0].code() == TXN_DENIED
    values, error = consume_assigned(secured.config("admin", **{"isolation.level": "read_committed"}), topic)
    assert (values, error) == ([b"in-txn"], None)


def test_describe_configs_needs_describe_configs(secured):
    topic = secured.topic()
    secured.allow(ResourceType.TOPIC, topic, "User:alice", AclOperation.DESCRIBE_CONFIGS)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = secured.admin("alice").describe_configs([resource], request_timeout=WAIT_S)[resource].result(WAIT_S)
    assert "retention.ms" in configs
    with pytest.raises(KafkaException) as refused:
        secured.admin("bob").describe_configs([resource], request_timeout=WAIT_S)[resource].result(WAIT_S)
    assert refused.value.args[0].code() == TOPIC_DENIED


def test_deny_beats_allow_and_patterns_match(secured):
    topic = secured.topic("deny")
    secured.allow(ResourceType.TOPIC, topic, "User:*", AclOperation.WRITE)  # everyone ...
    secured.allow(ResourceType.TOPIC, topic, "User:bob", AclOperation.WRITE, permission=DENY)  # ... but bob
    assert produce(secured.config("alice"), topic) is None
    assert produce(secured.config("bob"), topic).code() == TOPIC_DENIED
    # PREFIXED matches names that start with it, nothing else
    prefix = f"pre{uuid.uuid4().hex[:6]}"
    inside, outside = secured.topic(prefix), secured.topic("out" + prefix)
    secured.allow(ResourceType.TOPIC, prefix, "User:carol", AclOperation.WRITE, pattern=PREFIXED)
    assert produce(secured.config("carol"), inside) is None
    assert produce(secured.config("carol"), outside).code() == TOPIC_DENIED
    # the LITERAL "*" names every topic; a DENY on a prefix still wins over it
    secured.allow(ResourceType.TOPIC, "*", "User:carol", AclOperation.WRITE)
    assert produce(secured.config("carol"), outside) is None
    secured.allow(ResourceType.TOPIC, "out" + prefix, "User:carol", AclOperation.ALL, pattern=PREFIXED, permission=DENY)
    assert produce(secured.config("carol"), outside).code() == TOPIC_DENIED
    # DescribeAcls with MATCH names every binding that applies to one topic
    found = (
        secured.admin()
        .describe_acls(
            AclBindingFilter(
                ResourceType.TOPIC,
                outside,
                ResourcePatternType.MATCH,
                "User:carol",
                None,
                AclOperation.ANY,
                AclPermissionType.ANY,
            ),
            request_timeout=WAIT_S,
        )
        .result(WAIT_S)
    )
    assert {(b.name, b.resource_pattern_type, b.permission_type) for b in found} == {
        ("*", LITERAL, ALLOW),
        ("out" + prefix, PREFIXED, DENY),
    }


def fetch_body(topic: str, replica_id: int) -> dict:
    return {
        "replica_id": replica_id,
        "max_wait": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "rack_id": "",
        "forgotten_topics_data": [],
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": -1,
                        "fetch_offset": 0,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
    }


def test_fetch_claiming_a_replica_id_needs_cluster_action(secured):
    topic = secured.topic()
    assert produce(secured.config("admin"), topic, b"secret") is None
    secured.allow(ResourceType.TOPIC, topic, "User:ANONYMOUS", AclOperation.READ, AclOperation.DESCRIBE)
    with RawClient(f"127.0.0.1:{secured.plain_port}") as client:
        as_consumer = client.request(ApiKey.FETCH, 11, fetch_body(topic, -1))
        as_follower = client.request(ApiKey.FETCH, 11, fetch_body(topic, 0))
    consumer_partition = as_consumer.responses[0].partitions[0]
    assert consumer_partition.error_code == 0 and b"secret" in bytes(consumer_partition.records)
    follower_partition = as_follower.responses[0].partitions[0]
    assert follower_partition.error_code == TOPIC_DENIED and not follower_partition.records


def test_acl_apis_need_the_cluster_and_an_authorizer(secured):
    with RawClient(f"127.0.0.1:{secured.plain_port}") as client:
        described = client.request(
            ApiKey.DESCRIBE_ACLS,
            2,
            {
                "resource_type_filter": 1,
                "resource_name_filter": None,
                "pattern_type_filter": 1,
                "principal_filter": None,
                "host_filter": None,
                "operation": 1,
                "permission_type": 1,
            },
        )
    assert described.error_code == 31 and described.resources == ()
    futures = secured.admin("bob").create_acls(
        [AclBinding(ResourceType.TOPIC, "x", LITERAL, "User:bob", "*", AclOperation.ALL, ALLOW)], request_timeout=WAIT_S
    )
    with pytest.raises(KafkaException) as refused:
        for future in futures.values():
            future.result(timeout=WAIT_S)
    assert refused.value.args[0].code() == 31


def run_cli(args: list[str], capsys) -> tuple[int, str]:
    from strom.cli.main import main

    code = main(["acls", *args])
    return code, capsys.readouterr().out


def test_strom_acls_round_trip_and_restart(secured, tmp_path, capsys):
    config = tmp_path / "admin.properties"
    config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=admin\nsasl.password=admin-pw\n"
    )
    base = ["--bootstrap-server", f"127.0.0.1:{secured.sasl_port}", "--command-config", str(config)]
    topic, group = f"cli-{uuid.uuid4().hex[:6]}", f"cg-{uuid.uuid4().hex[:6]}"
    code, out = run_cli([*base, "--add", "--allow-principal", "User:alice", "--producer", "--topic", topic], capsys)
    assert code == 0
    pattern = f"ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)"
    assert f"Adding ACLs for resource `{pattern}`: \n \t" in out
    for op in ("WRITE", "DESCRIBE", "CREATE"):
        assert f"(principal=User:alice, host=*, operation={op}, permissionType=ALLOW)" in out
    code, out = run_cli(
        [*base, "--add", "--allow-principal", "User:bob", "--consumer", "--topic", topic, "--group", group], capsys
    )
    assert code == 0
    code, out = run_cli([*base, "--list", "--topic", topic], capsys)
    assert code == 0 and out.startswith(f"Current ACLs for resource `{pattern}`: \n \t")
    assert out.count("(principal=") == 5  # alice Write/Describe/Create, bob Read/Describe
    code, out = run_cli([*base, "--list", "--group", group], capsys)
    assert "(principal=User:bob, host=*, operation=READ, permissionType=ALLOW)" in out
    # alice may now create and write the topic herself
    assert produce(secured.config("alice"), topic, b"by-cli") is None

    secured.broker.restart()  # the ACLs are in the metadata store, not in memory
    assert produce(secured.config("alice"), topic, b"after-restart") is None
    assert produce(secured.config("bob"), topic).code() == TOPIC_DENIED  # a consumer, not a producer

    code, out = run_cli(
        [
            *base,
            "--remove",
            "--allow-principal",
            "User:bob",
            "--consumer",
            "--topic",
            topic,
            "--group",
            group,
            "--force",
        ],
        capsys,
    )
    assert code == 0
    code, out = run_cli([*base, "--remove", "--topic", topic, "--force"], capsys)
    assert code == 0
    code, out = run_cli([*base, "--list", "--topic", topic], capsys)
    assert code == 0 and "principal=" not in out
    code, out = run_cli([*base, "--list", "--group", group], capsys)
    assert code == 0 and "principal=" not in out
    assert produce(secured.config("alice"), topic).code() == TOPIC_DENIED


# Every version of the APIs that a principal without ACLs is refused whole: the refusal encodes and
# names Kafka's error, and the connection stays open for the next request.
G, T = "forbidden-group", "forbidden-txn"
REFUSALS = {
    ApiKey.JOIN_GROUP: (
        {
            "group_id": G,
            "session_timeout": 10000,
            "rebalance_timeout": 10000,
            "member_id": "",
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}],
        },
        GROUP_DENIED,
    ),
    ApiKey.SYNC_GROUP: ({"group_id": G, "generation_id": 1, "member_id": "m"}, GROUP_DENIED),
    ApiKey.HEARTBEAT: ({"group_id": G, "generation_id": 1, "member_id": "m"}, GROUP_DENIED),
    ApiKey.LEAVE_GROUP: ({"group_id": G, "member_id": "m", "members": [{"member_id": "m"}]}, GROUP_DENIED),
    ApiKey.FIND_COORDINATOR: ({"key": G, "coordinator_keys": [G]}, GROUP_DENIED),
    ApiKey.OFFSET_FETCH: (
        {
            "group_id": G,
            "topics": [{"name": "t", "partition_indexes": [0]}],
            "groups": [{"group_id": G, "topics": None}],
        },
        GROUP_DENIED,
    ),
    ApiKey.DESCRIBE_GROUPS: ({"groups": [G]}, GROUP_DENIED),
    ApiKey.DELETE_GROUPS: ({"groups_names": [G]}, GROUP_DENIED),
    ApiKey.OFFSET_DELETE: ({"group_id": G}, GROUP_DENIED),
    ApiKey.INIT_PRODUCER_ID: ({"transactional_id": T, "transaction_timeout": 60000}, TXN_DENIED),
    ApiKey.ADD_OFFSETS_TO_TXN: (
        {"transactional_id": T, "producer_id": 1, "producer_epoch": 0, "group_id": G},
        TXN_DENIED,
    ),
    ApiKey.END_TXN: ({"transactional_id": T, "producer_id": 1, "producer_epoch": 0, "committed": True}, TXN_DENIED),
    ApiKey.DESCRIBE_TRANSACTIONS: ({"transactional_ids": [T]}, TXN_DENIED),
    ApiKey.DESCRIBE_CLUSTER: ({}, 31),
    ApiKey.DESCRIBE_LOG_DIRS: ({"topics": None}, 31),  # v0-2 have no error field: an empty answer
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: ({"users": None}, 31),
    ApiKey.ELECT_LEADERS: ({"topic_partitions": [{"topic": "t", "partitions": [0]}]}, 31),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (
        {"timeout": 1000, "topics": [{"name": "t", "partitions": [{"partition_index": 0, "replicas": None}]}]},
        31,
    ),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: ({"timeout": 1000, "topics": None}, 31),
    ApiKey.UPDATE_FEATURES: (  # Alter on the cluster
        {
            "timeout": 1000,
            "feature_updates": [
                {"feature": "transaction.version", "max_version_level": 1, "allow_downgrade": True, "upgrade_type": 2}
            ],
        },
        31,
    ),
}


def error_codes(value) -> set[int]:
    """Every error code anywhere in a decoded response."""
    found: set[int] = set()
    if isinstance(value, (list, tuple)):
        for item in value:
            found |= error_codes(item)
    elif hasattr(value, "__dataclass_fields__"):
        for name in value.__dataclass_fields__:
            field = getattr(value, name)
            if "error_code" in name and isinstance(field, int):
                found.add(int(field))
            else:
                found |= error_codes(field)
    return found


def test_every_version_of_a_refused_api_answers_the_refusal(secured):
    from strom.server.handlers import HANDLERS

    with RawClient(f"127.0.0.1:{secured.plain_port}") as client:
        for api_key, (values, code) in REFUSALS.items():
            spec = HANDLERS[api_key]
            for version in range(spec.min_version, spec.max_version + 1):
                response = client.request(api_key, version, values)
                if api_key == ApiKey.DESCRIBE_LOG_DIRS and version < 3:
                    assert response.results == ()
                    continue
                assert code in error_codes(response), (api_key, version, response)


def topic_refusals(hidden: str, seen: str, seen_id) -> dict:
    """API -> (request, expected code): ``hidden`` has no ACL at all, ``seen`` only Describe (and an id)."""
    from strom.protocol.records import NewRecord, build_batch

    records = build_batch([NewRecord(b"v")])
    partitions = [
        {
            "partition_index": 0,
            "offset": 0,
            "timestamp": -1,
            "max_num_offsets": 1,
            "committed_offset": 0,
            "current_leader_epoch": -1,
        }
    ]
    return {
        ApiKey.PRODUCE: (
            {
                "acks": 1,
                "timeout": 5000,
                # v13 names the topic by id: seen's, which may be described but not written
                "topic_data": [
                    {"name": hidden, "topic_id": seen_id, "partition_data": [{"index": 0, "records": records}]}
                ],
            },
            TOPIC_DENIED,
        ),
        ApiKey.FETCH: (
            {**fetch_body(seen, -1), "topics": [{**fetch_body(seen, -1)["topics"][0], "topic_id": seen_id}]},
            TOPIC_DENIED,
        ),
        ApiKey.METADATA: ({"topics": [{"name": hidden}], "allow_auto_topic_creation": False}, TOPIC_DENIED),
        ApiKey.LIST_OFFSETS: ({"replica_id": -1, "topics": [{"name": hidden, "partitions": partitions}]}, TOPIC_DENIED),
        ApiKey.OFFSET_FOR_LEADER_EPOCH: (
            {
                "replica_id": -1,
                "topics": [
                    {"topic": hidden, "partitions": [{"partition": 0, "leader_epoch": 0, "current_leader_epoch": -1}]}
                ],
            },
            TOPIC_DENIED,
        ),
        ApiKey.CREATE_TOPICS: (
            {"topics": [{"name": hidden + "-new", "num_partitions": 1, "replication_factor": 1}], "timeout": 5000},
            TOPIC_DENIED,
        ),
        ApiKey.DELETE_TOPICS: ({"topic_names": [hidden], "topics": [{"name": hidden}], "timeout": 5000}, TOPIC_DENIED),
        ApiKey.DELETE_RECORDS: (
            {"topics": [{"name": hidden, "partitions": partitions}], "timeout": 5000},
            TOPIC_DENIED,
        ),
        ApiKey.CREATE_PARTITIONS: (
            {"topics": [{"name": hidden, "count": 2, "assignments": None}], "timeout": 5000},
            TOPIC_DENIED,
        ),
        ApiKey.DESCRIBE_CONFIGS: (
            {"resources": [{"resource_type": 2, "resource_name": hidden, "configuration_keys": None}]},
            TOPIC_DENIED,
        ),
        ApiKey.ALTER_CONFIGS: (
            {"resources": [{"resource_type": 2, "resource_name": hidden, "configs": []}]},
            TOPIC_DENIED,
        ),
        ApiKey.INCREMENTAL_ALTER_CONFIGS: (
            {"resources": [{"resource_type": 2, "resource_name": hidden, "configs": []}]},
            TOPIC_DENIED,
        ),
        ApiKey.DESCRIBE_PRODUCERS: ({"topics": [{"name": hidden, "partition_indexes": [0]}]}, TOPIC_DENIED),
        ApiKey.OFFSET_COMMIT: (
            {
                "group_id": G,
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "topics": [{"name": hidden, "partitions": partitions}],
            },
            GROUP_DENIED,
        ),
        ApiKey.TXN_OFFSET_COMMIT: (
            {
                "transactional_id": T,
                "group_id": G,
                "producer_id": 1,
                "producer_epoch": 0,
                "topics": [{"name": hidden, "partitions": partitions}],
            },
            TXN_DENIED,
        ),
    }


def test_every_version_of_a_topic_api_answers_the_refusal(secured):
    from strom.server.handlers import HANDLERS

    hidden, seen = secured.topic("hidden"), secured.topic("seen")
    secured.allow(ResourceType.TOPIC, seen, "User:ANONYMOUS", AclOperation.DESCRIBE)  # but not Read
    with RawClient(f"127.0.0.1:{secured.plain_port}") as client:
        described = client.request(
            ApiKey.METADATA, 12, {"topics": [{"name": seen}], "allow_auto_topic_creation": False}
        )
        requests = topic_refusals(hidden, seen, described.topics[0].topic_id)
        for api_key, (values, code) in requests.items():
            spec = HANDLERS[api_key]
            for version in range(spec.min_version, spec.max_version + 1):
                response = client.request(api_key, version, values)
                assert code in error_codes(response), (api_key, version, response)
    assert hidden + "-new" not in secured.admin().list_topics(timeout=WAIT_S).topics
