"""A broker asked to stop while its Schema Registry parses a huge schema exits promptly and cleanly:
the parse is interrupted (strom.schemas.parser_thread), not waited for. Before, the interpreter's
exit joined the parsing thread and a broker stopped during a 860 KB .proto took 23 s to exit."""

from __future__ import annotations

import json
import signal
import threading
import time
import urllib.error
import urllib.request

from tests.broker_process import STOP_TIMEOUT_S, BrokerProcess
from tests.integration.test_schema_registry import registry_url

WAIT_S = 60


def huge_proto(messages: int = 1_800) -> str:
    """About 860 KB (under the registry's 1 MB body limit), seconds of CPU to parse."""
    fields = "\n".join(f"  string field_{j} = {j + 1};" for j in range(20))
    return "\n".join(
        ['syntax = "proto3";', "package big;", *(f"message M{i} {{\n{fields}\n}}" for i in range(messages))]
    )


def test_a_broker_stopped_during_a_huge_parse_exits_promptly(tmp_path):
    broker = BrokerProcess(tmp_path / "broker", {"schema.registry.listeners": "http://127.0.0.1:0"}).start()
    try:
        body = json.dumps({"schema": huge_proto(), "schemaType": "PROTOBUF"}).encode()
        request = urllib.request.Request(
            f"{registry_url(broker)}/subjects/big-value/versions",
            data=body,
            method="POST",
            headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
        )
        replies: list[tuple[int, dict] | str] = []

        def register() -> None:
            try:
                with urllib.request.urlopen(request, timeout=WAIT_S) as response:
                    replies.append((response.status, json.loads(response.read())))
            except urllib.error.HTTPError as exc:
                replies.append((exc.code, json.loads(exc.read())))
            except (urllib.error.URLError, ConnectionError) as exc:  # the broker closed the connection first
                replies.append(type(exc).__name__)

        client = threading.Thread(target=register, daemon=True)
        client.start()
        deadline = time.monotonic() + WAIT_S
        while "parsing a PROTOBUF schema of" not in broker.read_log():
            assert time.monotonic() < deadline, broker.read_log()
            time.sleep(0.05)

        broker.process.send_signal(signal.SIGTERM)
        assert broker.process.wait(STOP_TIMEOUT_S) == 0  # clean exit, within the bound tests give a stop
        client.join(WAIT_S)
        shown = broker.read_log()
        assert "stopped the Schema Registry's parsing thread in the middle of a parse" in shown
        assert "did not end within" not in shown and "Traceback" not in shown
        assert "broker 0 stopped" in shown
        # the registration was not made: the client got the registry's 500, or its connection closed
        assert replies in (
            [(500, {"error_code": 50001, "message": "The Schema Registry is shutting down"})],
            ["RemoteDisconnected"],
            ["URLError"],
            ["ConnectionResetError"],
        ), replies
    finally:
        broker.stop()

    # the broker starts again, and the registration was not made
    with BrokerProcess(tmp_path / "broker", {"schema.registry.listeners": "http://127.0.0.1:0"}) as again:
        with urllib.request.urlopen(f"{registry_url(again)}/subjects", timeout=WAIT_S) as response:
            assert json.loads(response.read()) == []
