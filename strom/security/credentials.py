"""Every user's SCRAM credentials, read from ``/config/users/<user>`` and kept current by watches.

Kafka's layout: ``{"version":1,"config":{"SCRAM-SHA-256":"salt=...,stored_key=...,server_key=...,iterations=4096"}}``.
A credential altered through any broker is written there, the watches fire on every broker, and
the next login uses it: no restart. Other entries of the same node (Kafka keeps a user's quotas
there too) are kept as they are when credentials change.
"""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import unquote

from strom.cluster import model
from strom.cluster.entity_config import entity_configs, update_entity_config
from strom.cluster.store import (
    MetadataStore,
    NoNodeError,
)
from strom.cluster.watched import WatchedView
from strom.security.scram import MECHANISM_IDS, ScramCredential

log = logging.getLogger("strom.security")

SCRAM_MECHANISMS = tuple(MECHANISM_IDS.values())


class CredentialCache(WatchedView):
    what = "SCRAM credentials"

    def __init__(self, store: MetadataStore, loop: asyncio.AbstractEventLoop | None = None):
        self.store = store
        super().__init__(loop)
        self._credentials: dict[tuple[str, str], ScramCredential] = {}

    def lookup(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._credentials.get((user, mechanism))

    def users(self) -> dict[str, dict[str, ScramCredential]]:
        by_user: dict[str, dict[str, ScramCredential]] = {}
        for (user, mechanism), credential in sorted(self._credentials.items()):
            by_user.setdefault(user, {})[mechanism] = credential
        return by_user

    def load(self) -> None:
        """Re-read every user's credentials (watching for changes when a loop was given)."""
        watch = self.watch
        found: dict[tuple[str, str], ScramCredential] = {}
        try:
            names = self.store.children(model.CONFIG_USERS, watch)
        except NoNodeError:
            names = []
            if watch is not None:
                self.store.exists(model.CONFIG_USERS, watch)
        for name in names:
            user = unquote(name)
            try:
                data, _ = self.store.get(f"{model.CONFIG_USERS}/{name}", watch)
            except NoNodeError:
                continue
            for mechanism, text in entity_configs(data).items():
                if mechanism in SCRAM_MECHANISMS:
                    try:
                        found[(user, mechanism)] = ScramCredential.from_text(str(text))
                    except ValueError as exc:
                        log.warning("ignoring the %s credential of user %r: %s", mechanism, user, exc)
        self._credentials = found

    # -- writes (AlterUserScramCredentials) ---------------------------------------------------------
    def alter(self, user: str, upserts: dict[str, ScramCredential], deletes: set[str]) -> None:
        """Apply one user's changes to its node, keeping its other entries (its quotas)."""

        def change(configs: dict[str, str]) -> None:
            for mechanism in deletes:
                configs.pop(mechanism, None)
            for mechanism, credential in upserts.items():
                configs[mechanism] = credential.to_text()

        update_entity_config(self.store, model.user_config_path(user), change)
        self.load()
