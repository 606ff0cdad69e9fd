"""AlterConfigs (the legacy API): replace a topic's whole set of overrides.

Keys the request does not name go back to their defaults, and a null value means "no override",
as in Kafka. The controller validates every key and value (INVALID_CONFIG, the message names the
key) and writes the overrides; refreshing the metadata gives the logs their new LogConfig.

Broker resources are KIP-226's dynamic broker configs: every key Kafka 3.9 documents as per-broker
or cluster-wide, set on one broker (its id) or as the cluster default (""), checked and refused as
Kafka does (server/dynamic_broker_config.py): INVALID_REQUEST "Invalid config value for resource
ConfigResource(type=BROKER, name='0'): Cannot update these configs dynamically: Set(broker.id)"
for a read-only key, the same error code for a bad value (Kafka's, KAFKA-13609).

ZooKeeper not answering is REQUEST_TIMED_OUT for that resource, not a dropped connection: a
resource's configs are one znode, so they were written whole or not at all, and a retry is safe.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from strom.cluster import model
from strom.cluster.controller import CONFIG_RETRY, store_failures_as_errors
from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build
from strom.protocol.errors import ErrorCode, InvalidRequestError, KafkaError
from strom.security.acl import Operation
from strom.server import dynamic_broker_config
from strom.server.authorization import config_denial, refusal_message
from strom.server.handlers.describe_configs import BROKER, TOPIC, local_broker_id, topic_overrides
from strom.storage.log_config import ConfigError

API_KEY = ApiKey.ALTER_CONFIGS
MIN_VERSION = 0
MAX_VERSION = 2


def set_topic_overrides(broker, name: str, overrides: dict[str, str], validate_only: bool) -> None:
    topic_overrides(broker, name)  # INVALID_TOPIC_EXCEPTION / UNKNOWN_TOPIC_OR_PARTITION first
    broker.controller.alter_topic_config(name, overrides, validate_only=validate_only)
    if not validate_only:
        broker.read_back({model.topic_config_path(name)})


def alter_broker_configs(broker, name: str, changes: Changes, replace: bool, validate_only: bool) -> None:
    """A broker's (or, named "", the cluster default's) dynamic configs, checked as Kafka checks
    them (strom.server.dynamic_broker_config), then written as one znode: every broker's watch
    applies them. ``changes`` may be worked out from the stored configs (APPEND and SUBTRACT). A
    store that stops answering is REQUEST_TIMED_OUT."""
    per_broker = local_broker_id(broker, name, allow_default=True)
    entity = str(broker.broker_id) if per_broker else dynamic_broker_config.DEFAULT_ENTITY
    with store_failures_as_errors(f"the dynamic configs of broker '{name}' were being written", CONFIG_RETRY):
        found = broker.store.get_or_none(model.broker_config_path(entity))
        current = model.parse_topic_config(found[0]) if found else {}
        if callable(changes):
            changes = changes(current)
        try:
            configs, _ = dynamic_broker_config.prepare(
                broker.static_config,
                broker.metadata.broker_configs,
                broker.broker_id,
                entity,
                current,
                changes,
                replace,
            )
            layers = {**broker.metadata.broker_configs, entity: configs}
            reread = dynamic_broker_config.listener_files(changes, broker.config) if per_broker else []
            # the whole config and any new TLS context, as it would run
            broker.dynamic_configs.candidate(layers, reread)
        except dynamic_broker_config.DynamicConfigRefused as exc:
            raise dynamic_broker_config.refusal(name, str(exc)) from None
        except ConfigError as exc:
            raise dynamic_broker_config.refusal(name, str(exc)) from None
        if validate_only:
            return
        path = dynamic_broker_config.write(broker.store, entity, configs)
    broker.read_back({path})
    broker.dynamic_configs.reread_listener_files(reread)


# key -> value (None: delete), or how to work them out from the entity's stored configs
Changes = dict[str, str | None] | Callable[[dict[str, str]], dict[str, str | None]]


def check_duplicates(resources) -> Counter:
    """Kafka refuses a resource named twice in one request (INVALID_REQUEST for each)."""
    return Counter((r.resource_type, r.resource_name) for r in resources)


def check_keys(configs) -> None:
    counts = Counter(c.name for c in configs)
    duplicates = sorted(k for k, n in counts.items() if n > 1)
    if duplicates:
        raise InvalidRequestError(f"duplicate config keys: {', '.join(duplicates)}")


def alter(broker, resource, validate_only: bool) -> None:
    check_keys(resource.configs)
    if resource.resource_type == TOPIC:
        overrides = {c.name: c.value for c in resource.configs if c.value is not None}
        set_topic_overrides(broker, resource.resource_name, overrides, validate_only)
    elif resource.resource_type == BROKER:  # KIP-226: the whole set replaces the stored one
        changes = {c.name: c.value for c in resource.configs}
        alter_broker_configs(broker, resource.resource_name, changes, replace=True, validate_only=validate_only)
    else:
        raise InvalidRequestError(
            f"AlterConfigs supports topics and brokers, not resource type {resource.resource_type}"
        )


def respond(ctx, request, alter_one):
    """Shared by AlterConfigs and IncrementalAlterConfigs: one result per resource, errors as values."""
    counts = check_duplicates(request.resources)
    responses = []
    for resource in request.resources:
        entry = {
            "resource_type": resource.resource_type,
            "resource_name": resource.resource_name,
            "error_code": ErrorCode.NONE,
            "error_message": None,
        }
        refused = config_denial(ctx, Operation.ALTER_CONFIGS, resource.resource_type, resource.resource_name)
        if refused is not None:
            entry.update(error_code=refused, error_message=refusal_message(refused))
            responses.append(entry)
            continue
        try:
            if counts[(resource.resource_type, resource.resource_name)] > 1:
                raise InvalidRequestError("the resource is listed more than once in the request")
            alter_one(ctx.broker, resource, request.validate_only)
        except KafkaError as exc:
            entry.update(error_code=exc.error_code, error_message=exc.message)
        responses.append(entry)
    return build(response_class_for(ctx.header.api_key, ctx.api_version), {"throttle_time": 0, "responses": responses})


def handle(ctx, request):
    return respond(ctx, request, alter)
