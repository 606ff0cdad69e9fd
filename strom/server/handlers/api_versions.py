"""ApiVersions: the versions strom serves, straight from the handler table, and the feature levels.

v3+ also carries the features this broker supports and the levels the cluster finalized, with
their epoch (KIP-584): this is Kafka's DescribeFeatures (kafka-features.sh describe and the
admin clients' describeFeatures send ApiVersions). Below v4 a supported range may not start at
0 (KAFKA-17011: older clients refuse it), so it starts at 1 there, as Kafka 4 answers.
"""

from __future__ import annotations

from strom.cluster.features import SUPPORTED
from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.codec import encode
from strom.protocol.entities import build
from strom.server.dispatcher import RawResponse

API_KEY = ApiKey.API_VERSIONS
MIN_VERSION = 0
MAX_VERSION = 4

# Every client opens every connection with ApiVersions, and the answer never changes (the handler
# table is fixed at import): building and encoding it took ~0.4 ms, most of what a new connection
# costs the broker (a storm of 5,000 reconnecting clients: 2 s of CPU). Encoded once per version
# and feature levels (they change only through UpdateFeatures; keyed by them, not cleared, since
# brokers of different clusters may share this process in tests).
_BODIES: dict[tuple, bytes] = {}  # (version, delegation tokens enabled, feature snapshot) -> body
_MAX_BODIES = 64
ZERO_MIN_SINCE_VERSION = 4


def handle(ctx, request):
    tokens = ctx.broker.delegation_tokens is not None
    features = ctx.broker.features
    key = (ctx.api_version, tokens, features.snapshot)
    body = _BODIES.get(key)
    if body is None:
        if len(_BODIES) >= _MAX_BODIES:
            _BODIES.clear()
        response = _response(ctx.api_version, tokens, features.finalized, features.epoch)
        body = _BODIES[key] = encode(response)
    return RawResponse([body], len(body))


# Served when asked, but not advertised, as a Kafka broker without a client-telemetry receiver
# plugin does (stock Kafka 3.7–4.x): a client then never asks. librdkafka asks any broker that
# advertises them, and even an empty subscription makes every librdkafka client print an info
# line ("Telemetry client instance id changed ...") on every kcat command; strom has no
# receiver for the metrics (its own are in /metrics), so advertising would only add that noise.
NOT_ADVERTISED = frozenset({int(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS), int(ApiKey.PUSH_TELEMETRY)})


# Advertised only with delegation.token.secret.key set: a client then never asks a broker that
# would answer DELEGATION_TOKEN_AUTH_DISABLED (they are still served, with that error).
TOKEN_APIS = frozenset(
    {
        int(ApiKey.CREATE_DELEGATION_TOKEN),
        int(ApiKey.RENEW_DELEGATION_TOKEN),
        int(ApiKey.EXPIRE_DELEGATION_TOKEN),
        int(ApiKey.DESCRIBE_DELEGATION_TOKEN),
    }
)


def _response(version: int, tokens: bool = True, finalized: dict[str, int] | None = None, epoch: int = -1):
    from strom.server.handlers import HANDLERS

    hidden = NOT_ADVERTISED if tokens else NOT_ADVERTISED | TOKEN_APIS
    keys = [
        {"api_key": spec.api_key, "min_version": spec.min_version, "max_version": spec.max_version}
        for spec in sorted(HANDLERS.values(), key=lambda s: s.api_key)
        if spec.api_key not in hidden
    ]
    values = {"error_code": 0, "api_keys": keys, "throttle_time": 0}
    if version >= 3:
        low = 0 if version >= ZERO_MIN_SINCE_VERSION else 1
        values["supported_features"] = [
            {"name": name, "min_version": max(lo, low), "max_version": hi}
            for name, (lo, hi) in sorted(SUPPORTED.items())
        ]
        values["finalized_features_epoch"] = epoch
        values["finalized_features"] = [
            {"name": name, "min_version_level": level, "max_version_level": level}
            for name, level in sorted((finalized or {}).items())
        ]
    return build(response_class_for(API_KEY, version), values)
