"""Group-level configs (KIP-848; Kafka 3.8+/4.0's ConfigResource type GROUP, 32).

A group may override the broker's ``group.consumer.session.timeout.ms`` and
``group.consumer.heartbeat.interval.ms`` with ``consumer.session.timeout.ms`` and
``consumer.heartbeat.interval.ms``, set by IncrementalAlterConfigs (or AlterConfigs) on the group
and shown by DescribeConfigs. Values are checked as Kafka's GroupConfig does: whole numbers within
``group.consumer.min/max.session.timeout.ms`` and ``group.consumer.min/max.heartbeat.interval.ms``,
with its messages; any other key is refused ("Unknown group config name"). Kafka keeps them in
its KRaft metadata; strom keeps them as it keeps every entity config, in the znode
``/config/groups/<group>``, which every broker watches (a coordinator answers the next heartbeat
with the new interval, and times members out by the new session timeout from their next one).
"""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import quote, unquote

from strom.cluster.entity_config import entity_configs, update_entity_config
from strom.cluster.store import MetadataStore, NoNodeError
from strom.cluster.watched import WatchedView
from strom.protocol.errors import InvalidConfigError, InvalidRequestError

log = logging.getLogger("strom.group")

GROUP_RESOURCE = 32  # ConfigResource.Type.GROUP
CONFIG_GROUPS = "/config/groups"
SESSION_TIMEOUT = "consumer.session.timeout.ms"
HEARTBEAT_INTERVAL = "consumer.heartbeat.interval.ms"
KEYS = (HEARTBEAT_INTERVAL, SESSION_TIMEOUT)
_BROKER_KEYS = {
    SESSION_TIMEOUT: "group.consumer.session.timeout.ms",
    HEARTBEAT_INTERVAL: "group.consumer.heartbeat.interval.ms",
}
_DOCS = {
    SESSION_TIMEOUT: "The timeout to detect client failures when using the consumer group protocol.",
    HEARTBEAT_INTERVAL: "The heartbeat interval given to the members of a consumer group.",
}
# DescribeConfigs: ConfigSource and ConfigType values (a group without an override shows the
# broker's value as its default, with the broker key as synonym)
_GROUP_CONFIG, _STATIC_BROKER_CONFIG, _DEFAULT_CONFIG, _INT = 8, 4, 5, 3
SET, DELETE = 0, 1


def group_config_path(group: str) -> str:
    return f"{CONFIG_GROUPS}/{quote(group, safe='')}"


