"""RenewDelegationToken: the owner or a renewer moves a live token's expiry to now + period (capped by its max)."""

from __future__ import annotations

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build, millis
from strom.protocol.errors import ErrorCode
from strom.server.handlers.create_delegation_token import token_requests_allowed

API_KEY = ApiKey.RENEW_DELEGATION_TOKEN
MIN_VERSION = 0
MAX_VERSION = 2


def handle(ctx, request):
    tokens = ctx.broker.delegation_tokens
    if not token_requests_allowed(ctx):
        error, expiry = ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, -1
    elif tokens is None:
        error, expiry = ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, -1
    else:
        period_ms = millis(request.renew_period)
        error, expiry = tokens.renew(str(ctx.principal), bytes(request.hmac), period_ms)
    return build(
        response_class_for(API_KEY, ctx.api_version),
        {"error_code": error, "expiry_timestamp": expiry, "throttle_time": 0},
    )
