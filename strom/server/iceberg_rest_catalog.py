"""A broker's part in Iceberg's REST protocol: the catalog its translator commits to
(``iceberg.catalog.type``) and the REST catalog it may serve (``iceberg.rest.catalog.listeners``).

The served catalog is the broker's SQL catalog (``iceberg.catalog.uri``, ``iceberg.warehouse``,
the same tables ``iceberg.catalog.type=sql`` writes), so several brokers over one shared SQL
catalog serve one set of tables, each commit guarded by the SQL row's compare-and-set. The
listener is bound during startup (a port in use stops it, naming the key) and serves once the
broker serves; its URL is written to ``<first log dir>/strom.iceberg-catalog`` for tools and
tests. With SASL/SCRAM on the broker's listeners it requires HTTP Basic of a SCRAM user or a
bearer token it issued (strom.iceberg.rest_catalog).
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING

from strom.startup import StartupError

if TYPE_CHECKING:
    from strom.iceberg.rest_catalog_server import RestCatalogServer
    from strom.iceberg.table import CatalogSettings
    from strom.security.scram import ScramCredential
    from strom.server.config import BrokerConfig

log = logging.getLogger("strom.broker")

LISTENERS_KEY = "iceberg.rest.catalog.listeners"


def translator_catalog(config: BrokerConfig) -> CatalogSettings:
    """The catalog the broker's Iceberg topics are committed to."""
    from strom.iceberg.table import CatalogSettings

    if config.iceberg_catalog_type == "rest":
        assert config.iceberg_rest_catalog_uri is not None  # a cross-key rule of the config
        return CatalogSettings.for_rest(
            config.iceberg_rest_catalog_uri,
            config.iceberg_target_file_size_bytes,
            credential=config.iceberg_rest_catalog_credential,
            token=config.iceberg_rest_catalog_token,
            warehouse=config.iceberg_rest_catalog_warehouse,
            ca_location=config.iceberg_rest_catalog_ssl_ca_location,
        )
    return served_catalog(config)


def served_catalog(config: BrokerConfig) -> CatalogSettings:
    """The broker's SQL catalog: what iceberg.catalog.type=sql writes and the REST listener serves."""
    from strom.iceberg.table import CatalogSettings

    return CatalogSettings.for_broker(
        config.log_dirs, config.iceberg_catalog_uri, config.iceberg_warehouse, config.iceberg_target_file_size_bytes
    )


class BrokerRestCatalog:
    """``iceberg.rest.catalog.listeners``: bound by ``bind``, served by ``serve``."""

    def __init__(self, broker_id: int):
        self._broker_id = broker_id
        self._socket: socket.socket | None = None
        self.url: str | None = None
        self.server: RestCatalogServer | None = None

    def bind(self, listener: str, advertised_host: str) -> None:
        from strom.server.http_listener import bind_http_listener

        self._socket, self.url = bind_http_listener(LISTENERS_KEY, listener, advertised_host)

    def serve(self, config: BrokerConfig, credentials: Callable[[str, str], ScramCredential | None]) -> None:
        """Serve the bound listener (nothing without one). ``credentials``: the SCRAM credential of
        a user and mechanism, for logins where a SASL listener offers SCRAM."""
        if self._socket is None or self.url is None:
            return
        from strom.iceberg.rest_catalog import RestCatalogService
        from strom.iceberg.rest_catalog_server import URL_FILE, RestCatalogServer
        from strom.iceberg.table import open_catalog

        scram = tuple(m for m in config.sasl_enabled_mechanisms if m.startswith("SCRAM-"))
        authenticate = None
        if scram and any(config.protocol_of(listener.name).startswith("SASL") for listener in config.listeners):
            from strom.security.passwords import ScramPasswords

            authenticate = ScramPasswords(credentials, scram).check
        context = None
        if self.url.startswith("https://"):
            from strom.security import tls

            context = tls.server_context(lambda key: config.listener_setting("ICEBERG_REST_CATALOG", key))
        from pyiceberg.catalog import MetastoreCatalog

        settings = served_catalog(config)
        try:
            served = open_catalog(settings)
        except Exception as exc:  # SQLAlchemy's own errors (a database that cannot be reached, a bad URL)
            raise StartupError(
                "iceberg.catalog.uri", f"cannot open the SQL catalog {settings.uri} that {LISTENERS_KEY} serves: {exc}"
            ) from None
        assert isinstance(served, MetastoreCatalog)  # pyiceberg's SqlCatalog
        service = RestCatalogService(served, authenticate)
        self.server = RestCatalogServer(service, self._socket, context)
        self.server.start()
        path = os.path.join(config.log_dirs[0], URL_FILE)
        with open(path + ".tmp", "w") as handle:
            handle.write(f"{self.url}\n")
        os.replace(path + ".tmp", path)
        log.info(
            "broker %d serves an Iceberg REST catalog on %s%s",
            self._broker_id,
            self.url,
            " (HTTP Basic or bearer tokens of SCRAM users)" if authenticate is not None else "",
        )

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
        elif self._socket is not None:
            self._socket.close()
