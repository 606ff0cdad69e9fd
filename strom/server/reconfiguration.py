"""Applying a new effective broker config without a restart (KIP-226's reconfigurables).

Each service that has a concept behind a dynamic key is told, with the collaborators it needs and
nothing else:

- the log manager: the cluster-wide topic defaults (``log.retention.ms``, ``log.segment.bytes``,
  ``message.max.bytes`` ...) for every topic without its own override, and the cleaner's settings
  (``log.cleaner.threads``, its I/O rate and buffers);
- the controller: the same topic defaults, against which it validates topic configs;
- the connection limits: ``max.connections*`` and ``listener.name.<l>.max.connection*``;
- each TLS or SASL listener whose settings changed: a new ``ListenerSecurity`` (a new SSLContext
  from the new keystore, new SASL users). New connections take it; connections already open keep
  the context they were accepted with (certificate rotation);
- the broker's client side towards the other brokers (replica fetchers, transaction markers),
  when the inter-broker listener's settings changed: its truststore and login, for the
  connections it makes from then on.

Everything else reads ``broker.config`` when it needs a value, so it sees the new one at once.
Keys that strom accepts but has nothing behind (thread counts: a strom broker is one asyncio
process) are stored and described only; docs/ says which.
"""

from __future__ import annotations

import dataclasses
import logging
import ssl
from collections.abc import Callable, Iterable, Mapping, MutableMapping

from strom.security import tls
from strom.security.client import ClientSecurity
from strom.security.listeners import ListenerSecurity, inter_broker_security
from strom.server.config import BrokerConfig
from strom.server.connection_limits import ConnectionLimits
from strom.server.dynamic_broker_config import listeners_changed
from strom.storage.cleaner import CleanerSettings
from strom.storage.log_config import ConfigError, LogConfig

log = logging.getLogger("strom.config")


def cleaner_settings(config: BrokerConfig) -> CleanerSettings:
    return CleanerSettings(
        threads=config.log_cleaner_threads,
        io_max_bytes_per_second=config.log_cleaner_io_max_bytes_per_second,
        dedupe_buffer_size=config.log_cleaner_dedupe_buffer_size,
        io_buffer_size=config.log_cleaner_io_buffer_size,
        io_buffer_load_factor=config.log_cleaner_io_buffer_load_factor,
    )


def new_listener_security(
    old: BrokerConfig, new: BrokerConfig, build: Callable[[BrokerConfig, str], ListenerSecurity]
) -> dict[str, ListenerSecurity]:
    """The listeners whose TLS or SASL settings changed, built anew (ConfigError names a bad key)."""
    return {name: build(new, name) for name in listeners_changed(old, new) if new.protocol_of(name) != "PLAINTEXT"}


def keep_validators(
    current: Mapping[str, ListenerSecurity], old: BrokerConfig, new: BrokerConfig, built: dict[str, ListenerSecurity]
) -> dict[str, ListenerSecurity]:
    """``built`` with each listener's OAUTHBEARER validator kept where its settings did not change:
    the validator in service holds the JWKS keys its refresher has read (a new one starts empty)."""
    kept = {}
    for name, security in built.items():
        serving = current.get(name)
        unchanged = _oauthbearer_settings(old, name) == _oauthbearer_settings(new, name)
        if serving is not None and serving.oauthbearer is not None and security.oauthbearer is not None and unchanged:
            security = dataclasses.replace(security, oauthbearer=serving.oauthbearer)
        kept[name] = security
    return kept


def _oauthbearer_settings(config: BrokerConfig, name: str) -> dict[str, str]:
    prefix = f"listener.name.{name.lower()}."
    return {
        key: value
        for key, value in config.originals.items()
        if "oauthbearer" in key.lower() and (not key.startswith("listener.name.") or key.lower().startswith(prefix))
    }


def check_compatible(
    current: Mapping[str, ListenerSecurity], old: BrokerConfig, new: BrokerConfig, reread: Iterable[str] = ()
) -> None:
    """Kafka's SslFactory.validateReconfiguration for the TLS listeners a change touches (and those
    whose files are read again): the new keystore's certificate keeps the subject and alternative
    names of the one in service, and a listener without a truststore does not get one.
    ConfigError names the key."""
    for name in sorted(set(listeners_changed(old, new)) | set(reread)):
        serving = current.get(name)
        if serving is None or serving.certificate is None or new.protocol_of(name) not in ("SSL", "SASL_SSL"):
            continue

        def before(key: str, name: str = name):
            return old.listener_setting(name, key)

        def after(key: str, name: str = name):
            return new.listener_setting(name, key)

        if tls.keystore_identity(after) != serving.certificate:
            raise ConfigError(
                after("ssl.keystore.location")[1],
                f"{_SSL_FACTORY}: Keystore DistinguishedName or SubjectAltNames do not match",
            )
        if not tls.has_truststore(before) and tls.has_truststore(after):
            raise ConfigError(
                after("ssl.truststore.location")[1],
                f"{_SSL_FACTORY}: Cannot add SSL truststore to an existing listener for which no truststore was configured.",
            )


_SSL_FACTORY = "Validation of dynamic config update of SSLFactory failed"


def serve_current_context(listener_security: MutableMapping[str, ListenerSecurity], name: str) -> None:
    """Make the listener's first SSLContext hand each new handshake to the listener's current one.

    asyncio serves a listener with the context it was started with; its SNI callback runs before
    the certificate is chosen, for every client hello (with or without a server name), and may swap
    the connection's context. A connection keeps the context it was accepted with.
    """
    first = listener_security[name].ssl_context
    if first is None:
        return

    def current(connection: ssl.SSLObject, _server_name: str | None, context: ssl.SSLContext) -> None:
        latest = listener_security[name].ssl_context
        if latest is not None and latest is not context:
            connection.context = latest

    first.sni_callback = current


def apply(
    old: BrokerConfig,
    new: BrokerConfig,
    *,
    log_manager,
    set_default_log_config: Callable[[LogConfig], None],
    connection_limits: ConnectionLimits,
    listener_security: MutableMapping[str, ListenerSecurity],
    securities: dict[str, ListenerSecurity],
    inter_broker: tuple[ClientSecurity | None, ClientSecurity | None] = (None, None),
) -> None:
    """Tell each service its part of ``new``; ``securities`` are the listeners built anew for it,
    ``inter_broker`` the broker's client side towards the others and what replaces it in place
    (None: unchanged)."""
    defaults = new.log_config()
    if defaults != old.log_config() or cleaner_settings(new) != cleaner_settings(old):
        log_manager.reconfigure(defaults, cleaner_settings(new))
        set_default_log_config(defaults)
    connection_limits.reconfigure(new, new.listener_limit)
    for name, security in securities.items():
        listener_security[name] = security
        log.info("listener %s: new connections use its new TLS/SASL settings; open ones keep theirs", name)
    current, rebuilt = inter_broker
    if current is not None and rebuilt is not None:
        current.take(rebuilt)
        log.info("connections to other brokers made from now on use the new inter-broker TLS/SASL settings")


def new_inter_broker_security(old: BrokerConfig, new: BrokerConfig) -> ClientSecurity | None:
    """The client side towards the other brokers built anew when the inter-broker listener's
    settings changed (its truststore, this broker's login); None when they did not."""
    if new.inter_broker_listener_name not in listeners_changed(old, new):
        return None
    return inter_broker_security(new)
