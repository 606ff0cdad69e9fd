"""Dynamic broker configs (KIP-226): checked, stored and laid over server.properties.

Stored as Kafka stores them in ZooKeeper mode, in /config/brokers/<id> (one broker) or
/config/brokers/<default> (every broker), ``{"version":1,"config":{...}}``; every broker watches
them through its metadata cache and builds its effective config from three layers, highest first:
its own dynamic configs, the cluster default, server.properties (see ``effective_config``).

What AlterConfigs may set follows Kafka's DynamicBrokerConfig.validateConfigs, in its order, with
its messages (strom.server.dynamic_config_keys holds the table of keys):

1. a read-only key: "Cannot update these configs dynamically: Set(...)";
2. a keystore or truststore key without the listener prefix: "These security configs can be
   dynamically updated only per-listener using the listener prefix: Set(...)";
3. a value that does not parse as its key's type;
4. a per-broker key on the cluster default: "Cannot update these configs at default cluster level,
   broker id must be specified: Set(...)";
5. a secret without ``password.encoder.secret``, or on the default entity;
6. the resulting config as a whole (the same checks as at startup, the listener's TLS context
   built from its new keystore).

Each refusal is INVALID_REQUEST "Invalid config value for resource ConfigResource(type=BROKER,
name='N'): ...", as Kafka's ZkAdminManager answers (Kafka maps a broker config that fails
validation to INVALID_REQUEST, not INVALID_CONFIG: KAFKA-13609). A name Kafka does not know is a
custom config, stored as given, as Kafka does.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from strom.cluster import model
from strom.cluster.store import NodeExistsError
from strom.protocol.errors import InvalidConfigError, InvalidRequestError
from strom.security.password_encoder import PasswordEncoder, PasswordEncoderError
from strom.server.config import BrokerConfig, accepts_key, broker_field
from strom.server.dynamic_config_keys import (
    DYNAMIC_TYPES,
    LISTENER_ONLY_KEYS,
    PER_BROKER_MODE,
    READ_ONLY_MODE,
    base_key,
    is_password,
    listener_key,
    update_mode,
)
from strom.storage.log_config import ConfigError, parse_bool, parse_float, parse_int

log = logging.getLogger("strom.config")

DEFAULT_ENTITY = model.DEFAULT_BROKER_ENTITY
_INT_RANGES = {"int": (-(2**31), 2**31 - 1), "short": (-(2**15), 2**15 - 1), "long": (-(2**63), 2**63 - 1)}


def _scala_set(keys) -> str:
    return f"Set({', '.join(sorted(keys))})"


class DynamicConfigRefused(Exception):
    """A change Kafka refuses; the handler words it for the resource."""


def check_type(key: str, value: str) -> None:
    """A value of a key strom has no field for, parsed as Kafka's ConfigDef parses its type."""
    kind = DYNAMIC_TYPES.get(base_key(key))
    try:
        if kind in _INT_RANGES:
            low, high = _INT_RANGES[kind]
            parse_int(key, value, low, high)
        elif kind == "double":
            parse_float(key, value, float("-inf"), float("inf"))
        elif kind == "boolean":
            parse_bool(key, value)
    except ConfigError:
        raise DynamicConfigRefused(
            f"Invalid value {value} for configuration {key}: Not a number of type {str(kind).upper()}"
            if kind != "boolean"
            else f"Invalid value {value} for configuration {key}: Expected value to be either true or false"
        ) from None


def check_keys(changes: Mapping[str, str | None], per_broker: bool) -> None:
    """Steps 1 to 4 of the module's list: which keys may be set where, and their types."""
    read_only = [k for k in changes if update_mode(k) == READ_ONLY_MODE]
    if read_only:
        raise DynamicConfigRefused(f"Cannot update these configs dynamically: {_scala_set(read_only)}")
    unprefixed = [k for k in changes if k in LISTENER_ONLY_KEYS]
    if unprefixed:
        raise DynamicConfigRefused(
            "These security configs can be dynamically updated only per-listener using the listener prefix: "
            + _scala_set(unprefixed)
        )
    for key, value in changes.items():
        if value is not None:
            check_type(key, value)
    if not per_broker:
        per_broker_keys = [k for k in changes if update_mode(k) == PER_BROKER_MODE]
        if per_broker_keys:
            raise DynamicConfigRefused(
                "Cannot update these configs at default cluster level, broker id must be specified: "
                + _scala_set(per_broker_keys)
            )


SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3  # IncrementalAlterConfigs' operations


def apply_operations(current: Mapping[str, str], operations) -> dict[str, str | None]:
    """IncrementalAlterConfigs on a broker's stored configs, as Kafka's prepareIncrementalConfigs:
    SET and DELETE any key, APPEND and SUBTRACT list keys only (INVALID_CONFIG otherwise), starting
    from the stored value or else the key's default. ``operations``: (key, operation, value)."""
    changes: dict[str, str | None] = {}
    for key, op, value in operations:
        if op == DELETE:
            changes[key] = None
            continue
        if op == SET:
            changes[key] = value
            continue
        verb = "append" if op == APPEND else "subtract"
        if _kind_of(key) != "list":
            raise InvalidConfigError(f"Config value {verb} is not allowed for config key: {key}")
        before = changes.get(key, current.get(key, _default_text(key)))
        items = [item for item in (before or "").split(",") if item]
        given = [item for item in (value or "").split(",") if item]
        if op == APPEND:
            items += [item for item in given if item not in items]
        else:
            items = [item for item in items if item not in given]
        changes[key] = ",".join(items)
    return changes


def _kind_of(key: str) -> str | None:
    base = base_key(key)
    field = broker_field(base)
    if field is not None and str(field.type).startswith("tuple"):
        return "list"
    return DYNAMIC_TYPES.get(base)


