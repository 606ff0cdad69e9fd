"""A broker's Schema Registry: the registry's view of ``_schemas`` on this broker, made on first
use (when the broker serves the registry, when a topic with schema id validation takes its first
batch, or when an Iceberg topic in a schema mode is translated), and, with
``schema.registry.listeners``, its HTTP front end (strom.server.schema_registry_http).

The listener is bound early in startup, before the broker registers, because the registration
carries its URL (other brokers forward to the registry's writer through it); it serves once the
broker serves. The URL is also written to ``<first log dir>/strom.schema-registry`` for tools and
tests. The broker gives this class what it uses: its id, metadata, replica manager, the
``_schemas`` topic's creator, its config and background-task runner.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from strom.cluster.metadata_cache import MetadataCache

if TYPE_CHECKING:
    from strom.replication.replica_manager import ReplicaManager
    from strom.schemas.registry import SchemaRegistry
    from strom.security.scram import ScramCredential
    from strom.server.config import BrokerConfig
    from strom.server.schema_registry_http import SchemaRegistryHttp
    from strom.storage.log_config import LogConfig

log = logging.getLogger("strom.broker")

SCHEMA_REGISTRY_URL_FILE = "strom.schema-registry"  # in the first log dir: the registry's URL, for tools and tests


class BrokerSchemaRegistry:
    def __init__(
        self,
        broker_id: int,
        metadata: MetadataCache,
        replicas: Callable[[], ReplicaManager],
        ensure_topic: Callable[[], None],
        config: Callable[[], BrokerConfig],
        in_background: Callable[[Coroutine[Any, Any, Any], asyncio.AbstractEventLoop | None], None],
        loop: Callable[[], asyncio.AbstractEventLoop],
        stop: asyncio.Event,
    ):
        """``replicas``, ``config`` and ``loop``: the broker's, read when used (the replica manager
        is made during startup, dynamic configs replace the config)."""
        self._broker_id = broker_id
        self._metadata = metadata
        self._replicas = replicas
        self._ensure_topic = ensure_topic
        self._config = config
        self._in_background = in_background
        self._loop = loop
        self._stop = stop
        self.registry: SchemaRegistry | None = None
        self.http: SchemaRegistryHttp | None = None
        self.url: str | None = None  # with schema.registry.listeners, once bound
        self._socket: socket.socket | None = None

    def bind(self, listener: str, advertised_host: str) -> None:
        """Bind schema.registry.listeners (a port in use stops startup, naming the key); a wildcard
        host is published as ``advertised_host``."""
        from strom.server.http_listener import bind_http_listener

        self._socket, self.url = bind_http_listener("schema.registry.listeners", listener, advertised_host)
        self._socket.setblocking(False)  # served by asyncio

    def service(self) -> SchemaRegistry:
        """The registry's view of _schemas on this broker, made on first use."""
        if self.registry is None:
            from strom.schemas.registry import SchemaRegistry

            self.registry = SchemaRegistry(
                self._broker_id,
                self._replicas(),
                self._metadata,
                ensure_topic=self._ensure_topic,
                write_timeout_s=self._config().offsets_commit_timeout_ms / 1000,
            )
            self.registry.catch_up()
            self._in_background(self.registry.run(self._stop), self._loop())
        return self.registry

    def check_schema_ids(self, topic: str, config: LogConfig, records: bytes) -> dict[int, bytes]:
        """The replica manager's check of a batch for a topic with schema id validation; returns
        the compressed batches' records decompressed, for the log's checks to reuse."""
        from strom.schemas.validation import check_records

        return check_records(topic, config, records, self.service())

    async def serve(self, credentials: Callable[[str, str], ScramCredential | None]) -> None:
        """Serve the bound listener (nothing without one). ``credentials``: the SCRAM credential of
        a user and mechanism, for HTTP basic auth where a SASL listener offers SCRAM."""
        if self._socket is None:
            return
        from strom.server.schema_registry_http import SchemaRegistryHttp

        def registry_url(broker_id: int) -> str | None:
            found = self._metadata.brokers.get(broker_id)
            return found.schema_registry if found is not None else None

        registry = self.service()
        config = self._config()
        scram = tuple(m for m in config.sasl_enabled_mechanisms if m.startswith("SCRAM-"))
        authenticate = None
        if scram and any(config.protocol_of(listener.name).startswith("SASL") for listener in config.listeners):
            from strom.security.passwords import ScramPasswords

            authenticate = ScramPasswords(credentials, scram).check
        server_ssl = client_ssl = None
        if self.url is not None and self.url.startswith("https://"):
            from strom.security import tls

            # the broker's ssl.* keys (keystore, truststore, client auth), as its TLS listeners take them
            def setting(key: str):
                return config.listener_setting("SCHEMA_REGISTRY", key)

            server_ssl, client_ssl = tls.server_context(setting), tls.client_context(setting)
        self.http = SchemaRegistryHttp(
            registry, self._socket, registry_url, authenticate, frozenset(config.super_users), server_ssl, client_ssl
        )
        await self.http.start()
        path = os.path.join(config.log_dirs[0], SCHEMA_REGISTRY_URL_FILE)
        with open(path + ".tmp", "w") as handle:
            handle.write(f"{self.url}\n")
        os.replace(path + ".tmp", path)
        log.info("broker %d serves the Schema Registry on %s", self._broker_id, self.url)

    def close(self) -> None:
        """Stop serving (or close the socket bound when start() failed before serving it) and
        stop the registry's parsing thread, so that a large parse under way does not hold up the
        broker's exit."""
        if self.http is not None:
            self.http.close()
        elif self._socket is not None:
            self._socket.close()
        if self.registry is not None:
            self.registry.close()