class GroupConfigs(WatchedView):
    """Every group's overrides, in memory, kept current by watches on /config/groups."""

    what = "group configs"

    def __init__(self, store: MetadataStore | None, broker_config, loop: asyncio.AbstractEventLoop | None = None):
        self.store = store
        self.config = broker_config
        super().__init__(loop)
        self._overrides: dict[str, dict[str, str]] = {}

    # -- reading ---------------------------------------------------------------------------------
    def load(self) -> None:
        if self.store is None:
            return
        watch = self.watch
        try:
            names = self.store.children(CONFIG_GROUPS, watch)
        except NoNodeError:
            names = []
            if watch is not None:
                self.store.exists(CONFIG_GROUPS, watch)
        found = {}
        for name in names:
            try:
                data, _ = self.store.get(f"{CONFIG_GROUPS}/{name}", watch)
            except NoNodeError:
                continue
            configs = {k: v for k, v in entity_configs(data).items() if k in KEYS}
            if configs:
                found[unquote(name)] = configs
        self._overrides = found

    def start(self, store: MetadataStore, loop: asyncio.AbstractEventLoop | None) -> None:
        """Read every group's configs and watch them (the broker calls this once its store is up)."""
        self.store, self._loop = store, loop
        self.load()

    def overrides(self, group: str) -> dict[str, str]:
        return dict(self._overrides.get(group, {}))

    def _int(self, group: str, key: str) -> int:
        value = self._overrides.get(group, {}).get(key)
        if value is not None:
            try:
                return int(value)
            except ValueError:
                log.warning("ignoring group %s's %s=%r: not a number", group, key, value)
        return int(getattr(self.config, _BROKER_KEYS[key].replace(".", "_")))

    def session_timeout_ms(self, group: str) -> int:
        return self._int(group, SESSION_TIMEOUT)

    def heartbeat_interval_ms(self, group: str) -> int:
        return self._int(group, HEARTBEAT_INTERVAL)

    # -- IncrementalAlterConfigs / AlterConfigs ----------------------------------------------------
    def validate(self, overrides: dict[str, str]) -> None:
        """Kafka's GroupConfig.validate, with its messages."""
        for key in overrides:
            if key not in KEYS:
                raise InvalidConfigError(f"Unknown group config name: {key}")
        values = {}
        for key in KEYS:
            raw = overrides.get(key)
            if raw is None:
                values[key] = int(getattr(self.config, _BROKER_KEYS[key].replace(".", "_")))
                continue
            try:
                values[key] = int(raw.strip())
            except ValueError:
                raise InvalidConfigError(
                    f"Invalid value {raw} for configuration {key}: Not a number of type INT"
                ) from None
            if values[key] < 1:
                raise InvalidConfigError(f"Invalid value {raw} for configuration {key}: Value must be at least 1")
        c = self.config
        bounds = (
            (
                HEARTBEAT_INTERVAL,
                c.group_consumer_min_heartbeat_interval_ms,
                c.group_consumer_max_heartbeat_interval_ms,
            ),
            (SESSION_TIMEOUT, c.group_consumer_min_session_timeout_ms, c.group_consumer_max_session_timeout_ms),
        )
        for key, low, high in bounds:
            if values[key] < low:
                raise InvalidConfigError(f"{key} must be greater than or equal to {_bound_key('min', key)}")
            if values[key] > high:
                raise InvalidConfigError(f"{key} must be less than or equal to {_bound_key('max', key)}")

    def alter(
        self, group: str, operations: list[tuple[str, int, str | None]], replace: bool, validate_only: bool
    ) -> None:
        """``operations``: (key, SET or DELETE, value); ``replace`` (AlterConfigs) drops every key
        not set. Validated as a whole before anything is written."""
        if not group:
            raise InvalidRequestError("the group name must not be empty")
        overrides = {} if replace else self.overrides(group)
        for key, op, value in operations:
            if op == DELETE:
                overrides.pop(key, None)
            elif op == SET:
                if value is None:
                    raise InvalidRequestError(f"null value is not allowed for {key} with SET")
                overrides[key] = value
            else:
                raise InvalidConfigError(f"{key}: only SET and DELETE apply to group configs")
        self.validate(overrides)
        if validate_only:
            return

        def change(configs: dict[str, str]) -> None:
            configs.clear()
            configs.update(overrides)

        if self.store is not None:  # None: a coordinator built without a broker (tests)
            update_entity_config(self.store, group_config_path(group), change)
        if overrides:  # this broker sees its own write at once; the watch brings it to the others
            self._overrides[group] = overrides
        else:
            self._overrides.pop(group, None)

    # -- DescribeConfigs ---------------------------------------------------------------------------
    def describe(self, group: str, wanted: set[str] | None, synonyms: bool, docs: bool) -> list[dict]:
        overrides = self._overrides.get(group, {})
        entries = []
        for key in KEYS:
            if wanted is not None and key not in wanted:
                continue
            broker_key = _BROKER_KEYS[key]
            broker_value = str(getattr(self.config, broker_key.replace(".", "_")))
            chain = [{"name": broker_key, "value": broker_value, "source": _STATIC_BROKER_CONFIG}]
            if key in overrides:
                chain.insert(0, {"name": key, "value": overrides[key], "source": _GROUP_CONFIG})
            entries.append(
                {
                    "name": key,
                    "value": chain[0]["value"],
                    "read_only": False,
                    "is_sensitive": False,
                    "config_source": chain[0]["source"] if key in overrides else _DEFAULT_CONFIG,
                    "synonyms": chain if synonyms else [],
                    "config_type": _INT,
                    "documentation": _DOCS[key] if docs else None,
                }
            )
        return entries


def _bound_key(which: str, key: str) -> str:
    kind = "session.timeout.ms" if key == SESSION_TIMEOUT else "heartbeat.interval.ms"
    return f"group.consumer.{which}.{kind}"
