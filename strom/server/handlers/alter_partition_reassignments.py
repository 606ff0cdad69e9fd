"""AlterPartitionReassignments (KIP-455): start, replace or cancel partition moves.

Served by the controller, as in Kafka: another broker answers NOT_CONTROLLER and the client asks
the controller named in its next Metadata. A null replica list cancels (NO_REASSIGNMENT_IN_PROGRESS
when nothing moves). The answer comes once the move is recorded, not when it is done; the
controller finishes it when the target replicas are in sync (see cluster/reassignment.py).
v1's allow_replication_factor_change=false refuses a target whose size differs from the
partition's current (original) replica count with INVALID_REPLICATION_FACTOR.
"""

from __future__ import annotations

from strom.cluster import model
from strom.cluster.model import TopicAssignment
from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build, field_value
from strom.protocol.errors import ErrorCode
from strom.security.acl import Operation
from strom.server.authorization import cluster_allowed

API_KEY = ApiKey.ALTER_PARTITION_REASSIGNMENTS
MIN_VERSION = 0
MAX_VERSION = 1


def _original_sizes(broker, topic: str) -> dict[int, int]:
    found = broker.store.get_or_none(model.topic_path(topic))
    if found is None:
        return {}
    current = TopicAssignment.from_json(topic, found[0])
    return {p: len(current.original(p)) for p in current.partitions}


def handle(ctx, request):
    broker = ctx.broker
    version = ctx.api_version
    allow_rf_change = field_value(request, "allow_replication_factor_change", True)
    top_error, top_message = ErrorCode.NONE, None
    responses = []
    controller = broker.controller
    if not cluster_allowed(ctx, Operation.ALTER):  # as Kafka: Alter on the cluster
        top_error, top_message = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
    elif not controller.is_active:
        top_error = ErrorCode.NOT_CONTROLLER
        top_message = f"broker {broker.broker_id} is not the controller"
    live = set(broker.metadata.brokers)
    changed: set[str] = set()  # znodes written: this broker re-reads just those
    for topic in request.topics:
        partitions = []
        if top_error != ErrorCode.NONE:
            responses.append(
                {
                    "name": topic.name,
                    "partitions": [
                        {"partition_index": p.partition_index, "error_code": top_error, "error_message": top_message}
                        for p in topic.partitions
                    ],
                }
            )
            continue
        requests: dict[int, list[int] | None] = {}
        refused: dict[int, tuple[int, str]] = {}
        sizes = _original_sizes(broker, topic.name) if not allow_rf_change else {}
        for p in topic.partitions:
            index = int(p.partition_index)
            if index in requests or index in refused:
                refused[index] = (ErrorCode.INVALID_REQUEST, f"partition {topic.name}-{index} is listed twice")
                requests.pop(index, None)
                continue
            replicas = None if p.replicas is None else [int(b) for b in p.replicas]
            if replicas is not None and index in sizes and len(replicas) != sizes[index]:
                refused[index] = (
                    ErrorCode.INVALID_REPLICATION_FACTOR,
                    (
                        f"the replication factor of {topic.name}-{index} would change from "
                        f"{sizes[index]} to {len(replicas)} and allow_replication_factor_change is false"
                    ),
                )
                continue
            requests[index] = replicas
        results = controller.alter_partition_reassignments(topic.name, requests, live) if requests else {}
        for p in topic.partitions:
            index = int(p.partition_index)
            if index in refused:
                code, message = refused[index]
            else:
                result = results[index]
                code, message = result.code, result.message
            if code == ErrorCode.NONE:
                changed |= {model.topic_path(topic.name), model.partition_state_path(topic.name, index)}
            partitions.append({"partition_index": index, "error_code": code, "error_message": message})
        responses.append({"name": topic.name, "partitions": partitions})
    if changed:
        broker.read_back(changed)  # the controller's Metadata and ListPartitionReassignments show it at once
    values = {"throttle_time": 0, "error_code": top_error, "error_message": top_message, "responses": responses}
    if version >= 1:
        values["allow_replication_factor_change"] = allow_rf_change
    return build(response_class_for(API_KEY, version), values)
