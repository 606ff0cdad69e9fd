"""Delegation tokens (KIP-48, KIP-373) on a real broker: made with the CLI, used to log in, renewed, expired.

One broker with the ACL authorizer and four listeners: PLAINTEXT (the super user's way in for
setup), SSL without client certificates, SASL_PLAINTEXT and SASL_SSL with SCRAM users alice, bob,
carol and dave. Token logins go through scramp over a real socket (see tests.security.token_login:
no installed client library sends SCRAM's tokenauth extension).
"""

from __future__ import annotations

import base64
import re
import subprocess
import sys
import time

import pytest

from strom.cluster.zookeeper_server import free_port
from strom.protocol.api import ApiKey
from strom.protocol.records import NewRecord, build_batch, decode_batch_records
from tests.broker_process import BrokerProcess
from tests.integration.clients import WAIT_S, RawClient, raw_produce, raw_wait_for_topic, unique_topic
from tests.security.token_login import SASL_FAILED, logged_in, scram_login, tls_client
from tests.tls_certs import make_certificates

USERS = ("alice", "bob", "carol", "dave")
TOPIC_DENIED = 29
INVALID_PRINCIPAL_TYPE = 67
AUTH_DISABLED, NOT_FOUND, OWNER_MISMATCH, NOT_ALLOWED, TOKEN_AUTHORIZATION_FAILED = 61, 62, 63, 64, 65
TOKEN_APIS = {38, 39, 40, 41}
# ACL wire codes
USER, TOPIC = 7, 2
LITERAL, ALLOW = 3, 3
READ, WRITE, CREATE_TOKENS = 3, 4, 13


class Broker:
    def __init__(self, process: BrokerProcess, ports: dict[str, int], certs, tmp):
        self.process, self.ports, self.certs, self.tmp = process, ports, certs, tmp

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def command_config(self, user: str) -> str:
        path = self.tmp / f"{user}.properties"
        path.write_text(
            "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
            f"sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{user}" password="{user}-secret";\n'
            f"ssl.truststore.location={self.certs.ca}\nssl.truststore.type=PEM\n"
        )
        return str(path)

    def cli(self, user: str, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "strom.cli.main", "delegation-tokens", "--bootstrap-server"]
            + [self.address("SASL_SSL"), "--command-config", self.command_config(user), *args],
            capture_output=True,
            text=True,
            timeout=60,
        )

    def as_user(self, user: str) -> RawClient:
        return logged_in(self.address("SASL_PLAINTEXT"), user, f"{user}-secret")

    def create_topic(self, prefix: str) -> str:
        topic = unique_topic(prefix)
        with RawClient(self.address("PLAINTEXT")) as admin:
            raw_wait_for_topic(admin, topic)  # auto-created by the super user's Metadata
        return topic

    def acls(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "strom.cli.main", "acls", "--bootstrap-server", self.address("PLAINTEXT"), *args],
            capture_output=True,
            text=True,
            timeout=60,
        )

    def add_acl(self, resource_type: int, name: str, principal: str, operation: int) -> None:
        acl = {
            "resource_type": resource_type,
            "resource_name": name,
            "resource_pattern_type": LITERAL,
            "principal": principal,
            "host": "*",
            "operation": operation,
            "permission_type": ALLOW,
        }
        with RawClient(self.address("PLAINTEXT")) as admin:
            created = admin.request(ApiKey.CREATE_ACLS, 2, {"creations": [acl]})
        assert [r.error_code for r in created.results] == [0]


