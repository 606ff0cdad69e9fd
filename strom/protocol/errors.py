"""Kafka error codes and the exceptions that carry them.

Code below the protocol layer raises a `KafkaError` subclass; the dispatcher
turns it into the error code of the response in one place, so handlers and
storage never pick codes by hand. Per-partition failures that are not
exceptional are returned as `ErrorCode` values instead.

The numbers are Kafka's (and kio's: tests/protocol/test_api.py checks that the
two enums agree); the names are Kafka's upper-case spelling, which is what
people grep for in Kafka's docs and logs.
"""

from __future__ import annotations

from enum import IntEnum


class ErrorCode(IntEnum):
    """A Kafka error code; an int16 on the wire.

    Members compare equal to kio's `ErrorCode` members with the same number,
    and kio's writers accept them (they only read `.value`), so either enum can
    be put into a kio response.
    """

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    DELEGATION_TOKEN_EXPIRED = 66
    INVALID_PRINCIPAL_TYPE = 67
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    LISTENER_NOT_FOUND = 72
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    THROTTLING_QUOTA_EXCEEDED = 89
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INCONSISTENT_VOTER_SET = 94
    INVALID_UPDATE_VERSION = 95
    FEATURE_UPDATE_FAILED = 96
    PRINCIPAL_DESERIALIZATION_FAILURE = 97
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_TOPIC_ID = 103
    INCONSISTENT_CLUSTER_ID = 104
    TRANSACTIONAL_ID_NOT_FOUND = 105
    FETCH_SESSION_TOPIC_ID_ERROR = 106
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    OFFSET_MOVED_TO_TIERED_STORAGE = 109
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    UNKNOWN_CONTROLLER_ID = 116
    UNKNOWN_SUBSCRIPTION_ID = 117
    TELEMETRY_TOO_LARGE = 118
    INVALID_REGISTRATION = 119
    TRANSACTION_ABORTABLE = 120
    INVALID_RECORD_STATE = 121
    SHARE_SESSION_NOT_FOUND = 122
    INVALID_SHARE_SESSION_EPOCH = 123
    FENCED_STATE_EPOCH = 124
    INVALID_VOTER_KEY = 125
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127
    INVALID_REGULAR_EXPRESSION = 128
    REBOOTSTRAP_REQUIRED = 129
    STREAMS_INVALID_TOPOLOGY = 130
    STREAMS_INVALID_TOPOLOGY_EPOCH = 131
    STREAMS_TOPOLOGY_FENCED = 132
    SHARE_SESSION_LIMIT_REACHED = 133

    @property
    def retriable(self) -> bool:
        """Whether a client may retry the request unchanged (Kafka's RetriableException).

        kio is imported here, not at the top: the storage modules import this one, and a cleaner
        process, which needs only them, would otherwise import kio's schemas (and hypothesis, which
        kio imports when it is installed) at start, a tenth of a second of CPU beside the broker."""
        from kio.schema.errors import ErrorCode as KioErrorCode

        return KioErrorCode(self.value).retriable

    @classmethod
    def from_wire(cls, code: int) -> ErrorCode:
        """Map a received code to a member; unknown codes become UNKNOWN_SERVER_ERROR, as in Kafka's `Errors.forCode`."""
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN_SERVER_ERROR


class KafkaError(Exception):
    """An error that becomes `error_code` in a response.

    Subclasses fix the code; `KafkaError(msg, error_code=...)` covers the rare
    code that has no subclass yet, so callers never need a generic fallback.
    """

    error_code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str = "", *, error_code: ErrorCode | None = None) -> None:
        if error_code is not None:
            self.error_code = error_code
        super().__init__(message or self.error_code.name)

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


# Records and logs
class OffsetOutOfRangeError(KafkaError):
    """The offset is outside [log start, log end]; the client resets by its auto.offset.reset."""

    error_code = ErrorCode.OFFSET_OUT_OF_RANGE


