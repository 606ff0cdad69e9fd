"""InitProducerId: a producer id and epoch for idempotent (and, later, transactional) producers.

Ids come from blocks reserved in the metadata store (/latest_producer_id_block, as in Kafka), so
no two brokers ever hand out the same id. A producer that re-initialises with its id and epoch
(KIP-360) gets the next epoch of the same id.
"""

from __future__ import annotations

from strom.protocol.api import ApiKey, response_class
from strom.protocol.entities import build, field_value
from strom.protocol.errors import KafkaError

API_KEY = ApiKey.INIT_PRODUCER_ID
MIN_VERSION = 0
MAX_VERSION = 4
MAX_EPOCH = 32767


def handle(ctx, request):
    broker = ctx.broker
    producer_id = field_value(request, "producer_id", -1)
    epoch = field_value(request, "producer_epoch", -1)
    try:
        if producer_id >= 0 and 0 <= epoch < MAX_EPOCH - 1:
            result = (producer_id, epoch + 1)
        else:
            result = (broker.producer_ids.next_id(), 0)
        values = {"error_code": 0, "producer_id": result[0], "producer_epoch": result[1]}
    except KafkaError as exc:
        values = {"error_code": exc.error_code, "producer_id": -1, "producer_epoch": -1}
    values["throttle_time"] = 0
    return build(response_class(API_KEY, ctx.api_version), values)
