"""A broker's Schema Registry built from its collaborators alone, no broker: a real replica manager
over logs in a tmp dir (tests/replication/replicas.py) leads _schemas, and the registry's HTTP
listener is bound and served on 127.0.0.1 port 0 and asked over HTTP."""

from __future__ import annotations

import asyncio
import json
import socket
import urllib.request
from pathlib import Path

import pytest

from strom.schemas.records import SCHEMAS_TOPIC
from strom.server.broker_schema_registry import SCHEMA_REGISTRY_URL_FILE, BrokerSchemaRegistry
from strom.server.config import BrokerConfig
from strom.startup import StartupError
from tests.replication.replicas import Replicas, make_replicas


def registry_of(replicas: Replicas, config: BrokerConfig, stop: asyncio.Event, tasks: list) -> BrokerSchemaRegistry:
    def in_background(work, loop=None) -> None:
        tasks.append((loop or asyncio.get_running_loop()).create_task(work))

    return BrokerSchemaRegistry(
        1,
        replicas.metadata,
        lambda: replicas.manager,
        lambda: None,  # _schemas exists: the replicas lead it
        lambda: config,
        in_background,
        asyncio.get_running_loop,
        stop,
    )


def test_the_registry_is_bound_served_and_answers_over_http(tmp_path: Path):
    replicas = make_replicas(tmp_path)
    replicas.lead(SCHEMAS_TOPIC)
    log_dir = tmp_path / "data"
    log_dir.mkdir()
    config = BrokerConfig.from_mapping({"log.dir": str(log_dir), "schema.registry.listeners": "http://0.0.0.0:0"})

    async def scenario() -> tuple[str, object, str]:
        stop, tasks = asyncio.Event(), []
        registry = registry_of(replicas, config, stop, tasks)
        registry.bind(config.schema_registry_listeners, "127.0.0.1")  # a wildcard is published as this host
        assert registry.url is not None and registry.url.startswith("http://127.0.0.1:")
        await registry.serve(lambda user, mechanism: None)
        assert registry.service() is registry.registry  # made once

        def subjects() -> bytes:
            with urllib.request.urlopen(f"{registry.url}/subjects", timeout=10) as response:
                return response.read()

        body = await asyncio.wait_for(asyncio.get_running_loop().run_in_executor(None, subjects), 15)
        registry.close()
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 10)
        return registry.url, json.loads(body), (log_dir / SCHEMA_REGISTRY_URL_FILE).read_text().strip()

    url, subjects, written = asyncio.run(scenario())
    assert subjects == []
    assert written == url  # for tools and tests: <first log dir>/strom.schema-registry


def test_a_port_in_use_stops_startup_naming_the_key(tmp_path: Path):
    replicas = make_replicas(tmp_path)
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    config = BrokerConfig.from_mapping({"schema.registry.listeners": f"http://127.0.0.1:{port}"})

    async def scenario() -> None:
        registry = registry_of(replicas, config, asyncio.Event(), [])
        registry.bind(config.schema_registry_listeners, "127.0.0.1")

    try:
        with pytest.raises(StartupError) as refused:
            asyncio.run(scenario())
    finally:
        taken.close()
    assert refused.value.key == "schema.registry.listeners"
    assert f"127.0.0.1:{port}" in str(refused.value)
