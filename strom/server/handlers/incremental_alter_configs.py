"""IncrementalAlterConfigs (KIP-339): SET, DELETE, APPEND or SUBTRACT single keys of a topic.

The new overrides are the topic's current ones with each operation applied, then validated and
written as a whole by the controller (so an invalid value changes nothing). APPEND and SUBTRACT
work on list keys only (cleanup.policy), starting from the effective value when the topic has no
override; on any other key they are INVALID_CONFIG, as in Kafka. Broker resources take every
operation on their dynamic keys (KIP-226; APPEND and SUBTRACT on list keys, as in Kafka),
checked as in AlterConfigs (see alter_configs.py).
"""

from __future__ import annotations

from strom.cluster.controller import CONFIG_RETRY, store_failures_as_errors
from strom.group.group_config import GROUP_RESOURCE
from strom.protocol.api import ApiKey
from strom.protocol.errors import InvalidConfigError, InvalidRequestError
from strom.server import dynamic_broker_config
from strom.server.handlers.alter_configs import alter_broker_configs, check_keys, respond, set_topic_overrides
from strom.server.handlers.describe_configs import BROKER, LIST, TOPIC, TOPIC_TYPES, topic_overrides
from strom.storage.log_config import LogConfig, aliases_of, did_you_mean

API_KEY = ApiKey.INCREMENTAL_ALTER_CONFIGS
MIN_VERSION = 0
MAX_VERSION = 1

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}


def _items(text: str | None) -> list[str]:
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def apply_operations(broker, name: str, configs) -> dict[str, str]:
    """The topic's overrides after the operations, not yet validated."""
    topic_overrides(broker, name)  # INVALID_TOPIC_EXCEPTION / UNKNOWN_TOPIC_OR_PARTITION first
    overrides = broker.controller.topic_config(name)  # the store's, not a possibly stale cache
    for config in configs:
        key, op, value = config.name, config.config_operation, config.value
        if op not in _OP_NAMES:
            raise InvalidRequestError(f"unknown config operation {op} for {key}")
        for alias in aliases_of(key):  # one setting under two names (Redpanda's): the last one given wins
            overrides.pop(alias, None)
        if op == DELETE:
            overrides.pop(key, None)
            continue
        if value is None:
            raise InvalidRequestError(f"null value is not allowed for {key} with {_OP_NAMES[op]}")
        if op == SET:
            overrides[key] = value
            continue
        if key not in LogConfig.topic_keys():
            raise InvalidConfigError(f"{key}: unknown topic config" + did_you_mean(key, LogConfig.topic_keys()))
        if TOPIC_TYPES.get(key) != LIST:
            raise InvalidConfigError(f"{key}: {_OP_NAMES[op]} is allowed on list configs only")
        if key in overrides:
            current = _items(overrides[key])
        else:
            current = _items(broker.config.log_config().with_overrides(overrides).to_topic_configs()[key])
        if op == APPEND:
            current += [item for item in _items(value) if item not in current]
        else:
            removed = set(_items(value))
            current = [item for item in current if item not in removed]
        overrides[key] = ",".join(current)
    return overrides


def alter(broker, resource, validate_only: bool) -> None:
    check_keys(resource.configs)
    if resource.resource_type == TOPIC:
        overrides = apply_operations(broker, resource.resource_name, resource.configs)
        set_topic_overrides(broker, resource.resource_name, overrides, validate_only)
    elif resource.resource_type == BROKER:  # KIP-226 dynamic broker configs, key by key
        operations = [(c.name, c.config_operation, c.value) for c in resource.configs]
        for key, op, _ in operations:
            if op not in _OP_NAMES:
                raise InvalidRequestError(f"unknown config operation {op} for {key}")

        def changes(current: dict[str, str]) -> dict[str, str | None]:
            return dynamic_broker_config.apply_operations(current, operations)

        alter_broker_configs(broker, resource.resource_name, changes, replace=False, validate_only=validate_only)
    elif resource.resource_type == GROUP_RESOURCE:  # KIP-848 group configs
        operations = [(c.name, c.config_operation, c.value) for c in resource.configs]
        with store_failures_as_errors(
            f"the configs of group '{resource.resource_name}' were being written", CONFIG_RETRY
        ):
            broker.group_coordinator.configs.alter(resource.resource_name, operations, False, validate_only)
    else:
        raise InvalidRequestError(
            f"IncrementalAlterConfigs supports topics, brokers and groups, not resource type {resource.resource_type}"
        )


def handle(ctx, request):
    return respond(ctx, request, alter)
