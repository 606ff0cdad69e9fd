"""The application of KIP-226 dynamic broker configs built from its collaborators alone, no broker:
a real log manager over a tmp dir, real connection limits, each listener's real TLS settings from
certificates made at test time; what it tells the controller and the listeners is recorded."""

from __future__ import annotations

import pytest

from strom.metrics.stats import BrokerStats
from strom.security.listeners import listener_security
from strom.server.config import BrokerConfig
from strom.server.connection_limits import ConnectionLimits
from strom.server.dynamic_broker_config import DEFAULT_ENTITY
from strom.server.dynamic_config_application import DynamicConfigApplication
from strom.storage.log_config import ConfigError
from strom.storage.log_manager import LogManager
from tests.tls_certs import make_certificates


class Parts:
    def __init__(self, tmp_path, static: BrokerConfig, starting: bool = False):
        self.log_manager = LogManager([str(tmp_path / "logs")], static.log_config())
        self.limits = ConnectionLimits(static, static.inter_broker_listener_name, static.listener_limit, BrokerStats())
        self.security = {listener.name: listener_security(static, listener.name) for listener in static.listeners}
        self.controller_defaults: list = []
        self.listener_changes: list = []
        self.refreshed: list = []
        self.background: list = []
        self.starting = starting

        async def change_listeners(old: BrokerConfig, new: BrokerConfig) -> None:
            self.listener_changes.append(([lst.name for lst in old.listeners], [lst.name for lst in new.listeners]))

        self.configs = DynamicConfigApplication(
            0,
            static,
            self.security,
            lambda: None,  # no inter-broker TLS or SASL
            lambda: self.log_manager,
            self.controller_defaults.append,
            self.limits,
            lambda new, serving: self.refreshed.append(list(new)),
            change_listeners,
            self.background.append,
            lambda: self.starting,
        )

    def close(self) -> None:
        for work in self.background:
            work.close()  # never awaited here: the coroutine is what the broker would run
        self.log_manager.shutdown()


def test_topic_defaults_and_connection_limits_apply_once_per_change(tmp_path):
    static = BrokerConfig.from_mapping({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "logs")})
    parts = Parts(tmp_path, static)
    configs = parts.configs
    try:
        assert configs.config is static
        layers = {DEFAULT_ENTITY: {"log.retention.ms": "60000"}, "0": {"max.connections.per.ip": "1"}}
        configs.apply(layers)
        assert configs.config.log_retention_ms == 60000 and configs.static is static
        assert parts.log_manager.default_config.retention_ms == 60000  # every topic without its own override
        assert [defaults.retention_ms for defaults in parts.controller_defaults] == [60000]
        assert parts.limits.admit("PLAINTEXT", "10.0.0.1").refused is None
        assert "max.connections.per.ip" in (parts.limits.admit("PLAINTEXT", "10.0.0.1").refused or "")

        configs.apply({entity: dict(values) for entity, values in layers.items()})  # the same layers read again
        assert len(parts.controller_defaults) == 1  # nothing applied twice

        configs.apply({"1": {"log.retention.ms": "1"}})  # another broker's own layer: the defaults come back
        assert configs.config.log_retention_ms == static.log_retention_ms
        assert parts.log_manager.default_config.retention_ms == static.log_retention_ms
        assert parts.listener_changes == [] and parts.background == []
    finally:
        parts.close()


def test_layers_that_make_no_valid_config_leave_the_config_as_it_was(tmp_path):
    static = BrokerConfig.from_mapping({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "logs")})
    parts = Parts(tmp_path, static)
    try:
        parts.configs.apply({"0": {"log.retention.ms": "not a number"}})
        assert parts.configs.config is static and parts.controller_defaults == []
        with pytest.raises(ConfigError) as refused:  # an AlterConfigs checked against it is refused, naming the key
            parts.configs.candidate({"0": {"log.retention.ms": "not a number"}})
        assert refused.value.key == "log.retention.ms"
    finally:
        parts.close()


def test_a_tls_listeners_new_keystore_replaces_its_security_and_a_missing_one_is_refused(tmp_path):
    certs = make_certificates(tmp_path / "certs")
    static = BrokerConfig.from_mapping(
        {
            "listeners": "SECURE://127.0.0.1:0",
            "listener.security.protocol.map": "SECURE:SSL",
            "inter.broker.listener.name": "SECURE",
            "ssl.keystore.location": str(certs.broker),
            "log.dirs": str(tmp_path / "logs"),
        }
    )
    parts = Parts(tmp_path, static)
    try:
        serving = parts.security["SECURE"]
        missing = {"0": {"listener.name.secure.ssl.keystore.location": str(tmp_path / "gone.pem")}}
        with pytest.raises(ConfigError) as refused:
            parts.configs.candidate(missing)
        assert refused.value.key == "listener.name.secure.ssl.keystore.location"
        assert parts.security["SECURE"] is serving

        renewed = make_certificates(tmp_path / "renewed")
        parts.configs.apply({"0": {"listener.name.secure.ssl.keystore.location": str(renewed.broker)}})
        assert parts.security["SECURE"] is not serving and parts.security["SECURE"].ssl_context is not None
        assert parts.refreshed == [[parts.security["SECURE"]]]  # its OAUTHBEARER keys would refresh from now on

        rotated = parts.security["SECURE"]
        parts.configs.reread_listener_files(["SECURE"])  # the same path set again: the file is read again
        assert parts.security["SECURE"] is not rotated
    finally:
        parts.close()


def test_listeners_change_once_the_broker_serves(tmp_path):
    static = BrokerConfig.from_mapping({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "logs")})
    extra = {
        "listeners": "PLAINTEXT://127.0.0.1:0,EXTRA://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTRA:PLAINTEXT",
    }
    starting = Parts(tmp_path / "starting", static, starting=True)
    try:
        starting.configs.apply({"0": extra})  # read at startup: the broker changes them once the others serve
        assert [lst.name for lst in starting.configs.config.listeners] == ["PLAINTEXT", "EXTRA"]
        assert starting.background == []
    finally:
        starting.close()

    parts = Parts(tmp_path / "serving", static)
    try:
        parts.configs.apply({"0": extra})
        assert len(parts.background) == 1  # the change runs as background work
        with pytest.raises(StopIteration):
            parts.background.pop().send(None)
        assert parts.listener_changes == [(["PLAINTEXT"], ["PLAINTEXT", "EXTRA"])]
    finally:
        parts.close()
