"""Dynamic broker configs (KIP-226), for the keys strom can change without a restart.

Stored as Kafka stores them, in /config/brokers/<id> (one broker) or /config/brokers/<default>
(every broker), ``{"version":1,"config":{...}}``; every broker watches them through its metadata.
Only the replication throttle rates are dynamic today (a reassignment sets and clears them);
any other key is refused as Kafka refuses a key that is not dynamically updatable.
"""

from __future__ import annotations

from strom.cluster import model
from strom.cluster.store import NodeExistsError
from strom.protocol.errors import InvalidConfigError, InvalidRequestError
from strom.replication.throttle import DYNAMIC_BROKER_KEYS
from strom.server.handlers.describe_configs import local_broker_id


def entity_of(broker, name: str) -> str:
    return str(broker.broker_id) if local_broker_id(broker, name, allow_default=True) else model.DEFAULT_BROKER_ENTITY


def current(broker, entity: str) -> dict[str, str]:
    found = broker.store.get_or_none(model.broker_config_path(entity))
    return model.parse_topic_config(found[0]) if found else {}


def alter(broker, name: str, changes: dict[str, str | None], *, replace: bool, validate_only: bool) -> None:
    """Set (a value) or delete (None) keys of a broker's dynamic configs; ``replace`` drops the others."""
    entity = entity_of(broker, name)
    refused = sorted(k for k in changes if k not in DYNAMIC_BROKER_KEYS)
    if refused:
        raise InvalidRequestError(
            f"Cannot update these configs dynamically: {', '.join(refused)} (strom's dynamic broker configs are "
            f"{', '.join(DYNAMIC_BROKER_KEYS)}; change server.properties and restart the broker)"
        )
    for key, value in changes.items():
        if value is None:
            continue
        try:
            if int(value) < 0:
                raise ValueError
        except ValueError:
            raise InvalidConfigError(
                f"Invalid value {value} for configuration {key}: it must be a non-negative number of bytes per second"
            ) from None
    configs = {} if replace else current(broker, entity)
    for key, value in changes.items():
        if value is None:
            configs.pop(key, None)
        else:
            configs[key] = value
    if validate_only:
        return
    path, data = model.broker_config_path(entity), model.topic_config_json(configs)
    try:
        broker.store.create(path, data, makepath=True)
    except NodeExistsError:
        broker.store.set(path, data)
    broker.read_back({model.CONFIG_BROKERS})
