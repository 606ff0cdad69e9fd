"""The handler table: one module per API, each with API_KEY, MIN_VERSION, MAX_VERSION, handle().

ApiVersions is answered from this table, so what strom advertises is exactly what it serves.
"""

from __future__ import annotations

import importlib

from strom.server.dispatcher import HandlerSpec

# One module per API; the order is only the order of this list.
_MODULE_NAMES = [
    "api_versions",
    "metadata",
    "produce",
    "fetch",
    "list_offsets",
    "init_producer_id",
    "create_topics",
    "delete_topics",
    "create_partitions",
    "describe_configs",
    "alter_configs",
    "incremental_alter_configs",
    "delete_records",
    "describe_cluster",
    "update_features",
    "describe_log_dirs",
    "alter_replica_log_dirs",
    "offset_for_leader_epoch",
    "elect_leaders",
    "find_coordinator",
    "join_group",
    "sync_group",
    "heartbeat",
    "leave_group",
    "offset_commit",
    "offset_fetch",
    "offset_delete",
    "txn_offset_commit",
    "list_groups",
    "describe_groups",
    "delete_groups",
    "consumer_group_heartbeat",
    "consumer_group_describe",
    "describe_producers",
    "add_partitions_to_txn",
    "add_offsets_to_txn",
    "end_txn",
    "write_txn_markers",
    "describe_transactions",
    "list_transactions",
    "sasl_handshake",
    "sasl_authenticate",
    "describe_user_scram_credentials",
    "alter_user_scram_credentials",
    "describe_client_quotas",
    "alter_client_quotas",
    "alter_partition_reassignments",
    "list_partition_reassignments",
    "describe_acls",
    "create_acls",
    "delete_acls",
    "create_delegation_token",
    "renew_delegation_token",
    "expire_delegation_token",
    "describe_delegation_token",
    "describe_topic_partitions",
    "get_telemetry_subscriptions",
    "push_telemetry",
]
_MODULES = [importlib.import_module(f"strom.server.handlers.{name}") for name in _MODULE_NAMES]

HANDLERS: dict[int, HandlerSpec] = {
    int(m.API_KEY): HandlerSpec(int(m.API_KEY), m.MIN_VERSION, m.MAX_VERSION, m.handle, getattr(m, "decode", None))
    for m in _MODULES
}
