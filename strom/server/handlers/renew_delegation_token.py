"""RenewDelegationToken: the owner or a renewer moves a live token's expiry to now + period (capped by its max)."""

from __future__ import annotations

from strom.protocol.api import ApiKey
from strom.protocol.entities import millis
from strom.server.handlers.create_delegation_token import expiry_change_response

API_KEY = ApiKey.RENEW_DELEGATION_TOKEN
MIN_VERSION = 0
MAX_VERSION = 2


def handle(ctx, request):
    return expiry_change_response(
        ctx, lambda tokens: tokens.renew(str(ctx.principal), bytes(request.hmac), millis(request.renew_period))
    )
