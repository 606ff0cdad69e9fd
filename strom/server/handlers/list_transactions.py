"""ListTransactions: the transactional ids this broker coordinates (admin clients ask every broker).

v2 (KIP-1152) filters the ids by a regular expression that must match the whole id, as Kafka's
RE2/J ``matches()``; it is compiled with RE2 (the syntax RE2/J implements, in linear time), and a
pattern RE2 refuses is answered INVALID_REGULAR_EXPRESSION. Empty or null means no filter.
"""

from __future__ import annotations

import re2

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build, field_value
from strom.protocol.errors import ErrorCode
from strom.security.acl import Operation
from strom.server.authorization import txn_allowed
from strom.txn.records import STATE_BY_NAME

API_KEY = ApiKey.LIST_TRANSACTIONS
MIN_VERSION = 0
MAX_VERSION = 2

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a bad pattern is the client's error, answered, not logged by RE2


def handle(ctx, request):
    states = set(request.state_filters)
    unknown = sorted(s for s in states if s not in STATE_BY_NAME)
    pattern = field_value(request, "transactional_id_pattern")
    matcher = None
    if pattern:
        try:
            matcher = re2.compile(pattern, _RE2_OPTIONS)
        except (re2.error, TypeError, ValueError):
            return build(
                response_class_for(API_KEY, ctx.api_version),
                {
                    "throttle_time": 0,
                    "error_code": ErrorCode.INVALID_REGULAR_EXPRESSION,
                    "unknown_state_filters": unknown,
                    "transaction_states": [],
                },
            )
    found = ctx.broker.transaction_coordinator.list(
        states, set(request.producer_id_filters), field_value(request, "duration_filter", -1)
    )
    if matcher is not None:
        found = [m for m in found if matcher.fullmatch(m.transactional_id)]
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
