"""DescribeConfigs: a topic's effective settings, this broker's settings, or its loggers' levels.

Topic entries are every topic key strom knows, with the effective value (broker ``log.*`` default
overlaid with the topic's override). Their source and synonyms follow Kafka (KIP-226): an override
is DYNAMIC_TOPIC_CONFIG (1), then come the broker keys that set the default: DYNAMIC_BROKER_CONFIG
(2) and DYNAMIC_DEFAULT_BROKER_CONFIG (3) for those set at run time (KIP-226), STATIC_BROKER_CONFIG
(4) for those set in server.properties, DEFAULT_CONFIG (5) for built-in defaults. The entry's
source is its first synonym's. Broker entries are every key with its effective value (read-only
unless Kafka can change it at run time), then the dynamic keys strom has no field for (listener-
prefixed and custom ones); secrets are null and sensitive. The broker resource named "" is Kafka's
cluster-wide dynamic default: its entries are those set on <default>. Another broker's id is INVALID_REQUEST (each
broker describes itself).
"""

from __future__ import annotations

import dataclasses
import logging
from functools import lru_cache
from typing import Any

from strom.cluster.controller import validate_topic_name
from strom.group.group_config import GROUP_RESOURCE
from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build, field_value
from strom.protocol.errors import (
    ErrorCode,
    InvalidRequestError,
    KafkaError,
    UnknownTopicOrPartitionError,
)
from strom.security.acl import Operation
from strom.server.authorization import config_denial, refusal_message
from strom.server.config import BrokerConfig
from strom.server.config_keys import is_long
from strom.server.dynamic_config_keys import (
    DYNAMIC_TYPES,
    READ_ONLY_MODE,
    UNSERVED_DEFAULTS,
    base_key,
    is_password,
    update_mode,
)
from strom.storage.log_config import TOPIC_KEYS, ConfigError

API_KEY = ApiKey.DESCRIBE_CONFIGS
MIN_VERSION = 0  # v0 has is_default where v1+ has config_source
MAX_VERSION = 4

# ConfigResource.Type
TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8

# DescribeConfigsResponse.ConfigSource
DYNAMIC_TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
DYNAMIC_BROKER_LOGGER_CONFIG = 6

# DescribeConfigsResponse.ConfigType (KIP-569)
BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = 1, 2, 3, 4, 5, 6, 7, 8, 9

_KINDS = {
    "class": CLASS,
    "password": PASSWORD,
    "boolean": BOOLEAN,
    "string": STRING,
    "int": INT,
    "short": SHORT,
    "long": LONG,
    "double": DOUBLE,
    "list": LIST,
}
# Kafka's topic key -> broker keys that give its default, in precedence order (ServerTopicConfigSynonyms).
TOPIC_SYNONYMS: dict[str, tuple[str, ...]] = {key: spec.server_keys for key, spec in TOPIC_KEYS.items()}
TOPIC_TYPES: dict[str, int] = {key: _KINDS[spec.kind] for key, spec in TOPIC_KEYS.items()}

# Broker keys Kafka derives from one another; describing any of them shows the whole chain.
_BROKER_CHAINS = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
)
BROKER_SYNONYMS: dict[str, tuple[str, ...]] = {key: chain for chain in _BROKER_CHAINS for key in chain}

_FIELDS = {f.metadata["key"]: f for f in dataclasses.fields(BrokerConfig)}
DEFAULT_ENTITY = "<default>"  # /config/brokers/<default>: the cluster-wide dynamic configs
_LEVELS = {"DEBUG": "DEBUG", "INFO": "INFO", "WARNING": "WARN", "ERROR": "ERROR", "CRITICAL": "FATAL"}


# -- broker keys -----------------------------------------------------------------------------------
@lru_cache(maxsize=1)
def _builtin_defaults() -> dict[str, str | None]:
    """Each key's built-in default as text; None for keys Kafka derives from others (no default of their own)."""
    values = BrokerConfig().items()
    return {key: (values[key] if f.default is not None else None) for key, f in _FIELDS.items()}


@lru_cache(maxsize=4)
def explicit_keys(config: BrokerConfig) -> frozenset[str]:
    """Keys whose value is not the built-in (or derived) default: those set in server.properties.

    BrokerConfig keeps only effective values, so a derived key (default None) counts as set when
    its value differs from what re-deriving it gives; a key set to exactly its default reads as unset.
    """
    found = set()
    for key, f in _FIELDS.items():
        value = getattr(config, f.name)
        if f.default is None:
            try:
                underived: dict[str, Any] = {f.name: None}
                baseline = getattr(dataclasses.replace(config, **underived), f.name)
            except ValueError:  # ConfigError: the rest alone would not validate, so the key was needed
                baseline = None
        else:
            baseline = f.default
        if value != baseline:
            found.add(key)
    return frozenset(found)


@lru_cache(maxsize=4)
def _values(config: BrokerConfig) -> dict[str, str | None]:
    return config.items()  # read-only: shared between calls


