"""Feature levels (KIP-584): what the cluster has switched on, kept where Kafka's ZooKeeper mode keeps it.

A feature is a named protocol capability with a level; the cluster *finalizes* one level of each
feature, and a client reads the levels from ApiVersions (v3+) to decide how to talk, as a Kafka
4.x producer uses transactions v2 (KIP-890 part 2) only where ``transaction.version`` is 2. The
levels live in the znode ``/feature`` in Kafka's own format (``FeatureZNode`` v2)::

    {"version": 2, "status": 1, "features": {"transaction.version": {"max_version_level": 2}}}

and the znode's version is the finalized-features epoch ApiVersions reports. Every broker watches
it, so a level changed through UpdateFeatures on any broker reaches every ApiVersions answer
within a watch round trip. A level of 0 means "off" and is not listed, as in Kafka.

strom advertises the two features of Kafka 4.x that a ZooKeeper-mode broker can mean:
``transaction.version`` 0..2 and ``group.version`` 0..1. ``metadata.version`` and
``kraft.version`` describe a KRaft metadata log, which strom does not have.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass

from strom.cluster.store import BadVersionError, MetadataStore, NodeExistsError, NoNodeError
from strom.cluster.watched import WatchedView
from strom.protocol.errors import ErrorCode

log = logging.getLogger("strom.cluster")

FEATURE_PATH = "/feature"
ZNODE_VERSION = 2
STATUS_ENABLED = 1
TRANSACTION_VERSION = "transaction.version"
GROUP_VERSION = "group.version"

# name -> (min, max) level this broker supports
SUPPORTED: dict[str, tuple[int, int]] = {GROUP_VERSION: (0, 1), TRANSACTION_VERSION: (0, 2)}
# A new cluster starts where a new Kafka 4.1 cluster starts: the consumer group protocol
# (KIP-848) and transactions v2 (KIP-890 part 2) on.
DEFAULT_LEVELS: dict[str, int] = {GROUP_VERSION: 1, TRANSACTION_VERSION: 2}


class UpgradeType:
    """UpdateFeatures' upgrade_type (v1+); v0's allow_downgrade maps to SAFE_DOWNGRADE."""

    UNKNOWN = 0
    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3


@dataclass(frozen=True)
class FeatureUpdate:
    name: str
    level: int
    upgrade_type: int = UpgradeType.UPGRADE


class FeatureUpdateError(Exception):
    """An update refused, with Kafka's code and message."""

    def __init__(self, error_code: int, message: str):
        super().__init__(message)
        self.error_code = error_code
        self.message = message


def encode_znode(levels: dict[str, int]) -> bytes:
    features = {name: {"max_version_level": level} for name, level in sorted(levels.items()) if level > 0}
    return json.dumps({"version": ZNODE_VERSION, "status": STATUS_ENABLED, "features": features}).encode()


def decode_znode(data: bytes) -> dict[str, int]:
    """The finalized levels of a ``/feature`` znode (v1 or v2; a disabled node finalizes nothing)."""
    try:
        node = json.loads(data)
        if node.get("status") != STATUS_ENABLED:
            return {}
        return {
            str(name): int(info["max_version_level"])
            for name, info in (node.get("features") or {}).items()
            if int(info["max_version_level"]) > 0
        }
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ValueError(f"unreadable {FEATURE_PATH} znode {data[:200]!r}: {exc}") from None