class CorruptRecordError(KafkaError):
    """A batch failed its CRC or its framing is inconsistent (CORRUPT_MESSAGE)."""

    error_code = ErrorCode.CORRUPT_MESSAGE


class InvalidRecordError(KafkaError):
    """A well-formed batch that the broker refuses (bad magic, offsets, null key on a compacted topic…)."""

    error_code = ErrorCode.INVALID_RECORD


class RecordTooLargeError(KafkaError):
    """A batch is larger than max.message.bytes (MESSAGE_TOO_LARGE)."""

    error_code = ErrorCode.MESSAGE_TOO_LARGE


class RecordListTooLargeError(KafkaError):
    """The record set of one partition is larger than a segment can hold."""

    error_code = ErrorCode.RECORD_LIST_TOO_LARGE


class RecordValidationError(KafkaError):
    """Records of a batch break a topic rule; the batch is refused and they are named (KIP-467).

    ``record_errors`` are (index in the batch, message) pairs, sent in ProduceResponse v8+'s
    record_errors so a client fails exactly those records with the batch's error code and the
    others with its own "invalid different record" error. The code is INVALID_RECORD, or
    INVALID_TIMESTAMP when any record has a bad timestamp, as in Kafka.
    """

    error_code = ErrorCode.INVALID_RECORD

    def __init__(
        self, message: str, record_errors: list[tuple[int, str | None]], *, error_code: ErrorCode | None = None
    ) -> None:
        super().__init__(message, error_code=error_code)
        self.record_errors = record_errors


class InvalidTimestampError(KafkaError):
    """A CreateTime is outside message.timestamp.*.ms of the broker's clock."""

    error_code = ErrorCode.INVALID_TIMESTAMP


class UnsupportedCompressionTypeError(KafkaError):
    error_code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


class KafkaStorageError(KafkaError):
    """The log directory failed (I/O error); clients retry against another replica."""

    error_code = ErrorCode.KAFKA_STORAGE_ERROR


class ResourceExhaustedError(KafkaStorageError):
    """The broker ran out of open files or memory while touching a log: retriable, and unlike a
    disk failure it does not take the log dir offline (the message names the resource)."""


# Topics, partitions and configs
class UnknownTopicOrPartitionError(KafkaError):
    error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


class UnknownTopicIdError(KafkaError):
    error_code = ErrorCode.UNKNOWN_TOPIC_ID


class InvalidTopicError(KafkaError):
    """Bad topic name (length, characters) or an operation not allowed on an internal topic."""

    error_code = ErrorCode.INVALID_TOPIC_EXCEPTION


class TopicAlreadyExistsError(KafkaError):
    error_code = ErrorCode.TOPIC_ALREADY_EXISTS


class InvalidPartitionsError(KafkaError):
    error_code = ErrorCode.INVALID_PARTITIONS


class InvalidReplicationFactorError(KafkaError):
    error_code = ErrorCode.INVALID_REPLICATION_FACTOR


class InvalidReplicaAssignmentError(KafkaError):
    error_code = ErrorCode.INVALID_REPLICA_ASSIGNMENT


class InvalidConfigError(KafkaError):
    error_code = ErrorCode.INVALID_CONFIG


class PolicyViolationError(KafkaError):
    error_code = ErrorCode.POLICY_VIOLATION


# Leadership and replication
class NotLeaderError(KafkaError):
    """This broker is not the leader (or, for follower fetches, not a replica)."""

    error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER


class LeaderNotAvailableError(KafkaError):
    error_code = ErrorCode.LEADER_NOT_AVAILABLE


class NotControllerError(KafkaError):
    error_code = ErrorCode.NOT_CONTROLLER


class FencedLeaderEpochError(KafkaError):
    """The request's leader epoch is older than ours: the client's metadata is stale."""

    error_code = ErrorCode.FENCED_LEADER_EPOCH


