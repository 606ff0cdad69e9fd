"""Delegation tokens in a ZooKeeper cluster: made through one broker, logging in on another.

The token is written to Kafka's znode (/delegation_token/tokens/<tokenId>, Kafka's JSON); every
broker's watch loads it and derives the SCRAM credentials from the shared secret, so the token
logs in everywhere without a restart, and an expiry on any broker ends it on all.
"""

from __future__ import annotations

import base64
import json

from strom.cluster import zookeeper_server
from strom.protocol.api import ApiKey
from tests.cluster.conftest import Cluster, wait_until
from tests.integration.clients import WAIT_S, RawClient
from tests.security.token_login import SASL_FAILED, logged_in, scram_login


def login_error(bootstrap: str, username: str, password: str, token: bool = True) -> int:
    with RawClient(bootstrap) as client:
        return int(scram_login(client, username, password, token=token).error_code)


def test_token_created_on_one_broker_logs_in_on_the_other(tmp_path, zookeeper):
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    overrides = {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "delegation.token.secret.key": "shared-by-every-broker",
    }
    cluster = Cluster(tmp_path / "cluster", zookeeper, 2, overrides)
    sasl: dict[int, str] = {}
    for broker_id, process in cluster.brokers.items():
        port = zookeeper_server.free_port()
        sasl[broker_id] = f"127.0.0.1:{port}"
        process.overrides["listeners"] += f",SASL_PLAINTEXT://127.0.0.1:{port}"
    with cluster:
        admin = AdminClient({"bootstrap.servers": cluster.brokers[0].bootstrap})
        upsert = UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"pw")
        for future in admin.alter_user_scram_credentials([upsert], request_timeout=WAIT_S).values():
            future.result(timeout=WAIT_S)

        for address in sasl.values():  # the credential reaches each broker through its watch
            wait_until(lambda: login_error(address, "alice", "pw", token=False) == 0, 10, f"alice on {address}")
        with logged_in(sasl[0], "alice", "pw") as alice:
            made = alice.request(
                ApiKey.CREATE_DELEGATION_TOKEN,
                3,
                {
                    "owner_principal_type": None,
                    "owner_principal_name": None,
                    "renewers": [{"principal_type": "User", "principal_name": "bob"}],
                    "max_lifetime": -1,
                },
            )
        assert made.error_code == 0
        hmac_b64 = base64.b64encode(made.hmac).decode()
        stored = json.loads(cluster.zk.get(f"/delegation_token/tokens/{made.token_id}")[0])
        assert stored == {
            "version": 3,
            "owner": "User%3Aalice",
            "tokenRequester": "User%3Aalice",
            "renewers": ["User%3Abob"],
            "issueTimestamp": int(made.issue_timestamp.timestamp() * 1000),
            "maxTimestamp": int(made.max_timestamp.timestamp() * 1000),
            "expiryTimestamp": int(made.expiry_timestamp.timestamp() * 1000),
            "tokenId": made.token_id,
        }
        # the HMAC never reaches ZooKeeper: each broker computes it from the secret
        assert hmac_b64 not in json.dumps(stored)

        wait_until(lambda: login_error(sasl[1], made.token_id, hmac_b64) == 0, 10, "the token on broker 1")
        with logged_in(sasl[1], "alice", "pw") as alice:
            expired = alice.request(ApiKey.EXPIRE_DELEGATION_TOKEN, 2, {"hmac": made.hmac, "expiry_time_period": -1})
        assert expired.error_code == 0
        assert not cluster.zk.exists(f"/delegation_token/tokens/{made.token_id}")
        wait_until(lambda: login_error(sasl[0], made.token_id, hmac_b64) == SASL_FAILED, 10, "the expiry on broker 0")