def scram_users(bootstrap: str, users) -> None:
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    admin = AdminClient({"bootstrap.servers": bootstrap})
    upserts = [
        UserScramCredentialUpsertion(u, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), f"{u}-secret".encode())
        for u in users
    ]
    for future in admin.alter_user_scram_credentials(upserts, request_timeout=WAIT_S).values():
        future.result(timeout=WAIT_S)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    certs = make_certificates(tmp_path_factory.mktemp("certs"))
    ports = {name: free_port() for name in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")}
    overrides = {
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        "inter.broker.listener.name": "PLAINTEXT",
        "ssl.keystore.location": str(certs.broker),
        "ssl.truststore.location": str(certs.ca),
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:ANONYMOUS;User:admin",
        "delegation.token.master.key": "the-old-name-still-works",
    }
    tmp = tmp_path_factory.mktemp("broker")
    with BrokerProcess(tmp / "data", overrides) as process:
        scram_users(f"127.0.0.1:{ports['PLAINTEXT']}", USERS)
        yield Broker(process, ports, certs, tmp)


def create(client: RawClient, max_lifetime_ms: int = -1, renewers=(), owner: str | None = None, version: int = 3):
    owner_type, _, owner_name = (owner or "").partition(":")
    return client.request(
        ApiKey.CREATE_DELEGATION_TOKEN,
        version,
        {
            "owner_principal_type": owner_type or None,
            "owner_principal_name": owner_name or None,
            "renewers": [{"principal_type": r.split(":")[0], "principal_name": r.split(":")[1]} for r in renewers],
            "max_lifetime": max_lifetime_ms,
        },
    )


def describe(client: RawClient, owners: list[str] | None = None):
    values = None if owners is None else [{"principal_type": "User", "principal_name": o[5:]} for o in owners]
    response = client.request(ApiKey.DESCRIBE_DELEGATION_TOKEN, 3, {"owners": values})
    assert response.error_code == 0
    return {t.token_id: t for t in response.tokens}


def token_of(output: str) -> tuple[str, str]:
    """(tokenId, base64 HMAC) from the CLI's table."""
    match = re.search(r"^TOKENID\s+HMAC.*\n(\S+)\s+(\S+)\s", output, re.MULTILINE)
    assert match, output
    return match[1], match[2]


def fetch_values(client: RawClient, topic: str) -> list[bytes | None]:
    response = client.request(
        ApiKey.FETCH,
        12,
        {
            "max_wait": 0,
            "min_bytes": 1,
            "topics": [
                {"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}
            ],
            "forgotten_topics_data": [],
        },
    )
    [part] = response.responses[0].partitions
    assert part.error_code == 0
    return [r.value for r in decode_batch_records(part.records)]


def test_cli_token_logs_in_as_its_owner_and_passes_the_owners_acls(broker):
    topic = broker.create_topic("tok")
    broker.add_acl(TOPIC, topic, "User:alice", WRITE)
    broker.add_acl(TOPIC, topic, "User:alice", READ)
    with RawClient(broker.address("PLAINTEXT")) as admin:
        versions = {
            k.api_key: (k.min_version, k.max_version)
            for k in admin.request(
                ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
            ).api_keys
        }
    assert {k: versions[k] for k in TOKEN_APIS} == {38: (0, 3), 39: (0, 2), 40: (0, 2), 41: (0, 3)}

    made = broker.cli("alice", "--create", "--max-life-time-period", "-1", "--renewer-principal", "User:bob")
    assert made.returncode == 0, made.stderr
    token_id, hmac_b64 = token_of(made.stdout)
    assert f"Created delegation token with tokenId : {token_id}" in made.stdout
    assert re.search(rf"{token_id}\s+\S+\s+User:alice\s+User:alice\s+\[User:bob\]", made.stdout)

    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):  # both mechanisms, over TLS
        with tls_client(broker.address("SASL_SSL"), broker.certs.ca) as client:
            answer = scram_login(client, token_id, hmac_b64, mechanism, token=True)
            assert answer.error_code == 0
            # KIP-368: the session ends when the token expires (24 h after creation by default)
            assert 0 < answer.session_lifetime.total_seconds() <= 24 * 3600
    with logged_in(broker.address("SASL_PLAINTEXT"), token_id, hmac_b64, token=True) as client:
        batch = build_batch([NewRecord(b"via-token", b"k", timestamp=1_700_000_000_000)])
        assert raw_produce(client, topic, batch) == (0, 0)  # alice's Write ACL: the principal is alice
        assert fetch_values(client, topic) == [b"via-token"]
        other = unique_topic("nottok")
        assert raw_produce(client, other, batch)[0] == TOPIC_DENIED  # and only alice's
        # a token cannot make tokens (Kafka: no token requests on token-authenticated connections)
        assert create(client).error_code == NOT_ALLOWED
        assert client.request(ApiKey.DESCRIBE_DELEGATION_TOKEN, 3, {"owners": None}).error_code == NOT_ALLOWED
    # the token's password is the HMAC: a wrong one, or the right one without tokenauth, is refused
    with RawClient(broker.address("SASL_PLAINTEXT")) as client:
        assert scram_login(client, token_id, base64.b64encode(b"x" * 64).decode(), token=True).error_code == SASL_FAILED
    with RawClient(broker.address("SASL_PLAINTEXT")) as client:
        assert scram_login(client, token_id, hmac_b64).error_code == SASL_FAILED


def test_renew_extends_and_expire_ends_a_token(broker):
    with broker.as_user("alice") as alice:
        made = create(alice, renewers=["User:bob"])
        assert made.error_code == 0
    hmac_b64 = base64.b64encode(made.hmac).decode()
    expiry = int(made.expiry_timestamp.timestamp() * 1000)
    maximum = int(made.max_timestamp.timestamp() * 1000)
    assert maximum - int(made.issue_timestamp.timestamp() * 1000) == 7 * 24 * 3600 * 1000  # the default max lifetime

    renewed = broker.cli("bob", "--renew", "--hmac", hmac_b64, "--renew-time-period", str(3 * 24 * 3600 * 1000))
    assert renewed.returncode == 0, renewed.stderr
    assert "Completed renew operation. New expiry date : " in renewed.stdout
    with broker.as_user("alice") as alice:
        described = describe(alice)[made.token_id]
    assert described.expiry_timestamp >= expiry + 2 * 24 * 3600 * 1000 - 60_000  # 24 h default -> 3 d
    assert described.max_timestamp == maximum

    refused = broker.cli("carol", "--renew", "--hmac", hmac_b64, "--renew-time-period", "-1")
    assert refused.returncode == 1 and "DELEGATION_TOKEN_OWNER_MISMATCH" in refused.stderr
    unknown = broker.cli(
        "alice", "--expire", "--hmac", base64.b64encode(b"?" * 64).decode(), "--expiry-time-period", "-1"
    )
    assert unknown.returncode == 1 and "DELEGATION_TOKEN_NOT_FOUND" in unknown.stderr

    with logged_in(broker.address("SASL_PLAINTEXT"), made.token_id, hmac_b64, token=True):
        pass
    expired = broker.cli("alice", "--expire", "--hmac", hmac_b64, "--expiry-time-period", "-1")
    assert expired.returncode == 0, expired.stderr
    assert "Completed expire operation. New expiry date : " in expired.stdout
    with RawClient(broker.address("SASL_PLAINTEXT")) as client:
        answer = scram_login(client, made.token_id, hmac_b64, token=True)
        assert answer.error_code == SASL_FAILED
    with broker.as_user("alice") as alice:
        assert made.token_id not in describe(alice)
        again = alice.request(ApiKey.RENEW_DELEGATION_TOKEN, 2, {"hmac": made.hmac, "renew_period": -1})
        assert again.error_code == NOT_FOUND


def test_a_token_past_its_max_lifetime_no_longer_logs_in(broker):
    with broker.as_user("alice") as alice:
        made = create(alice, max_lifetime_ms=1000)
        assert made.error_code == 0
        hmac_b64 = base64.b64encode(made.hmac).decode()
        deadline = int(made.max_timestamp.timestamp() * 1000)
        while time.time() * 1000 <= deadline + 50:
            time.sleep(0.1)
        with RawClient(broker.address("SASL_PLAINTEXT")) as client:
            assert scram_login(client, made.token_id, hmac_b64, token=True).error_code == SASL_FAILED
        renewed = alice.request(ApiKey.RENEW_DELEGATION_TOKEN, 2, {"hmac": made.hmac, "renew_period": -1})
        assert renewed.error_code == 66  # DELEGATION_TOKEN_EXPIRED


def test_describe_shows_each_principal_the_tokens_it_may_see(broker):
    with broker.as_user("alice") as alice:
        mine = create(alice, renewers=["User:bob"]).token_id
    with broker.as_user("carol") as carol:
        carols = create(carol).token_id
        old = create(carol, version=0)  # Kafka 3.9's lowest versions (schemas under strom/protocol/legacy)
        assert (old.error_code, old.principal_name) == (0, "carol")
        described = carol.request(ApiKey.DESCRIBE_DELEGATION_TOKEN, 0, {"owners": None})
        assert {carols, old.token_id} <= {t.token_id for t in described.tokens}
        assert (
            carol.request(ApiKey.EXPIRE_DELEGATION_TOKEN, 0, {"hmac": old.hmac, "expiry_time_period": -1}).error_code
            == 0
        )
        assert (
            carol.request(ApiKey.RENEW_DELEGATION_TOKEN, 0, {"hmac": old.hmac, "renew_period": -1}).error_code
            == NOT_FOUND
        )
    with broker.as_user("alice") as alice:
        seen = describe(alice)
        assert mine in seen and carols not in seen
        token = seen[mine]
        assert (token.principal_name, token.token_requester_principal_name) == ("alice", "alice")
        assert [(r.principal_type, r.principal_name) for r in token.renewers] == [("User", "bob")]
        assert base64.b64encode(token.hmac)  # owners see the HMAC
        assert describe(alice, []) == {}  # an empty owner list (not null) lists nothing
    with broker.as_user("bob") as bob:
        assert mine in describe(bob) and carols not in describe(bob)  # a renewer sees the token
    with broker.as_user("dave") as dave:
        assert not {mine, carols} & set(describe(dave))
    added = broker.acls(
        "--add", "--allow-principal", "User:dave", "--operation", "Describe", "--delegation-token", carols
    )
    assert added.returncode == 0, added.stderr  # Describe on that one token
    assert f"Current ACLs for resource `ResourcePattern(resourceType=DELEGATION_TOKEN, name={carols}" in added.stdout
    with broker.as_user("dave") as dave:
        seen = set(describe(dave))
        assert carols in seen and mine not in seen
    added = broker.acls(
        "--add", "--allow-principal", "User:dave", "--operation", "DescribeTokens", "--user-principal", "User:alice"
    )
    assert added.returncode == 0, added.stderr  # KIP-373: all of alice's tokens
    listed = broker.acls("--list", "--user-principal", "User:alice")
    assert "(principal=User:dave, host=*, operation=DESCRIBE_TOKENS, permissionType=ALLOW)" in listed.stdout, listed
    wrong = broker.acls("--add", "--allow-principal", "User:dave", "--operation", "Read", "--user-principal", "User:x")
    assert wrong.returncode == 1 and "ResourceType USER only supports operations" in wrong.stderr
    with broker.as_user("dave") as dave:
        assert {mine, carols} <= set(describe(dave))
        assert mine in describe(dave, ["User:alice"]) and carols not in describe(dave, ["User:alice"])
    described = broker.cli("dave", "--describe", "--owner-principal", "User:carol")
    assert described.returncode == 0, described.stderr
    assert "Total number of tokens : 1" in described.stdout and carols in described.stdout
    removed = broker.acls("--remove", "--force", "--delegation-token", carols)
    assert removed.returncode == 0, removed.stderr
    with broker.as_user("dave") as dave:
        assert carols not in describe(dave)


def test_token_requests_need_an_authenticated_channel_and_create_tokens_for_other_owners(broker):
    with RawClient(broker.address("PLAINTEXT")) as client:  # even for the super user
        assert create(client).error_code == NOT_ALLOWED
    with tls_client(broker.address("SSL"), broker.certs.ca) as client:  # 1-way SSL: User:ANONYMOUS
        assert create(client).error_code == NOT_ALLOWED
    with broker.as_user("alice") as alice:
        refused = create(alice, owner="User:carol")
        assert refused.error_code == TOKEN_AUTHORIZATION_FAILED
        assert (refused.principal_name, refused.token_requester_principal_name) == ("carol", "alice")
        assert create(alice, renewers=["Group:ops"]).error_code == INVALID_PRINCIPAL_TYPE
    broker.add_acl(USER, "User:carol", "User:alice", CREATE_TOKENS)
    with broker.as_user("alice") as alice:
        made = create(alice, owner="User:carol")
        assert made.error_code == 0
        assert (made.principal_name, made.token_requester_principal_name) == ("carol", "alice")
        assert describe(alice)[made.token_id].principal_name == "carol"  # the requester sees it too
        assert (
            alice.request(ApiKey.EXPIRE_DELEGATION_TOKEN, 2, {"hmac": made.hmac, "expiry_time_period": -1}).error_code
            == OWNER_MISMATCH
        )
    with broker.as_user("carol") as carol:
        assert made.token_id in describe(carol)
    hmac_b64 = base64.b64encode(made.hmac).decode()
    topic = broker.create_topic("carol")
    broker.add_acl(TOPIC, topic, "User:carol", WRITE)
    with logged_in(broker.address("SASL_PLAINTEXT"), made.token_id, hmac_b64, token=True) as client:
        # the token acts as its owner carol (not as alice, who asked for it and has no ACL on the topic)
        assert raw_produce(client, topic, build_batch([NewRecord(b"as-carol", None)])) == (0, 0)


def test_without_a_secret_tokens_are_disabled_and_not_advertised(tmp_path):
    ports = {name: free_port() for name in ("PLAINTEXT", "SASL_PLAINTEXT")}
    overrides = {
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
    }
    with BrokerProcess(tmp_path / "data", overrides):
        scram_users(f"127.0.0.1:{ports['PLAINTEXT']}", ["alice"])
        address = f"127.0.0.1:{ports['SASL_PLAINTEXT']}"
        with logged_in(address, "alice", "alice-secret") as alice:
            keys = alice.request(
                ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
            ).api_keys
            assert not TOKEN_APIS & {k.api_key for k in keys}
            assert create(alice).error_code == AUTH_DISABLED  # served all the same, with Kafka's error
            assert alice.request(ApiKey.DESCRIBE_DELEGATION_TOKEN, 3, {"owners": None}).error_code == AUTH_DISABLED
            renewed = alice.request(ApiKey.RENEW_DELEGATION_TOKEN, 2, {"hmac": b"x", "renew_period": -1})
            assert renewed.error_code == AUTH_DISABLED
        with RawClient(address) as client:
            assert scram_login(client, "any-token", "any-hmac", token=True).error_code == SASL_FAILED
