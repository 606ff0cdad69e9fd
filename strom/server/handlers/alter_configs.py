"""AlterConfigs (the legacy API): replace a topic's whole set of overrides.

Keys the request does not name go back to their defaults, and a null value means "no override",
as in Kafka. The controller validates every key and value (INVALID_CONFIG, the message names the
key) and writes the overrides; refreshing the metadata gives the logs their new LogConfig.

Broker resources: the replication throttle rates are strom's dynamic broker configs (see
server/dynamic_broker_config.py); every other broker key is what Kafka calls "not dynamically
updatable". Kafka answers that case with INVALID_REQUEST and "Cannot update these configs
dynamically: ...", so strom answers the same (POLICY_VIOLATION would suggest a configurable
policy, INVALID_CONFIG a bad value; neither is the case).

ZooKeeper not answering is REQUEST_TIMED_OUT for that resource, not a dropped connection: a
resource's configs are one znode, so they were written whole or not at all, and a retry is safe.
"""

from __future__ import annotations

from collections import Counter

from strom.cluster import model
from strom.cluster.controller import CONFIG_RETRY, store_failures_as_errors
from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build
from strom.protocol.errors import ErrorCode, InvalidRequestError, KafkaError
from strom.security.acl import Operation
from strom.server.authorization import config_denial, refusal_message
from strom.server.handlers.describe_configs import BROKER, TOPIC, topic_overrides

API_KEY = ApiKey.ALTER_CONFIGS
MIN_VERSION = 0
MAX_VERSION = 2


def set_topic_overrides(broker, name: str, overrides: dict[str, str], validate_only: bool) -> None:
    topic_overrides(broker, name)  # INVALID_TOPIC_EXCEPTION / UNKNOWN_TOPIC_OR_PARTITION first
    broker.controller.alter_topic_config(name, overrides, validate_only=validate_only)
    if not validate_only:
        broker.read_back({model.topic_config_path(name)})


def alter_broker_configs(broker, name: str, changes: dict[str, str | None], replace: bool, validate_only: bool) -> None:
    """The dynamic broker configs (one znode): a store that stops answering is REQUEST_TIMED_OUT."""
    from strom.server import dynamic_broker_config

    with store_failures_as_errors(f"the dynamic configs of broker '{name}' were being written", CONFIG_RETRY):
        dynamic_broker_config.alter(broker, name, changes, replace=replace, validate_only=validate_only)


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
    elif resource.resource_type == BROKER:  # the replication throttles are dynamic; the rest is refused
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
