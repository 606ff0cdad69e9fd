"""ApiVersions: the versions strom serves, straight from the handler table."""

from __future__ import annotations

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build

API_KEY = ApiKey.API_VERSIONS
MIN_VERSION = 0
MAX_VERSION = 4


def handle(ctx, request):
    from strom.server.handlers import HANDLERS

    keys = [
        {"api_key": spec.api_key, "min_version": spec.min_version, "max_version": spec.max_version}
        for spec in sorted(HANDLERS.values(), key=lambda s: s.api_key)
    ]
    return build(response_class_for(API_KEY, ctx.api_version), {"error_code": 0, "api_keys": keys, "throttle_time": 0})
