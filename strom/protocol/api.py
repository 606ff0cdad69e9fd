"""Kafka API keys, and what kio knows about each (api_key, version).

kio carries one generated class per message version; this module is the only
place that maps wire numbers to those classes and to header versions, so the
rest of strom never hard-codes a version table. Support is a separate
question: the broker advertises what its handler table serves, which is a
subset of what kio can decode.
"""

from __future__ import annotations

from enum import IntEnum
from pkgutil import resolve_name

from kio.schema.index import api_key_map, schema_name_map
from kio.static.constants import EntityType


class ApiKey(IntEnum):
    """Every Kafka API key, named as in Kafka's `ApiKeys`.

    4..7 are the ZooKeeper-era inter-broker APIs that kio (generated from
    Kafka 4.x) no longer has; they are listed so logs name them.
    """

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    CREATE_DELEGATION_TOKEN = 38
    RENEW_DELEGATION_TOKEN = 39
    EXPIRE_DELEGATION_TOKEN = 40
    DESCRIBE_DELEGATION_TOKEN = 41
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    VOTE = 52
    BEGIN_QUORUM_EPOCH = 53
    END_QUORUM_EPOCH = 54
    DESCRIBE_QUORUM = 55
    ALTER_PARTITION = 56
    UPDATE_FEATURES = 57
    ENVELOPE = 58
    FETCH_SNAPSHOT = 59
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    BROKER_REGISTRATION = 62
    BROKER_HEARTBEAT = 63
    UNREGISTER_BROKER = 64
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    ALLOCATE_PRODUCER_IDS = 67
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    CONTROLLER_REGISTRATION = 70
    GET_TELEMETRY_SUBSCRIPTIONS = 71
    PUSH_TELEMETRY = 72
    ASSIGN_REPLICAS_TO_DIRS = 73
    LIST_CONFIG_RESOURCES = 74
    DESCRIBE_TOPIC_PARTITIONS = 75
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    ADD_RAFT_VOTER = 80
    REMOVE_RAFT_VOTER = 81
    UPDATE_RAFT_VOTER = 82
    INITIALIZE_SHARE_GROUP_STATE = 83
    READ_SHARE_GROUP_STATE = 84
    WRITE_SHARE_GROUP_STATE = 85
    DELETE_SHARE_GROUP_STATE = 86
    READ_SHARE_GROUP_STATE_SUMMARY = 87
    STREAMS_GROUP_HEARTBEAT = 88
    STREAMS_GROUP_DESCRIBE = 89
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92


def known_versions(api_key: int) -> range:
    """The versions kio has classes for (contiguous in Kafka); empty if none."""
    return _VERSIONS.get(api_key, _NO_VERSIONS)


def request_class(api_key: int, api_version: int) -> type | None:
    """kio's request dataclass for (api_key, api_version), or None if kio has none."""
    return _load(api_key, api_version, EntityType.request, _REQUESTS)


def response_class(api_key: int, api_version: int) -> type | None:
    """kio's response dataclass for (api_key, api_version), or None if kio has none."""
    return _load(api_key, api_version, EntityType.response, _RESPONSES)


def request_header_version(api_key: int, api_version: int) -> int:
    """Request header version: 0 (no client id), 1 (client id) or 2 (client id + tagged fields).

    Taken from kio's `__header_schema__`. For versions kio does not know (the
    request will be refused, but its correlation id still has to be read),
    versions above kio's newest take the newest one's header, because Kafka's
    flexible versions are open-ended ("3+"); anything else is read as v1,
    except ControlledShutdown v0, Kafka's single v0-header request.
    """
    cls = request_class(api_key, api_version)
    if cls is None:
        if api_key == ApiKey.CONTROLLED_SHUTDOWN and api_version == 0:
            return 0
        cls = _newest_below(api_key, api_version, request_class)
        if cls is None:
            return 1
    return cls.__header_schema__.__version__


def response_header_version(api_key: int, api_version: int) -> int:
    """Response header version: 0 (correlation id) or 1 (correlation id + tagged fields).

    ApiVersions always answers with v0, also at versions nobody knows: a
    client that does not yet know which versions we speak must be able to
    parse the answer (KIP-511). kio's classes encode this for known versions.
    """
    if api_key == ApiKey.API_VERSIONS:
        return 0
    cls = response_class(api_key, api_version) or _newest_below(api_key, api_version, response_class)
    return 0 if cls is None else cls.__header_schema__.__version__


def is_flexible(api_key: int, api_version: int) -> bool | None:
    """Whether the body uses compact encodings and tagged fields; None if kio does not know the version."""
    cls = request_class(api_key, api_version)
    return None if cls is None else cls.__flexible__


def _newest_below(api_key: int, api_version: int, load) -> type | None:
    versions = known_versions(api_key)
    if versions and api_version > versions[-1]:
        return load(api_key, versions[-1])
    return None


def _load(api_key: int, api_version: int, kind: EntityType, cache: dict) -> type | None:
    # Look up in kio's index before importing, and cache only what exists:
    # keys come from clients, so caching misses would let them grow the dict.
    key = (api_key, api_version)
    cls = cache.get(key)
    if cls is None:
        name = api_key_map.get(api_key)
        paths = schema_name_map.get(name, {}).get(api_version) if name else None
        if not paths or kind not in paths:
            return None
        cls = cache[key] = resolve_name(paths[kind])
    return cls


def _versions() -> dict[int, range]:
    out = {}
    for key, name in api_key_map.items():
        versions = sorted(schema_name_map.get(name, ()))
        if versions:
            out[key] = range(versions[0], versions[-1] + 1)
    return out


_NO_VERSIONS = range(0)
_VERSIONS = _versions()
_REQUESTS: dict[tuple[int, int], type] = {}
_RESPONSES: dict[tuple[int, int], type] = {}