def broker_synonyms(
    config: BrokerConfig, chain: tuple[str, ...], dynamic: tuple[tuple[dict[str, str | None], int], ...] = ()
) -> list[dict]:
    """Kafka's order (ConfigHelper.configSynonyms): source by source, this broker's dynamic configs,
    the cluster default, server.properties, the built-in defaults; within each, the chain's order.
    ``dynamic``: (configs, source) layers, highest first."""
    values = _values(config)
    explicit = explicit_keys(config)
    defaults = _builtin_defaults()
    out = [{"name": k, "value": layer[k], "source": source} for layer, source in dynamic for k in chain if k in layer]
    out += [{"name": k, "value": values[k], "source": STATIC_BROKER_CONFIG} for k in chain if k in explicit]
    out += [{"name": k, "value": defaults[k], "source": DEFAULT_CONFIG} for k in chain if defaults.get(k) is not None]
    return out


def dynamic_layers(broker, entities: tuple[str, ...]) -> tuple[tuple[dict[str, str | None], int], ...]:
    """The dynamic configs of these entities ("<id>", "<default>"), secrets as null, with their sources."""
    sources = {DEFAULT_ENTITY: DYNAMIC_DEFAULT_BROKER_CONFIG}
    layers = []
    for entity in entities:
        configs = broker.metadata.broker_configs.get(entity, {})
        shown = {key: (None if is_password(key) else value) for key, value in configs.items()}
        layers.append((shown, sources.get(entity, DYNAMIC_BROKER_CONFIG)))
    return tuple(layers)


def broker_config_type(key: str) -> int:
    f = _FIELDS[key]
    annotation = str(f.type)
    if annotation.startswith("bool"):
        return BOOLEAN
    if annotation.startswith("float"):
        return DOUBLE
    if annotation.startswith("tuple"):
        return LIST
    if annotation.startswith("int"):
        return LONG if is_long(f.metadata["parse"]) else INT
    return STRING


def broker_doc(key: str) -> str | None:
    f = _FIELDS.get(key)
    return f.metadata["doc"] if f is not None else None


# -- entries -----------------------------------------------------------------------------------------
def topic_entries(broker, name: str, overrides: dict[str, str], wanted, synonyms: bool, docs: bool) -> list[dict]:
    effective = broker.config.log_config().with_overrides(overrides).to_topic_configs()
    layers = dynamic_layers(broker, (str(broker.broker_id), DEFAULT_ENTITY))
    entries = []
    for key, value in effective.items():
        if wanted is not None and key not in wanted:
            continue
        chain = broker_synonyms(broker.static_config, TOPIC_SYNONYMS.get(key, ()), layers)
        if key in overrides:
            chain.insert(0, {"name": key, "value": value, "source": DYNAMIC_TOPIC_CONFIG})
        first_broker_key = next(iter(TOPIC_SYNONYMS.get(key, ())), None)
        doc = broker_doc(first_broker_key) if first_broker_key else TOPIC_KEYS[key].effect
        entries.append(
            {
                "name": key,
                "value": value,
                "read_only": False,
                "is_sensitive": False,
                "config_source": chain[0]["source"] if chain else DEFAULT_CONFIG,
                "synonyms": chain if synonyms else [],
                "config_type": TOPIC_TYPES.get(key, LONG),
                "documentation": doc if docs else None,
            }
        )
    return entries


def _entry(key: str, value, chain: list[dict], synonyms: bool, config_type: int, docs: str | None) -> dict:
    return {
        "name": key,
        "value": None if is_password(key) else value,  # a secret's value is null, as Kafka's
        "read_only": update_mode(key) == READ_ONLY_MODE,
        "is_sensitive": is_password(key),
        "config_source": chain[0]["source"] if chain else DEFAULT_CONFIG,
        "synonyms": chain if synonyms else [],
        "config_type": config_type,
        "documentation": docs,
    }


def broker_entries(broker, wanted, synonyms: bool, docs: bool) -> list[dict]:
    """Every key of this broker with its effective value, then the dynamic keys it has no field for."""
    layers = dynamic_layers(broker, (str(broker.broker_id), DEFAULT_ENTITY))
    entries = []
    for key, value in _values(broker.config).items():
        if wanted is not None and key not in wanted:
            continue
        chain = broker_synonyms(broker.static_config, BROKER_SYNONYMS.get(key, (key,)), layers)
        while chain and chain[0]["name"] != key:  # as Kafka: the chain starts at the described key
            chain.pop(0)
        entries.append(_entry(key, value, chain, synonyms, broker_config_type(key), broker_doc(key) if docs else None))
    entries += unserved_entries(layers, wanted, synonyms)
    return entries + dynamic_entries(layers, wanted, synonyms, skip=_FIELDS.keys() | UNSERVED_DEFAULTS.keys())


def unserved_entries(layers, wanted, synonyms: bool) -> list[dict]:
    """Kafka's dynamic keys that strom has no field for, with Kafka's defaults (as Kafka lists them)."""
    entries = []
    for key, default in UNSERVED_DEFAULTS.items():
        if key in _FIELDS or (wanted is not None and key not in wanted):
            continue
        chain = [{"name": key, "value": layer[key], "source": source} for layer, source in layers if key in layer]
        if default is not None:
            chain.append({"name": key, "value": None if is_password(key) else default, "source": DEFAULT_CONFIG})
        value = chain[0]["value"] if chain else None
        entries.append(_entry(key, value, chain, synonyms, _KINDS.get(DYNAMIC_TYPES.get(key, ""), STRING), None))
    return entries


