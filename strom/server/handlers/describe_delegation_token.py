"""DescribeDelegationToken: the tokens of the given owners (null: all) that the requester may see.

Kafka's DelegationTokenManager.filterToken: a token is listed when it belongs to one of the owners
asked for (as owner, requester or renewer), and the requester is its owner, requester or a
renewer, or may Describe the DelegationToken resource of its id, or may DescribeTokens on its
owner's User resource (KIP-373). An empty owner list (not null) lists nothing.
"""

from __future__ import annotations

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build
from strom.protocol.errors import ErrorCode
from strom.security.acl import Operation, ResourceType
from strom.security.delegation_tokens import TokenInformation, split_principal
from strom.server.authorization import allowed
from strom.server.handlers.create_delegation_token import token_requests_allowed

API_KEY = ApiKey.DESCRIBE_DELEGATION_TOKEN
MIN_VERSION = 0
MAX_VERSION = 3


def handle(ctx, request):
    tokens = ctx.broker.delegation_tokens
    found: list[dict] = []
    if not token_requests_allowed(ctx):
        error = ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    elif tokens is None:
        error = ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
    else:
        error = ErrorCode.NONE
        owners = None if request.owners is None else [f"{o.principal_type}:{o.principal_name}" for o in request.owners]
        requester = str(ctx.principal)
        if owners != []:
            for info, digest in sorted(tokens.tokens(), key=lambda t: t[0].issue_timestamp):
                if _visible(ctx, requester, owners, info):
                    found.append(_described(info, digest))
    return build(
        response_class_for(API_KEY, ctx.api_version), {"error_code": error, "tokens": found, "throttle_time": 0}
    )


def _visible(ctx, requester: str, owners: list[str] | None, info: TokenInformation) -> bool:
    if owners is not None and not any(info.owner_or_renewer(owner) for owner in owners):
        return False
    return (
        info.owner_or_renewer(requester)
        or allowed(ctx, Operation.DESCRIBE, ResourceType.DELEGATION_TOKEN, info.token_id, log_denied=False)
        or allowed(ctx, Operation.DESCRIBE_TOKENS, ResourceType.USER, info.owner, log_denied=False)
    )


def _described(info: TokenInformation, digest: bytes) -> dict:
    owner_type, owner_name = split_principal(info.owner)
    requester_type, requester_name = split_principal(info.token_requester)
    renewers = []
    for renewer in info.renewers:
        kind, name = split_principal(renewer)
        renewers.append({"principal_type": kind, "principal_name": name})
    return {
        "principal_type": owner_type,
        "principal_name": owner_name,
        "token_requester_principal_type": requester_type,
        "token_requester_principal_name": requester_name,
        "issue_timestamp": info.issue_timestamp,
        "expiry_timestamp": info.expiry_timestamp,
        "max_timestamp": info.max_timestamp,
        "token_id": info.token_id,
        "hmac": digest,
        "renewers": renewers,
    }
