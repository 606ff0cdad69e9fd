"""The broker's effective config under KIP-226's dynamic broker configs, and its application when
/config/brokers changes (here or on another broker).

The effective config is server.properties (``static``) with the cluster-wide default layer and this
broker's own layer laid over it (strom.server.dynamic_broker_config). ``candidate`` is what an
AlterConfigs is checked against before anything is written: the whole config as it would run,
every TLS listener it would build anew (a keystore that does not load, a certificate that changes
its subject, a listener that changes its security protocol: ConfigError names the key). ``apply``
runs with the layers the metadata cache read: each service gets its part of the new config
(strom.server.reconfiguration: topic defaults, the cleaner, connection limits, listeners' TLS and
SASL, the inter-broker client side), a new OAUTHBEARER validator starts refreshing its keys, and
listeners added or removed are served or closed (``change_listeners``; at startup only once the
others serve). Layers that no longer make a valid config (written by a broker with other files, a
secret this broker cannot decode) are logged and the broker keeps its config, as Kafka does.

Everything else reads ``config`` when it needs a value, so it sees a new one at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine, Iterable, Mapping, MutableMapping
from typing import Any

from strom.security.client import ClientSecurity
from strom.security.listeners import ListenerSecurity, listener_security
from strom.server import dynamic_broker_config, dynamic_listeners, reconfiguration
from strom.server.config import BrokerConfig
from strom.server.connection_limits import ConnectionLimits
from strom.storage.log_config import ConfigError, LogConfig

log = logging.getLogger("strom.broker")


class DynamicConfigApplication:
    def __init__(
        self,
        broker_id: int,
        static: BrokerConfig,
        listener_security: MutableMapping[str, ListenerSecurity],
        inter_broker_security: Callable[[], ClientSecurity | None],
        log_manager: Callable[[], Any],
        set_default_log_config: Callable[[LogConfig], None],
        connection_limits: ConnectionLimits,
        start_key_refreshers: Callable[[Iterable[ListenerSecurity], Iterable[ListenerSecurity]], None],
        change_listeners: Callable[[BrokerConfig, BrokerConfig], Coroutine[Any, Any, None]],
        in_background: Callable[[Coroutine[Any, Any, Any]], None],
        starting: Callable[[], bool],
    ):
        """``listener_security``: each listener's current TLS/SASL settings, replaced in place.
        ``inter_broker_security()`` and ``log_manager()``: the broker's, made by its start() (the
        log manager's ``reconfigure`` takes new topic defaults and cleaner settings).
        ``set_default_log_config``: the controller's topic defaults. ``start_key_refreshers(new,
        serving)``: JWKS refreshers of the new OAUTHBEARER validators. ``change_listeners(old,
        new)``: serves the listeners added, closes those removed. ``starting()``: whether the
        broker is still reading the cluster metadata at startup (listeners change after it)."""
        self.broker_id = broker_id
        self.static = static  # server.properties (and --override) alone
        self.config = static  # the effective config: the dynamic layers laid over ``static``
        self._applied: dict[str, dict[str, str]] = {}  # the dynamic layers ``config`` has
        self._listener_security = listener_security
        self._inter_broker_security = inter_broker_security
        self._log_manager = log_manager
        self._set_default_log_config = set_default_log_config
        self._connection_limits = connection_limits
        self._start_key_refreshers = start_key_refreshers
        self._change_listeners = change_listeners
        self._in_background = in_background
        self._starting = starting

    def candidate(self, broker_configs: dict[str, dict[str, str]], reread: Iterable[str] = ()) -> BrokerConfig:
        """The config this broker would run with under these dynamic configs, and the listeners it
        would build anew for it (those of ``reread`` too); ConfigError names the key at fault (a
        keystore that does not load)."""
        default, own = dynamic_broker_config.stored_configs(broker_configs, self.broker_id)
        config = dynamic_broker_config.effective_config(self.static, default, own)
        reconfiguration.new_listener_security(self.config, config, listener_security)  # builds: checks certificates
        reconfiguration.check_compatible(self._listener_security, self.config, config, reread)
        reconfiguration.new_inter_broker_security(self.config, config)  # its truststore loads
        dynamic_listeners.check(self.config, config)
        for listener in dynamic_listeners.added(self.config, config):
            listener_security(config, listener.name)  # a new TLS listener's keystore loads
        for name in reread:
            listener_security(config, name)
        return config

    def reread_listener_files(self, names: Iterable[str]) -> None:
        """Kafka's reloadUpdatedFilesWithoutConfigChange: a keystore or truststore location set again
        to the same path reads the file again (a certificate renewed in place)."""
        for name in names:
            self._listener_security[name] = listener_security(self.config, name)
            log.info("listener %s: its keystore and truststore files were read again for new connections", name)

    def apply(self, broker_configs: Mapping[str, Mapping[str, str]]) -> None:
        """Run with these dynamic layers (those the metadata cache read); nothing when they are
        the layers already applied."""
        if broker_configs == self._applied:
            return
        configs = {entity: dict(values) for entity, values in broker_configs.items()}
        default, own = dynamic_broker_config.stored_configs(configs, self.broker_id)
        try:
            config = dynamic_broker_config.effective_config(self.static, default, own)
            securities = reconfiguration.new_listener_security(self.config, config, listener_security)
            securities = reconfiguration.keep_validators(self._listener_security, self.config, config, securities)
            inter_broker = reconfiguration.new_inter_broker_security(self.config, config)
        except ConfigError as exc:
            log.error("dynamic broker configs not applied, the broker keeps its current config: %s", exc)
            self._applied = configs
            return
        old, self.config = self.config, config
        self._applied = configs
        serving = list(self._listener_security.values())
        reconfiguration.apply(
            old,
            config,
            log_manager=self._log_manager(),
            set_default_log_config=self._set_default_log_config,
            connection_limits=self._connection_limits,
            listener_security=self._listener_security,
            securities={name: s for name, s in securities.items() if name in self._listener_security},
            inter_broker=(self._inter_broker_security(), inter_broker),
        )
        self._start_key_refreshers(securities.values(), serving)
        if not self._starting() and dynamic_listeners.differ(old, config):  # at startup: once the others serve
            self._in_background(self._change_listeners(old, config))