class UnknownLeaderEpochError(KafkaError):
    """The request's leader epoch is newer than ours: we have not caught up yet."""

    error_code = ErrorCode.UNKNOWN_LEADER_EPOCH


class NotEnoughReplicasError(KafkaError):
    """The ISR is smaller than min.insync.replicas; nothing was appended."""

    error_code = ErrorCode.NOT_ENOUGH_REPLICAS


class NotEnoughReplicasAfterAppendError(KafkaError):
    """The ISR shrank below min.insync.replicas after the append (the data is in the leader's log)."""

    error_code = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND


class RequestTimedOutError(KafkaError):
    error_code = ErrorCode.REQUEST_TIMED_OUT


class InvalidRequiredAcksError(KafkaError):
    error_code = ErrorCode.INVALID_REQUIRED_ACKS


# Requests
class InvalidRequestError(KafkaError):
    """The request is malformed or inconsistent in a way no specific code describes."""

    error_code = ErrorCode.INVALID_REQUEST


class UnsupportedVersionError(KafkaError):
    error_code = ErrorCode.UNSUPPORTED_VERSION


class DecodeError(InvalidRequestError, ValueError):
    """Bytes that do not decode as the message they claim to be.

    A ValueError too, so code that only knows it is parsing input can catch it
    without importing the Kafka hierarchy.
    """


# Idempotence and transactions
class OutOfOrderSequenceError(KafkaError):
    error_code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class DuplicateSequenceError(KafkaError):
    """The batch was already appended; the producer treats this as success."""

    error_code = ErrorCode.DUPLICATE_SEQUENCE_NUMBER


class InvalidProducerEpochError(KafkaError):
    error_code = ErrorCode.INVALID_PRODUCER_EPOCH


class ProducerFencedError(KafkaError):
    error_code = ErrorCode.PRODUCER_FENCED


class UnknownProducerIdError(KafkaError):
    error_code = ErrorCode.UNKNOWN_PRODUCER_ID


class InvalidProducerIdMappingError(KafkaError):
    error_code = ErrorCode.INVALID_PRODUCER_ID_MAPPING


class InvalidTxnStateError(KafkaError):
    error_code = ErrorCode.INVALID_TXN_STATE


class InvalidTransactionTimeoutError(KafkaError):
    error_code = ErrorCode.INVALID_TRANSACTION_TIMEOUT


class ConcurrentTransactionsError(KafkaError):
    error_code = ErrorCode.CONCURRENT_TRANSACTIONS


class TransactionCoordinatorFencedError(KafkaError):
    """A marker or request from a coordinator whose epoch is older than one already seen."""

    error_code = ErrorCode.TRANSACTION_COORDINATOR_FENCED


class UnstableOffsetCommitError(KafkaError):
    error_code = ErrorCode.UNSTABLE_OFFSET_COMMIT


# Groups and coordinators
class CoordinatorNotAvailableError(KafkaError):
    error_code = ErrorCode.COORDINATOR_NOT_AVAILABLE


class CoordinatorLoadInProgressError(KafkaError):
    error_code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


class NotCoordinatorError(KafkaError):
    error_code = ErrorCode.NOT_COORDINATOR


class IllegalGenerationError(KafkaError):
    error_code = ErrorCode.ILLEGAL_GENERATION


class UnknownMemberIdError(KafkaError):
    error_code = ErrorCode.UNKNOWN_MEMBER_ID


class RebalanceInProgressError(KafkaError):
    error_code = ErrorCode.REBALANCE_IN_PROGRESS


class InvalidGroupIdError(KafkaError):
    error_code = ErrorCode.INVALID_GROUP_ID


class GroupIdNotFoundError(KafkaError):
    error_code = ErrorCode.GROUP_ID_NOT_FOUND


class NonEmptyGroupError(KafkaError):
    error_code = ErrorCode.NON_EMPTY_GROUP
