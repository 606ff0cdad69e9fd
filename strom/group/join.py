"""A JoinGroup as the group coordinators read it, and what they answer.

One request type serves both kinds of group a classic member may join: a classic group
(classic_protocol.py) or a consumer group that takes classic members in (classic_members.py,
Kafka 4), so it lives below both.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from strom.group import records as schema
from strom.group.group import Member


@dataclass(frozen=True)
class JoinRequest:
    """A JoinGroup as the coordinator reads it, handed whole to whichever group takes the member: a
    classic group, or a consumer group that has classic members (Kafka 4)."""

    group_id: str
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    require_known_member_id: bool

    def member(self, member_id: str, *, assignment: bytes = b"", is_new: bool = False) -> Member:
        """The classic group member this request makes, under the id the coordinator gave it."""
        return Member(
            member_id,
            self.instance_id,
            self.client_id,
            self.client_host,
            self.rebalance_timeout_ms,
            self.session_timeout_ms,
            self.protocol_type,
            self.protocols,
            assignment=assignment,
            is_new=is_new,
        )


@dataclass
class JoinResult:
    error_code: int
    generation: int = -1
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str = ""
    member_id: str = ""
    members: list[dict] | None = None
    skip_assignment: bool = False


def join_error(code: int, member_id: str = "") -> JoinResult:
    return JoinResult(code, member_id=member_id)


def new_member_id(prefix: str) -> str:
    """Kafka's ``<client id or instance id>-<uuid>``, with the prefix cut so that the id fits a record."""
    room = schema.MAX_STRING_BYTES - 37
    if not schema.fits(prefix + "-" * 37):
        prefix = prefix.encode()[:room].decode("utf-8", "ignore")
    return f"{prefix}-{uuid.uuid4()}"
