"""AlterUserScramCredentials: add, replace or delete users' SCRAM credentials, as Kafka checks them.

The client salts the password itself; the broker stores the salt, the iteration count and the
keys derived from the salted password under /config/users/<user> (never the password). A user
with any invalid change keeps all its credentials as they were; other users are still altered.
Every broker picks the change up through its watches.
"""

from __future__ import annotations

from strom.cluster.store import StoreError
from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build
from strom.protocol.errors import ErrorCode
from strom.security.acl import Operation
from strom.security.scram import (
    MAX_ITERATIONS,
    MECHANISM_IDS,
    MIN_ITERATIONS,
    ScramCredential,
)
from strom.server.authorization import cluster_allowed

API_KEY = ApiKey.ALTER_USER_SCRAM_CREDENTIALS
MIN_VERSION = 0
MAX_VERSION = 0


def _upsert_error(upsertion) -> tuple[int, str] | None:
    if upsertion.iterations < MIN_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Too few iterations: {upsertion.iterations} < {MIN_ITERATIONS}"
    if upsertion.iterations > MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Too many iterations: {upsertion.iterations} > {MAX_ITERATIONS}"
    if not upsertion.salt:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt must not be empty"
    if not upsertion.salted_password:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salted password must not be empty"
    return None


def handle(ctx, request):
    cache = ctx.broker.credentials
    order: list[str] = []
    errors: dict[str, tuple[int, str]] = {}
    changes: dict[str, tuple[dict[str, ScramCredential], set[str]]] = {}
    seen: set[tuple[str, int]] = set()
    entries = [(d, False) for d in request.deletions] + [(u, True) for u in request.upsertions]
    if not cluster_allowed(ctx, Operation.ALTER):
        names = list(dict.fromkeys(entry.name for entry, _ in entries))
        return build(
            response_class_for(API_KEY, ctx.api_version),
            {
                "throttle_time": 0,
                "results": [
                    {
                        "user": n,
                        "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                        "error_message": "Cluster authorization failed.",
                    }
                    for n in names
                ],
            },
        )
    for entry, upsert in entries:
        name = entry.name
        if name not in order:
            order.append(name)
        if name in errors:
            continue
        mechanism = MECHANISM_IDS.get(entry.mechanism)
        error: tuple[int, str] | None = None
        if not name:
            error = ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
        elif mechanism is None:
            error = ErrorCode.UNSUPPORTED_SASL_MECHANISM, f"Unknown SCRAM mechanism {entry.mechanism}"
        elif (name, entry.mechanism) in seen:
            error = ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"
        elif upsert:
            error = _upsert_error(entry)
        elif cache.lookup(name, mechanism) is None:
            error = ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
        seen.add((name, entry.mechanism))
        if error is not None:
            errors[name] = error
            continue
        assert mechanism is not None  # an unknown one got an error above
        upserts, deletes = changes.setdefault(name, ({}, set()))
        if upsert:
            upserts[mechanism] = ScramCredential.from_salted_password(
                mechanism, bytes(entry.salt), bytes(entry.salted_password), entry.iterations
            )
        else:
            deletes.add(mechanism)
    results = []
    for name in order:
        code, message = errors.get(name, (ErrorCode.NONE, None))
        if name not in errors:
            try:
                cache.alter(name, *changes[name])
            except StoreError as exc:
                code, message = ErrorCode.UNKNOWN_SERVER_ERROR, f"could not store the credentials: {exc}"
        results.append({"user": name, "error_code": code, "error_message": message})
    return build(response_class_for(API_KEY, ctx.api_version), {"throttle_time": 0, "results": results})
