"""ListTransactions: the transactional ids this broker coordinates (admin clients ask every broker)."""

from __future__ import annotations

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build, field_value
from strom.security.acl import Operation
from strom.server.authorization import txn_allowed
from strom.txn.records import STATE_BY_NAME

API_KEY = ApiKey.LIST_TRANSACTIONS
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx, request):
    states = set(request.state_filters)
    unknown = sorted(s for s in states if s not in STATE_BY_NAME)
    found = ctx.broker.transaction_coordinator.list(
        states, set(request.producer_id_filters), field_value(request, "duration_filter", -1)
    )
    if ctx.broker.authorizer is not None:
        found = [m for m in found if txn_allowed(ctx, Operation.DESCRIBE, m.transactional_id)]
    return build(
        response_class_for(API_KEY, ctx.api_version),
        {
            "throttle_time": 0,
            "error_code": 0,
            "unknown_state_filters": unknown,
            "transaction_states": [
                {
                    "transactional_id": m.transactional_id,
                    "producer_id": m.producer_id,
                    "transaction_state": m.state.display_name,
                }
                for m in found
            ],
        },
    )
