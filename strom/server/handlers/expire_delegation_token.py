"""ExpireDelegationToken: the owner or a renewer sets a token's expiry; a negative period removes it at once."""

from __future__ import annotations

from strom.protocol.api import ApiKey
from strom.protocol.entities import millis
from strom.server.handlers.create_delegation_token import expiry_change_response

API_KEY = ApiKey.EXPIRE_DELEGATION_TOKEN
MIN_VERSION = 0
MAX_VERSION = 2


def handle(ctx, request):
    return expiry_change_response(
        ctx, lambda tokens: tokens.expire(str(ctx.principal), bytes(request.hmac), millis(request.expiry_time_period))
    )
