"""Kafka's entity config znodes (``/config/users/<u>``, ``/config/clients/<c>``, ...).

One znode holds every key of an entity: a user's SCRAM credentials and its quotas live side by
side, so each writer reads the node, changes only its own keys and writes it back with a
compare-and-set (any broker may write it).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from strom.cluster.store import BadVersionError, MetadataStore, NodeExistsError, NoNodeError, NotEmptyError


def entity_configs(data: bytes) -> dict[str, str]:
    """The ``config`` map of a node's JSON (``{"version":1,"config":{...}}``); {} when unreadable."""
    try:
        value = json.loads(data)
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in (value.get("config") or {}).items()} if isinstance(value, dict) else {}


def update_entity_config(store: MetadataStore, path: str, change: Callable[[dict[str, str]], None]) -> None:
    """Apply ``change`` to the node's keys and write them back, retrying when another broker wrote
    it meanwhile. A node left without keys is deleted, unless nodes live under it (a user's
    client-id quotas): then it stays, empty. No node is created for no keys."""
    while True:
        try:
            data, version = store.get(path)
        except NoNodeError:
            data, version = None, None
        configs = entity_configs(data) if data is not None else {}
        change(configs)
        payload = json.dumps({"version": 1, "config": dict(sorted(configs.items()))}, separators=(",", ":")).encode()
        try:
            if version is None:
                if configs:
                    store.create(path, payload, makepath=True)
            elif configs:
                store.set(path, payload, version)
            else:
                try:
                    store.delete(path, version)
                except NotEmptyError:
                    store.set(path, payload, version)
            return
        except (BadVersionError, NodeExistsError, NoNodeError):
            continue
