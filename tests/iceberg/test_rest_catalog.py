"""strom's Iceberg REST catalog (iceberg.rest.catalog.listeners) through pyiceberg's own RestCatalog
client: namespaces and tables made, loaded, committed, renamed and dropped; two writers racing on
one table get one commit and one 409 that the loser's retry answers; the spec's error bodies; a
malformed body gets 400 and changes nothing. The client side was tested against strom's server
only (no other Iceberg REST catalog server can be installed here)."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest
import requests
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import (
    BadRequestError,
    CommitFailedException,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from tests.broker_process import BrokerProcess

SCHEMA = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "name", StringType(), required=False))


def catalog_url(data_dir: Path) -> str:
    return (data_dir / "strom.iceberg-catalog").read_text().strip()


@pytest.fixture
def served(tmp_path):
    """(a broker serving the REST catalog over its SQL catalog, the catalog's URL)."""
    data = tmp_path / "data"
    with BrokerProcess(data, {"iceberg.rest.catalog.listeners": "http://127.0.0.1:0"}) as broker:
        yield broker, catalog_url(data)


def rows(table) -> list[tuple]:
    return sorted((r["id"], r["name"]) for r in table.scan().to_arrow().to_pylist())


def test_tables_made_committed_renamed_and_dropped_through_the_rest_catalog(served):
    _broker, url = served
    catalog = RestCatalog("strom", uri=url)
    catalog.create_namespace("shop", {"owner": "alice"})
    with pytest.raises(NamespaceAlreadyExistsError):
        catalog.create_namespace("shop")
    assert catalog.list_namespaces() == [("shop",)]
    assert catalog.load_namespace_properties("shop") == {"owner": "alice"}
    summary = catalog.update_namespace_properties("shop", removals={"owner", "absent"}, updates={"team": "data"})
    assert (summary.removed, summary.updated, summary.missing) == (["owner"], ["team"], ["absent"])
    assert catalog.namespace_exists("shop") and not catalog.namespace_exists("nowhere")

    table = catalog.create_table(("shop", "orders"), SCHEMA)
    with pytest.raises(TableAlreadyExistsError):
        catalog.create_table(("shop", "orders"), SCHEMA)
    table.append(pa.table({"id": [1, 2], "name": ["a", "b"]}, schema=SCHEMA.as_arrow()))
    table.append(pa.table({"id": [3], "name": ["c"]}, schema=SCHEMA.as_arrow()))
    again = catalog.load_table(("shop", "orders"))
    assert rows(again) == [(1, "a"), (2, "b"), (3, "c")]
    assert len(again.history()) == 2
    with again.update_schema() as update:
        update.add_column("price", LongType())
    assert catalog.load_table(("shop", "orders")).schema().column_names == ["id", "name", "price"]

    # a create transaction: staged on the server, made by its commit
    transaction = catalog.create_table_transaction(("shop", "staged"), SCHEMA)
    transaction.append(pa.table({"id": [7], "name": ["x"]}, schema=SCHEMA.as_arrow()))
    assert not catalog.table_exists(("shop", "staged"))
    transaction.commit_transaction()
    assert rows(catalog.load_table(("shop", "staged"))) == [(7, "x")]

    assert catalog.list_tables("shop") == [("shop", "orders"), ("shop", "staged")]
    # a table's metadata registered under another name: both read the same snapshot
    location = catalog.load_table(("shop", "staged")).metadata_location
    registered = catalog.register_table(("shop", "registered"), location)
    assert rows(registered) == [(7, "x")]
    catalog.drop_table(("shop", "registered"))
    catalog.rename_table(("shop", "staged"), ("shop", "moved"))
    assert catalog.table_exists(("shop", "moved")) and not catalog.table_exists(("shop", "staged"))
    with pytest.raises(NamespaceNotEmptyError):
        catalog.drop_namespace("shop")
    catalog.drop_table(("shop", "moved"))
    catalog.purge_table(("shop", "orders"))
    with pytest.raises(NoSuchTableError):
        catalog.load_table(("shop", "orders"))
    catalog.drop_namespace("shop")
    with pytest.raises(NoSuchNamespaceError):
        catalog.list_tables("shop")


def test_racing_writers_get_one_commit_and_one_409_that_a_retry_answers(served):
    _broker, url = served
    first, second = RestCatalog("a", uri=url), RestCatalog("b", uri=url)
    first.create_namespace("race")
    # pyiceberg's own retries off (as strom's tables have them): the 409 reaches the caller
    made = first.create_table(("race", "t"), SCHEMA, properties={"commit.retry.num-retries": "0"})
    made.append(pa.table({"id": [0], "name": ["base"]}, schema=SCHEMA.as_arrow()))
    # both plan from the same snapshot; the second commit to arrive is refused
    mine, theirs = first.load_table(("race", "t")), second.load_table(("race", "t"))
    mine.append(pa.table({"id": [1], "name": ["mine"]}, schema=SCHEMA.as_arrow()))
    with pytest.raises(CommitFailedException):
        with theirs.transaction() as tx:
            tx.overwrite(pa.table({"id": [2], "name": ["theirs"]}, schema=SCHEMA.as_arrow()))
    assert rows(first.load_table(("race", "t"))) == [(0, "base"), (1, "mine")]

    # many threads appending at once, each retrying from a fresh load on 409: no commit lost
    lost: list[int] = []

    def append(i: int) -> None:
        catalog = RestCatalog(f"w{i}", uri=url)
        for _attempt in range(50):
            table = catalog.load_table(("race", "t"))
            try:
                with table.transaction() as tx:
                    tx.append(pa.table({"id": [100 + i], "name": [f"w{i}"]}, schema=SCHEMA.as_arrow()))
                return
            except CommitFailedException:
                lost.append(i)
        raise AssertionError(f"writer {i} never committed")

    threads = [threading.Thread(target=append, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert all(not t.is_alive() for t in threads)
    got = rows(first.load_table(("race", "t")))
    assert got == [(0, "base"), (1, "mine")] + [(100 + i, f"w{i}") for i in range(4)]


def test_errors_are_the_specs_bodies_and_a_malformed_body_changes_nothing(served):
    _broker, url = served
    catalog = RestCatalog("strom", uri=url)
    catalog.create_namespace("ns")
    table = catalog.create_table(("ns", "t"), SCHEMA)
    before = catalog.load_table(("ns", "t")).metadata_location

    missing = requests.get(f"{url}/v1/namespaces/ns/tables/absent", timeout=10)
    assert missing.status_code == 404
    assert missing.json() == {
        "error": {"message": missing.json()["error"]["message"], "type": "NoSuchTableException", "code": 404}
    }
    assert requests.get(f"{url}/v1/namespaces/none", timeout=10).json()["error"]["type"] == "NoSuchNamespaceException"
    assert requests.head(f"{url}/v1/namespaces/ns/tables/absent", timeout=10).status_code == 404
    assert requests.head(f"{url}/v1/namespaces/ns/tables/t", timeout=10).status_code == 204
    exists = requests.post(f"{url}/v1/namespaces", json={"namespace": ["ns"]}, timeout=10)
    assert (exists.status_code, exists.json()["error"]["type"]) == (409, "AlreadyExistsException")

    for body in (
        b"{not json",
        b"[]",
        b'{"identifier": {"namespace": ["ns"], "name": "t"}, "updates": [{"action": 7}]}',
    ):
        bad = requests.post(f"{url}/v1/namespaces/ns/tables/t", data=body, timeout=10)
        assert bad.status_code == 400, bad.text
        assert bad.json()["error"]["type"] == "BadRequestException" and bad.json()["error"]["code"] == 400
    unknown_action = requests.post(f"{url}/v1/namespaces/ns/tables/t", data=body, timeout=10).json()["error"]
    assert "action" in unknown_action["message"]  # the field at fault is named
    bad = requests.post(f"{url}/v1/namespaces", data=b'{"namespace": "flat"}', timeout=10)
    assert bad.status_code == 400
    assert requests.post(f"{url}/v1/namespaces/ns/tables", data=b'{"name": "u"}', timeout=10).status_code == 400
    assert catalog.list_tables("ns") == [("ns", "t")]
    assert catalog.list_namespaces() == [("ns",)]
    assert catalog.load_table(("ns", "t")).metadata_location == before == table.metadata_location
    other = requests.post(
        f"{url}/v1/namespaces/ns/tables/t",
        json={"identifier": {"namespace": ["ns"], "name": "u"}, "updates": []},
        timeout=10,
    )
    assert other.status_code == 400 and "the path" in other.json()["error"]["message"]

    # a requirement that does not hold: 409, the table as it was
    stale = {
        "identifier": {"namespace": ["ns"], "name": "t"},
        "requirements": [{"type": "assert-table-uuid", "uuid": "00000000-0000-0000-0000-000000000000"}],
        "updates": [{"action": "set-properties", "updates": {"x": "y"}}],
    }
    refused = requests.post(f"{url}/v1/namespaces/ns/tables/t", json=stale, timeout=10)
    assert (refused.status_code, refused.json()["error"]["type"]) == (409, "CommitFailedException")
    assert "x" not in catalog.load_table(("ns", "t")).properties
    # the spec's identifier is optional in a commit's body: the path names the table
    done = requests.post(
        f"{url}/v1/namespaces/ns/tables/t",
        json={"updates": [{"action": "set-properties", "updates": {"x": "y"}}]},
        timeout=10,
    )
    assert done.status_code == 200 and done.json()["metadata"]["properties"]["x"] == "y"
    assert catalog.load_table(("ns", "t")).properties["x"] == "y"
    with pytest.raises(BadRequestError):  # the client reads the spec's 400 as its BadRequestError
        catalog.create_namespace(("bad", ""))
    # Java's client reports scan and commit metrics: taken, not kept
    report = {"report-type": "commit-report", "table-name": "ns.t", "snapshot-id": 1, "sequence-number": 1}
    assert requests.post(f"{url}/v1/namespaces/ns/tables/t/metrics", json=report, timeout=10).status_code == 204
    assert requests.get(f"{url}/v2/config", timeout=10).status_code == 404
    # a body cut short by a client that goes away is not acted on, and the server serves on
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as cut:
        cut.sendall(b'POST /v1/namespaces HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n\r\n{"namespace": ["cut"]}')
    assert catalog.list_namespaces() == [("ns",)]
    chunked = requests.post(f"{url}/v1/namespaces", data=iter([b'{"namespace": ["c"]}']), timeout=10)
    assert chunked.status_code == 411 and catalog.list_namespaces() == [("ns",)]
    assert requests.put(f"{url}/v1/namespaces", timeout=10).status_code == 405


def test_connections_past_the_limit_get_503_and_a_freed_slot_serves_again(served):
    from strom.iceberg.rest_catalog_server import MAX_CONNECTIONS

    _broker, url = served
    host, port = url.removeprefix("http://").split(":")
    idle = [socket.create_connection((host, int(port)), timeout=10) for _ in range(MAX_CONNECTIONS)]
    try:
        # accepted in order: the idle ones hold every slot (for IDLE_TIMEOUT_S) by the time this one is
        with socket.create_connection((host, int(port)), timeout=10) as extra:
            answer = b""
            while chunk := extra.recv(4096):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 503 ")
        assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]["type"] == "ServiceUnavailableException"
        idle.pop().close()
        deadline = time.monotonic() + 30
        while True:
            try:
                if requests.get(f"{url}/v1/config", timeout=10).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            assert time.monotonic() < deadline, "no slot was freed"
            time.sleep(0.1)
    finally:
        for sock in idle:
            sock.close()
