"""CreateDelegationToken (KIP-48; KIP-373 adds creating a token for another owner).

Kafka's rules, in Kafka's order: no token requests over a connection that itself logged in with a
token, over PLAINTEXT, or over SSL without a client certificate (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED:
the token's password would be handed to someone not authenticated); a token for another owner
needs CreateTokens on that User (DELEGATION_TOKEN_AUTHORIZATION_FAILED); renewers are Users; and
without delegation.token.secret.key every request is DELEGATION_TOKEN_AUTH_DISABLED.
"""

from __future__ import annotations

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build, field_value, millis
from strom.protocol.errors import ErrorCode
from strom.security.acl import Operation, ResourceType
from strom.security.delegation_tokens import TokenPrincipal, split_principal
from strom.security.principal import ANONYMOUS, USER_TYPE
from strom.server.authorization import allowed

API_KEY = ApiKey.CREATE_DELEGATION_TOKEN
MIN_VERSION = 0
MAX_VERSION = 3


def token_requests_allowed(ctx) -> bool:
    """Kafka's KafkaApis.allowTokenRequests, shared by the four token APIs."""
    if isinstance(ctx.principal, TokenPrincipal):
        return False
    security = ctx.broker.listener_security.get(ctx.listener)
    protocol = security.protocol if security is not None else "PLAINTEXT"
    return not (protocol == "PLAINTEXT" or (protocol == "SSL" and ctx.principal == ANONYMOUS))


def expiry_change_response(ctx, change):
    """Renew and Expire answer alike: refused, disabled, or ``change(tokens)``'s (error, new expiry)."""
    tokens = ctx.broker.delegation_tokens
    if not token_requests_allowed(ctx):
        error, expiry = ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, -1
    elif tokens is None:
        error, expiry = ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, -1
    else:
        error, expiry = change(tokens)
    return build(
        response_class_for(ctx.header.api_key, ctx.api_version),
        {"error_code": error, "expiry_timestamp": expiry, "throttle_time": 0},
    )


def handle(ctx, request):
    requester = str(ctx.principal)
    owner_name = field_value(request, "owner_principal_name", None)
    owner = (
        f"{field_value(request, 'owner_principal_type', None) or USER_TYPE}:{owner_name}" if owner_name else requester
    )
    renewers = tuple(f"{r.principal_type}:{r.principal_name}" for r in request.renewers)
    tokens = ctx.broker.delegation_tokens
    if not token_requests_allowed(ctx):
        return _response(ctx, ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, owner, requester)
    if owner != requester and not allowed(ctx, Operation.CREATE_TOKENS, ResourceType.USER, owner):
        return _response(ctx, ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED, owner, requester)
    if any(r.principal_type != USER_TYPE for r in request.renewers):
        return _response(ctx, ErrorCode.INVALID_PRINCIPAL_TYPE, owner, requester)
    if tokens is None:
        return _response(ctx, ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, owner, requester)
    info, digest = tokens.create(owner, requester, renewers, millis(request.max_lifetime))
    return _response(
        ctx,
        ErrorCode.NONE,
        owner,
        requester,
        {
            "issue_timestamp": info.issue_timestamp,
            "expiry_timestamp": info.expiry_timestamp,
            "max_timestamp": info.max_timestamp,
            "token_id": info.token_id,
            "hmac": digest,
        },
    )


def _response(ctx, error: ErrorCode, owner: str, requester: str, token: dict | None = None):
    owner_type, owner_name = split_principal(owner)
    requester_type, requester_name = split_principal(requester)
    values = {
        "error_code": error,
        "principal_type": owner_type,
        "principal_name": owner_name,
        "token_requester_principal_type": requester_type,
        "token_requester_principal_name": requester_name,
        "issue_timestamp": -1,
        "expiry_timestamp": -1,
        "max_timestamp": -1,
        "token_id": "",
        "hmac": b"",
        "throttle_time": 0,
    }
    values.update(token or {})
    return build(response_class_for(API_KEY, ctx.api_version), values)