def check_update(update: FeatureUpdate, current: int) -> None:
    """Kafka's checks of one update (FeatureControlManager.updateFeature), with its messages."""

    def invalid(reason: str) -> FeatureUpdateError:
        return FeatureUpdateError(
            ErrorCode.INVALID_UPDATE_VERSION,
            f"Invalid update version {update.level} for feature {update.name}. {reason}",
        )

    if update.upgrade_type not in (UpgradeType.UPGRADE, UpgradeType.SAFE_DOWNGRADE, UpgradeType.UNSAFE_DOWNGRADE):
        raise FeatureUpdateError(ErrorCode.INVALID_REQUEST, f"Unknown upgrade type {update.upgrade_type}.")
    if update.name not in SUPPORTED:
        raise invalid("The broker does not support the given feature.")
    if update.level < 0:
        raise invalid("A feature version cannot be less than 0.")
    low, high = SUPPORTED[update.name]
    if not low <= update.level <= high:
        raise invalid(f"The broker only supports versions {low}-{high}.")
    if update.level < current and update.upgrade_type == UpgradeType.UPGRADE:
        raise invalid(
            "Can't downgrade the version of this feature without setting the upgrade type to either safe or "
            "unsafe downgrade."
        )
    if update.level > current and update.upgrade_type != UpgradeType.UPGRADE:
        raise invalid("Can't downgrade to a newer version.")


class FeatureLevels(WatchedView):
    """The finalized levels and their epoch, in memory, kept current by a watch on ``/feature``."""

    what = "feature levels"

    def __init__(self, store: MetadataStore | None = None, loop: asyncio.AbstractEventLoop | None = None):
        super().__init__(loop)
        self.store = store
        self.finalized: dict[str, int] = {}
        self.epoch = -1
        # (epoch, levels), hashable: what ApiVersions keys its encoded answers by
        self.snapshot: tuple[int, tuple[tuple[str, int], ...]] = (-1, ())

    def start(self, store: MetadataStore, loop: asyncio.AbstractEventLoop | None) -> None:
        """Create ``/feature`` with the defaults if no broker has yet, then read and watch it."""
        self.store, self._loop = store, loop
        try:
            store.create(FEATURE_PATH, encode_znode(DEFAULT_LEVELS))
            log.info("finalized the default feature levels %s", DEFAULT_LEVELS)
        except NodeExistsError:
            pass
        self.load()

    def load(self) -> None:
        if self.store is None:
            return
        try:
            data, version = self.store.get(FEATURE_PATH, self.watch)
        except NoNodeError:
            finalized, epoch = {}, -1
            if self.watch is not None:
                self.store.exists(FEATURE_PATH, self.watch)
        else:
            try:
                finalized = decode_znode(data)
            except ValueError as exc:
                log.warning("%s; keeping the levels read before", exc)
                return
            epoch = version
        self.finalized, self.epoch = finalized, epoch
        self.snapshot = (epoch, tuple(sorted(finalized.items())))

    def level(self, name: str) -> int:
        return self.finalized.get(name, 0)

    def update(self, updates: Iterable[FeatureUpdate], validate_only: bool = False) -> None:
        """Check every update against the levels in the store, then write them all or none.

        A compare-and-set on the znode's version: two brokers updating at once cannot lose one
        another's change; the loser re-reads and checks again. Store calls only (a caller may run
        it off the event loop); ``load`` then takes the new levels in, as the watch would.
        """
        updates = list(updates)
        names = [u.name for u in updates]
        for name in names:
            if names.count(name) > 1:
                raise FeatureUpdateError(ErrorCode.INVALID_REQUEST, f"Feature {name} was specified more than once.")
        if self.store is None:
            raise FeatureUpdateError(ErrorCode.FEATURE_UPDATE_FAILED, "the metadata store is not open")
        while True:
            try:
                data, version = self.store.get(FEATURE_PATH)
                levels = decode_znode(data)
            except NoNodeError:
                data, version, levels = b"", -1, {}
            except ValueError as exc:
                raise FeatureUpdateError(ErrorCode.FEATURE_UPDATE_FAILED, str(exc)) from None
            for update in updates:
                check_update(update, levels.get(update.name, 0))
            if validate_only:
                return
            new = dict(levels)
            for update in updates:
                new[update.name] = update.level
            try:
                if version < 0:
                    self.store.create(FEATURE_PATH, encode_znode(new))
                else:
                    self.store.set(FEATURE_PATH, encode_znode(new), version)
            except (BadVersionError, NodeExistsError):
                continue
            log.info("feature levels %s -> %s", levels, {k: v for k, v in new.items() if v > 0})
            return
