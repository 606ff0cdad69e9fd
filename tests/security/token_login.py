"""SCRAM logins over a real socket, with or without the delegation-token extension.

No installed client library sends SCRAM's ``tokenauth=true`` extension (librdkafka, kafka-python
and aiokafka build the client-first message themselves, without extensions), so the tests drive
the exchange with ``scramp`` over strom's RawClient socket: scramp computes the proofs, and the
extension is appended to the client-first message and to the client-first-bare that the proofs
sign, exactly where Kafka's Java client puts it.
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

from scramp import ScramClient

from strom.protocol.api import ApiKey
from tests.integration.clients import RawClient

SASL_FAILED = 58


def tls_client(bootstrap: str, ca: Path) -> RawClient:
    """A RawClient whose socket speaks TLS (the broker's certificate is for 127.0.0.1 and localhost)."""
    client = RawClient(bootstrap)
    client.sock = ssl.create_default_context(cafile=str(ca)).wrap_socket(client.sock, server_hostname="127.0.0.1")
    return client


def scram_login(
    client: RawClient, username: str, password: str, mechanism: str = "SCRAM-SHA-512", token: bool = False
) -> Any:
    """SaslHandshake v1 and SaslAuthenticate v2 rounds; the last SaslAuthenticate response (error_code 0: logged in)."""
    assert client.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism}).error_code == 0
    scram = ScramClient([mechanism], username, password)
    first = scram.get_client_first()
    if token:
        first += ",tokenauth=true"
        scram.client_first_bare += ",tokenauth=true"
    answer = client.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": first.encode()})
    if answer.error_code != 0:
        return answer
    scram.set_server_first(answer.auth_bytes.decode())
    answer = client.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": scram.get_client_final().encode()})
    if answer.error_code == 0:
        scram.set_server_final(answer.auth_bytes.decode())  # the broker proved it knows the credential too
    return answer


def logged_in(bootstrap: str, username: str, password: str, token: bool = False, ca: Path | None = None) -> RawClient:
    """A connection logged in with SCRAM-SHA-512 (asserts the login succeeded)."""
    client = tls_client(bootstrap, ca) if ca is not None else RawClient(bootstrap)
    answer = scram_login(client, username, password, token=token)
    assert answer.error_code == 0, answer.error_message
    return client
