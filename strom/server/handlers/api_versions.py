"""ApiVersions: the versions strom serves, straight from the handler table."""

from __future__ import annotations

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.codec import encode
from strom.protocol.entities import build
from strom.server.dispatcher import RawResponse

API_KEY = ApiKey.API_VERSIONS
MIN_VERSION = 0
MAX_VERSION = 4

# Every client opens every connection with ApiVersions, and the answer never changes (the handler
# table is fixed at import): building and encoding it took ~0.4 ms, most of what a new connection
# costs the broker (a storm of 5,000 reconnecting clients: 2 s of CPU). Encoded once per version.
_BODIES: dict[tuple[int, bool], bytes] = {}  # (version, delegation tokens enabled) -> body


def handle(ctx, request):
    tokens = ctx.broker.delegation_tokens is not None
    body = _BODIES.get((ctx.api_version, tokens))
    if body is None:
        body = _BODIES[(ctx.api_version, tokens)] = encode(_response(ctx.api_version, tokens))
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


def _response(version: int, tokens: bool = True):
    from strom.server.handlers import HANDLERS

    hidden = NOT_ADVERTISED if tokens else NOT_ADVERTISED | TOKEN_APIS
    keys = [
        {"api_key": spec.api_key, "min_version": spec.min_version, "max_version": spec.max_version}
        for spec in sorted(HANDLERS.values(), key=lambda s: s.api_key)
        if spec.api_key not in hidden
    ]
    return build(response_class_for(API_KEY, version), {"error_code": 0, "api_keys": keys, "throttle_time": 0})
