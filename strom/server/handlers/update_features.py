"""UpdateFeatures (KIP-584): upgrade or downgrade the cluster's finalized feature levels.

Any broker answers (Kafka's ZooKeeper-mode brokers forwarded to the controller): the levels are
one znode, written with a compare-and-set, so two brokers updating at once cannot lose an update.
The updates of one request are applied all or none; the first refused one names the reason.
v0 says ``allow_downgrade`` where v1+ says ``upgrade_type`` (a downgrade allowed is a safe one);
v1 adds ``validate_only``; v2 answers with the top-level error only, no per-feature results.
Requires ALTER on the cluster.
"""

from __future__ import annotations

import asyncio

from strom.cluster.features import FeatureUpdate, FeatureUpdateError, UpgradeType
from strom.cluster.store import StoreError
from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build, field_value
from strom.protocol.errors import ErrorCode
from strom.security.acl import Operation
from strom.server.authorization import cluster_allowed

API_KEY = ApiKey.UPDATE_FEATURES
MIN_VERSION = 0
MAX_VERSION = 2
RESULTS_UNTIL_VERSION = 1


def _update(key) -> FeatureUpdate:
    upgrade_type = field_value(key, "upgrade_type")
    if upgrade_type is None:  # v0
        upgrade_type = UpgradeType.SAFE_DOWNGRADE if key.allow_downgrade else UpgradeType.UPGRADE
    return FeatureUpdate(key.feature, int(key.max_version_level), int(upgrade_type))


async def _apply(ctx, updates: list[FeatureUpdate], validate_only: bool) -> None:
    """Write the levels, off the event loop when the store is ZooKeeper (a call may wait on it for
    as long as its session timeout), then answer with them in place on this broker."""
    features = ctx.broker.features
    if features.store is not None and features.store.remote:
        await asyncio.get_running_loop().run_in_executor(None, features.update, updates, validate_only)
    else:
        features.update(updates, validate_only)
    if not validate_only:
        features.load()


async def _handle(ctx, request):
    code: int = ErrorCode.NONE
    message: str | None = None
    if not cluster_allowed(ctx, Operation.ALTER):
        code, message = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
    elif not request.feature_updates:
        code, message = ErrorCode.INVALID_REQUEST, "The request must contain at least one feature update."
    else:
        try:
            await _apply(
                ctx, [_update(key) for key in request.feature_updates], field_value(request, "validate_only", False)
            )
        except FeatureUpdateError as exc:
            code, message = exc.error_code, exc.message
        except StoreError as exc:
            code, message = ErrorCode.FEATURE_UPDATE_FAILED, f"could not write the feature levels: {exc}"
    values: dict = {"throttle_time": 0, "error_code": code, "error_message": message}
    if ctx.api_version <= RESULTS_UNTIL_VERSION:
        values["results"] = [
            {"feature": key.feature, "error_code": code, "error_message": message} for key in request.feature_updates
        ]
    return build(response_class_for(API_KEY, ctx.api_version), values)


def handle(ctx, request):
    return _handle(ctx, request)
