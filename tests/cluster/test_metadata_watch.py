"""A partition state created while a broker re-reads the metadata must not be missed.

Seen in the fault tests: a new topic's leader never learned it was leader (followers got
UNKNOWN_LEADER_EPOCH forever) because its state znode was created between the broker's get (no
node) and its exists-watch (node found, so the watch waits for a change that never comes).
"""

from __future__ import annotations

from strom.cluster import model
from strom.cluster.local_store import LocalStore
from strom.cluster.metadata_cache import MetadataCache
from strom.cluster.model import PartitionState, TopicAssignment


class CreatedInBetween(LocalStore):
    """Creates ``path`` just before the first exists() on it: the interleaving the race needs."""

    def __init__(self, path: str, data: bytes):
        super().__init__(None)
        self.path, self.data, self.done = path, data, False

    def exists(self, path, watch=None):
        if path == self.path and not self.done:
            self.done = True
            self.create(path, self.data, makepath=True)
        return super().exists(path, watch)


def test_state_created_between_get_and_exists_is_read():
    state = PartitionState(1, 0, [1, 2, 0])
    store = CreatedInBetween(model.partition_state_path("t", 0), state.to_json())
    store.create(model.topic_path("t"), TopicAssignment("t", {0: [1, 2, 0]}).to_json(), makepath=True)
    fired = []
    cache = MetadataCache()
    cache.load(store, watch=fired.append)
    assert store.done
    assert cache.topics["t"].states[0] == state
    assert cache.leader_of("t", 0) == 1
