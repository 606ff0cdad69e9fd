"""DescribeUserScramCredentials: which SCRAM mechanisms (and iterations) each user has; never a secret."""

from __future__ import annotations

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build
from strom.protocol.errors import ErrorCode
from strom.security.acl import Operation
from strom.security.scram import MECHANISM_NUMBERS
from strom.server.authorization import cluster_allowed

API_KEY = ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS
MIN_VERSION = 0
MAX_VERSION = 0


def _described(user: str, credentials: dict) -> dict:
    infos = [
        {"mechanism": MECHANISM_NUMBERS[mechanism], "iterations": credential.iterations}
        for mechanism, credential in sorted(credentials.items())
    ]
    return {"user": user, "error_code": ErrorCode.NONE, "error_message": None, "credential_infos": infos}


def _error(user: str, code: int, message: str) -> dict:
    return {"user": user, "error_code": code, "error_message": message, "credential_infos": []}


def handle(ctx, request):
    if not cluster_allowed(ctx, Operation.DESCRIBE):
        return build(
            response_class_for(API_KEY, ctx.api_version),
            {
                "throttle_time": 0,
                "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": "Cluster authorization failed.",
                "results": [],
            },
        )
    known = ctx.broker.credentials.users()
    results = []
    if not request.users:  # null or empty: every user that has a credential
        results = [_described(user, credentials) for user, credentials in sorted(known.items())]
    else:
        names = [entry.name for entry in request.users]
        for name in dict.fromkeys(names):
            if names.count(name) > 1:
                results.append(
                    _error(
                        name,
                        ErrorCode.DUPLICATE_RESOURCE,
                        f"Cannot describe SCRAM credentials for the same user twice in a single request: {name}",
                    )
                )
            elif name not in known:
                results.append(
                    _error(
                        name,
                        ErrorCode.RESOURCE_NOT_FOUND,
                        f"Attempt to describe a user credential that does not exist: {name}",
                    )
                )
            else:
                results.append(_described(name, known[name]))
    return build(
        response_class_for(API_KEY, ctx.api_version),
        {"throttle_time": 0, "error_code": ErrorCode.NONE, "error_message": None, "results": results},
    )