def dynamic_entries(layers, wanted, synonyms: bool, skip=frozenset()) -> list[dict]:
    """Keys set dynamically that are not among ``skip``: listener-prefixed keys ([the key, its base
    key] as Kafka's synonyms) and custom ones; the cluster default's alone for the resource ""."""
    keys = sorted({key for layer, _ in layers for key in layer} - set(skip))
    entries = []
    for key in keys:
        if wanted is not None and key not in wanted:
            continue
        chain = [{"name": key, "value": layer[key], "source": source} for layer, source in layers if key in layer]
        kind = DYNAMIC_TYPES.get(base_key(key))
        config_type = broker_config_type(key) if key in _FIELDS else _KINDS.get(kind or "string", STRING)
        entries.append(_entry(key, chain[0]["value"], chain, synonyms, config_type, None))
    return entries


def logger_entries(wanted) -> list[dict]:
    """Python loggers under 'strom' and the root, with Kafka's (log4j) level names."""
    names = ["root"] + sorted(n for n in logging.root.manager.loggerDict if n == "strom" or n.startswith("strom."))
    entries = []
    for name in names:
        if wanted is not None and name not in wanted:
            continue
        logger = logging.getLogger() if name == "root" else logging.getLogger(name)
        level = _LEVELS.get(logging.getLevelName(logger.getEffectiveLevel()), "INFO")
        entries.append(
            {
                "name": name,
                "value": level,
                "read_only": True,
                "is_sensitive": False,
                "config_source": DYNAMIC_BROKER_LOGGER_CONFIG,
                "synonyms": [],
                "config_type": STRING,
                "documentation": None,
            }
        )
    return entries


def local_broker_id(broker, name: str, *, allow_default: bool) -> bool:
    """Check a broker resource name: True for this broker, False for "" (the cluster default)."""
    if name == "" and allow_default:
        return False
    if name == "":
        raise InvalidRequestError("broker id must not be empty")
    try:
        broker_id = int(name)
    except ValueError:
        raise InvalidRequestError(f"broker id must be an integer, but it is: {name!r}") from None
    if broker_id != broker.broker_id:
        expected = f"{broker.broker_id} or empty string" if allow_default else str(broker.broker_id)
        raise InvalidRequestError(f"unexpected broker id, expected {expected}, but received {name}")
    return True


def topic_overrides(broker, name: str) -> dict[str, str]:
    """The topic's overrides from the metadata cache; errors for bad names and unknown topics."""
    validate_topic_name(name)
    info = broker.metadata.topics.get(name)
    if info is None:
        raise UnknownTopicOrPartitionError(f"topic '{name}' does not exist")
    return dict(info.configs)


def describe(broker, resource, synonyms: bool, docs: bool) -> list[dict]:
    keys = resource.configuration_keys
    wanted = None if keys is None else set(keys)
    kind, name = resource.resource_type, resource.resource_name
    if kind == TOPIC:
        return topic_entries(broker, name, topic_overrides(broker, name), wanted, synonyms, docs)
    if kind == BROKER:
        if not local_broker_id(broker, name, allow_default=True):
            return dynamic_entries(dynamic_layers(broker, (DEFAULT_ENTITY,)), wanted, synonyms)
        return broker_entries(broker, wanted, synonyms, docs)
    if kind == BROKER_LOGGER:
        local_broker_id(broker, name, allow_default=False)
        return logger_entries(wanted)
    if kind == GROUP_RESOURCE:  # KIP-848 group configs
        return broker.group_coordinator.configs.describe(name, wanted, synonyms, docs)
    raise InvalidRequestError(f"unsupported resource type: {kind}")


def handle(ctx, request):
    synonyms = field_value(request, "include_synonyms", False)
    docs = field_value(request, "include_documentation", False)
    results = []
    for resource in request.resources:
        entry = {
            "resource_type": resource.resource_type,
            "resource_name": resource.resource_name,
            "error_code": ErrorCode.NONE,
            "error_message": None,
            "configs": [],
        }
        refused = config_denial(ctx, Operation.DESCRIBE_CONFIGS, resource.resource_type, resource.resource_name)
        if refused is not None:
            entry.update(error_code=refused, error_message=refusal_message(refused))
            results.append(entry)
            continue
        try:
            entry["configs"] = describe(ctx.broker, resource, synonyms, docs)
            if ctx.api_version == 0:
                for config in entry["configs"]:
                    config["is_default"] = config["config_source"] == DEFAULT_CONFIG
        except KafkaError as exc:
            entry.update(error_code=exc.error_code, error_message=exc.message)
        except ConfigError as exc:  # an override in the store that no longer parses
            entry.update(error_code=ErrorCode.INVALID_CONFIG, error_message=str(exc))
        results.append(entry)
    return build(response_class_for(API_KEY, ctx.api_version), {"throttle_time": 0, "results": results})