def _default_text(key: str) -> str | None:
    return BrokerConfig().items().get(base_key(key))


def encoder_of(config: BrokerConfig, old: bool = False) -> PasswordEncoder | None:
    secret = config.password_encoder_old_secret if old else config.password_encoder_secret
    if secret is None:
        return None
    return PasswordEncoder(
        secret,
        config.password_encoder_key_length,
        config.password_encoder_iterations,
        config.password_encoder_keyfactory_algorithm,
    )


def encode_secrets(config: BrokerConfig, changes: Mapping[str, str | None], per_broker: bool) -> dict[str, str | None]:
    """Step 5: secrets encoded for the store (Kafka's toPersistentProps)."""
    stored = dict(changes)
    for key, value in changes.items():
        if value is None or not is_password(key):
            continue
        if not per_broker:
            raise DynamicConfigRefused("Password config can be defined only at broker level")
        encoder = encoder_of(config)
        if encoder is None:
            raise DynamicConfigRefused("Password encoder secret not configured")
        stored[key] = encoder.encode(value)
    return stored


def decode_secrets(config: BrokerConfig, stored: Mapping[str, str]) -> dict[str, str]:
    """The stored configs with secrets in clear; a secret this broker cannot decode is left out (logged)."""
    plain = {}
    for key, value in stored.items():
        if not is_password(key):
            plain[key] = value
            continue
        for encoder in (encoder_of(config), encoder_of(config, old=True)):
            if encoder is None:
                continue
            try:
                plain[key] = encoder.decode(value)
                break
            except PasswordEncoderError:
                continue
        else:
            log.warning(
                "dynamic config %s is ignored: it does not decode with this broker's password.encoder.secret", key
            )
    return plain


def layered(static: BrokerConfig, default: Mapping[str, str], own: Mapping[str, str]) -> dict[str, str]:
    """server.properties, then the cluster default, then this broker's own: Kafka's precedence."""
    mapping = dict(static.originals)
    for layer in (default, own):
        mapping.update({k: v for k, v in decode_secrets(static, layer).items() if accepts_key(k)})
    return mapping


def effective_config(static: BrokerConfig, default: Mapping[str, str], own: Mapping[str, str]) -> BrokerConfig:
    """The config a broker runs with; ConfigError names the key when the layers do not make one."""
    if not default and not own:
        return static
    return BrokerConfig.from_mapping(layered(static, default, own))


def stored_configs(metadata_configs: Mapping[str, Mapping[str, str]], broker_id: int) -> tuple[dict, dict]:
    """(cluster default, this broker's own) dynamic configs, as stored (secrets encoded)."""
    return dict(metadata_configs.get(DEFAULT_ENTITY, {})), dict(metadata_configs.get(str(broker_id), {}))


def prepare(
    static: BrokerConfig,
    metadata_configs: Mapping[str, Mapping[str, str]],
    broker_id: int,
    entity: str,
    current: Mapping[str, str],
    changes: Mapping[str, str | None],
    replace: bool,
) -> tuple[dict[str, str], BrokerConfig]:
    """Check a change of ``entity``'s dynamic configs (``current``, as stored): the configs to store
    and the config this broker would run with. Raises DynamicConfigRefused."""
    per_broker = entity != DEFAULT_ENTITY
    check_keys(changes, per_broker)
    encoded = encode_secrets(static, changes, per_broker)
    configs = {} if replace else dict(current)
    for key, value in encoded.items():
        if value is None:
            configs.pop(key, None)
        else:
            configs[key] = value
    default, own = stored_configs(metadata_configs, broker_id)
    if per_broker:
        own = configs
    else:
        default = configs
    try:
        config = effective_config(static, default, own)
    except ConfigError as exc:
        raise DynamicConfigRefused(str(exc)) from None
    return configs, config


def refusal(name: str, message: str) -> InvalidRequestError:
    return InvalidRequestError(
        f"Invalid config value for resource ConfigResource(type=BROKER, name='{name}'): {message}"
    )


def write(store, entity: str, configs: Mapping[str, str]) -> str:
    """Store ``entity``'s dynamic configs (one znode, created on first use); returns its path."""
    path, data = model.broker_config_path(entity), model.topic_config_json(dict(configs))
    try:
        store.create(path, data, makepath=True)
    except NodeExistsError:
        store.set(path, data)
    return path


def listeners_changed(old: BrokerConfig, new: BrokerConfig) -> list[str]:
    """The listeners whose TLS or SASL settings differ between two configs: a changed ``ssl.*`` or
    ``sasl.*`` key touches every listener, a changed ``listener.name.<l>.*`` key listener ``<l>``."""
    changed = {k for k in old.originals.keys() | new.originals.keys() if old.originals.get(k) != new.originals.get(k)}
    everyone = any(k.startswith(("ssl.", "sasl.")) for k in changed)
    prefixed = {found[0].upper() for k in changed if (found := listener_key(k)) is not None}
    return [listener.name for listener in new.listeners if everyone or listener.name in prefixed]


def listener_files(changes: Mapping[str, str | None], config: BrokerConfig) -> list[str]:
    """The TLS listeners whose keystore or truststore location a change sets: their files are read
    again even when the path stays the same (Kafka's ReloadableFileConfigs)."""
    names = set()
    for key, value in changes.items():
        found = listener_key(key)
        if value is not None and found is not None and found[1] in _RELOADABLE_FILES:
            names.add(found[0].upper())
    return sorted(
        n
        for n in names
        if any(n == listener.name for listener in config.listeners) and config.protocol_of(n).endswith("SSL")
    )


_RELOADABLE_FILES = ("ssl.keystore.location", "ssl.truststore.location")
