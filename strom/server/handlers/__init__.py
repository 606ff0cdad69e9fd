"""The handler table: one module per API, each with API_KEY, MIN_VERSION, MAX_VERSION, handle().

ApiVersions is answered from this table, so what strom advertises is exactly what it serves.
"""

from __future__ import annotations

from strom.server.dispatcher import HandlerSpec
from strom.server.handlers import (
    api_versions,
    delete_groups,
    describe_groups,
    find_coordinator,
    heartbeat,
    join_group,
    leave_group,
    list_groups,
    offset_commit,
    offset_delete,
    offset_fetch,
    sync_group,
    create_topics,
    fetch,
    init_producer_id,
    list_offsets,
    metadata,
    produce,
    delete_topics,
    create_partitions,
    describe_configs,
    alter_configs,
    incremental_alter_configs,
    delete_records,
    describe_cluster,
    describe_log_dirs,
    offset_for_leader_epoch,
    elect_leaders,
)

_MODULES = [
    api_versions,
    find_coordinator,
    join_group,
    sync_group,
    heartbeat,
    leave_group,
    offset_commit,
    offset_fetch,
    offset_delete,
    list_groups,
    describe_groups,
    delete_groups,
    metadata,
    produce,
    fetch,
    list_offsets,
    create_topics,
    init_producer_id,
    delete_topics,
    create_partitions,
    describe_configs,
    alter_configs,
    incremental_alter_configs,
    delete_records,
    describe_cluster,
    describe_log_dirs,
    offset_for_leader_epoch,
    elect_leaders,
]

HANDLERS: dict[int, HandlerSpec] = {
    int(m.API_KEY): HandlerSpec(int(m.API_KEY), m.MIN_VERSION, m.MAX_VERSION, m.handle, getattr(m, "decode", None))
    for m in _MODULES
}
