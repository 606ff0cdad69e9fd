"""The Schema Registry's HTTP front end (``schema.registry.listeners=http://host:port``).

Confluent Schema Registry's REST API on the broker's own event loop: h11 (sans-I/O HTTP/1.1,
keep-alive, bounded header size) over asyncio streams. It only parses requests and calls the
``SchemaRegistry`` service; a request this broker cannot answer (a write on a broker that is not
the writer, or any request on a broker without a replica of ``_schemas``) is forwarded to the
writer's registry, whose URL its broker registration carries, as Confluent's followers forward
to their leader. After a forwarded write, this broker answers once its own view has read it
(bounded), so a client may read its write back from the broker it wrote through.

A body over ``MAX_BODY_BYTES`` gets 413 at once, unread; malformed JSON gets 400; errors are
Confluent's JSON bodies ``{"error_code": 40401, "message": ...}``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import re
import socket
import ssl
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import h11

from strom.schemas.registry import SCHEMA_TYPES, NotHere, RegistryError, SchemaRegistry
from strom.schemas.state import RegistryState, StoredSchema

log = logging.getLogger("strom.schemas")

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
MAX_BODY_BYTES = 1024 * 1024  # a schema beyond it would not fit _schemas' 1 MB records either
MAX_HEADER_BYTES = 64 * 1024
IDLE_TIMEOUT_S = 60.0
DISCARD_MAX_BYTES = 64 * 1024 * 1024  # what is read and dropped of a refused body before closing
DISCARD_TIMEOUT_S = 5.0
FORWARD_TIMEOUT_S = 15.0
READ_BACK_TIMEOUT_S = 5.0
_STATUSES = {status.value for status in HTTPStatus}
FORWARDED = "X-Strom-Forwarded"
OFFSET_HEADER = "X-Strom-Schemas-Offset"


def parse_listener(key: str, raw: str) -> tuple[str, str, int]:
    """``http://host:port`` or ``https://host:port`` (port 0 picks a free one) -> (scheme, host,
    port); errors name the key."""
    from strom.storage.log_config import ConfigError

    parts = urlsplit(raw.strip())
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme not in ("http", "https") or not parts.hostname or port is None or parts.path not in ("", "/"):
        raise ConfigError(key, f"{raw!r} is not http://host:port or https://host:port")
    return parts.scheme, parts.hostname, port


class Reply:
    def __init__(self, status: int, body: Any, offset: int | None = None, raw: bytes | None = None):
        self.status = status
        self.body = body
        self.offset = offset  # the _schemas offset after a write: the forwarding broker reads up to it
        self.raw = raw
        self.headers: list[tuple[str, str]] = []  # extra response headers (WWW-Authenticate)

    def encode(self) -> bytes:
        if self.raw is not None:
            return self.raw
        return json.dumps(self.body, ensure_ascii=False).encode()


def _error(status: int, code: int, message: str) -> Reply:
    return Reply(status, {"error_code": code, "message": message})


class Request:
    def __init__(self, method: str, target: bytes, headers: list[tuple[bytes, bytes]], body: bytes):
        self.method = method
        self.target = target
        self.headers = headers
        self.body = body
        split = urlsplit(target.decode("latin-1"))
        self.path = "/".join(s for s in split.path.split("/") if s)  # still quoted: %2F stays in its segment
        self.query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}

    def header(self, name: str) -> str | None:
        wanted = name.lower().encode()
        return next((v.decode("latin-1") for k, v in self.headers if k.lower() == wanted), None)

    def flag(self, name: str) -> bool:
        return self.query.get(name, "false").lower() == "true"

    def json(self) -> dict[str, Any]:
        try:
            value = json.loads(self.body or b"null")
        except (ValueError, UnicodeDecodeError) as exc:
            raise RegistryError(400, 400, f"Malformed JSON: {exc}") from None
        if not isinstance(value, dict):
            raise RegistryError(422, 422, "The request body must be a JSON object")
        return value

    def schema_body(self) -> tuple[str, str, list]:
        body = self.json()
        schema = body.get("schema")
        if not isinstance(schema, str):
            raise RegistryError(422, 42201, "Invalid schema: the body has no schema string")
        schema_type = body.get("schemaType") or "AVRO"
        references = body.get("references") or []
        if not isinstance(schema_type, str) or not isinstance(references, list):
            raise RegistryError(422, 42201, "Invalid schema: schemaType or references malformed")
        return schema, schema_type.upper(), references


def _optional_int(body: dict[str, Any], name: str) -> int | None:
    """A register request's ``id`` or ``version`` (IMPORT mode), as Confluent's registry reads them
    (``Schema(subject, RegisterSchemaRequest)`` and ``KafkaSchemaRegistry.register``): absent, null
    or negative mean none, and so does a version of 0; an id of 0 is an id (``schemaId >= 0``)."""
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value > 2**31 - 1:
        raise RegistryError(422, 42201, f"Invalid schema: {name} must be an integer below 2^31")
    if value < 0 or (value == 0 and name == "version"):
        return None
    return value


def _schema_reply(value: Any, text: str) -> dict[str, Any]:
    out = {"subject": value.subject, "version": value.version, "id": value.id}
    if value.schema_type != "AVRO":
        out["schemaType"] = value.schema_type
    if value.references:
        out["references"] = value.references
    out["schema"] = text
    return out


class SchemaRegistryHttp:
    """Serves ``registry`` on a bound socket; ``registry_url(broker_id)`` finds another broker's
    registry for forwarding."""

    def __init__(
        self,
        registry: SchemaRegistry,
        sock: socket.socket,
        registry_url: Callable[[int], str | None],
        authenticate: Callable[[str, str], bool] | None = None,
        super_users: frozenset[str] = frozenset(),
        server_ssl: ssl.SSLContext | None = None,
        client_ssl: ssl.SSLContext | None = None,
    ):
        self.registry = registry
        self.sock = sock
        self.registry_url = registry_url
        # with SASL/SCRAM on the brokers: HTTP Basic, checked against the SCRAM users; changing the
        # global config or mode needs a principal of super.users ("User:alice")
        self.authenticate = authenticate
        self.super_users = super_users
        # https: the listener's TLS context, and the one forwarded requests are sent to https URLs with
        self.server_ssl = server_ssl
        self.client_ssl = client_ssl
        self._server: asyncio.Server | None = None
        self._routes: list[tuple[str, re.Pattern[str], Callable[..., Awaitable[Reply]]]] = [
            ("GET", re.compile(r"^$"), self._root),
            ("GET", re.compile(r"^subjects$"), self._subjects),
            ("GET", re.compile(r"^subjects/([^/]+)/versions$"), self._versions),
            ("POST", re.compile(r"^subjects/([^/]+)/versions$"), self._register),
            ("GET", re.compile(r"^subjects/([^/]+)/versions/([^/]+)$"), self._version),
            ("GET", re.compile(r"^subjects/([^/]+)/versions/([^/]+)/schema$"), self._version_schema),
            ("DELETE", re.compile(r"^subjects/([^/]+)/versions/([^/]+)$"), self._delete_version),
            ("POST", re.compile(r"^subjects/([^/]+)$"), self._lookup),
            ("DELETE", re.compile(r"^subjects/([^/]+)$"), self._delete_subject),
            ("GET", re.compile(r"^schemas/ids/([^/]+)$"), self._by_id),
            ("GET", re.compile(r"^schemas/ids/([^/]+)/schema$"), self._by_id_schema),
            ("GET", re.compile(r"^schemas/ids/([^/]+)/subjects$"), self._id_subjects),
            ("GET", re.compile(r"^schemas/ids/([^/]+)/versions$"), self._id_versions),
            ("GET", re.compile(r"^schemas/types$"), self._types),
            ("GET", re.compile(r"^config$"), self._get_config),
            ("PUT", re.compile(r"^config$"), self._put_config),
            ("DELETE", re.compile(r"^config$"), self._delete_config),
            ("GET", re.compile(r"^config/([^/]+)$"), self._get_config),
            ("PUT", re.compile(r"^config/([^/]+)$"), self._put_config),
            ("DELETE", re.compile(r"^config/([^/]+)$"), self._delete_config),
            ("GET", re.compile(r"^mode$"), self._get_mode),
            ("PUT", re.compile(r"^mode$"), self._put_mode),
            ("GET", re.compile(r"^mode/([^/]+)$"), self._get_mode),
            ("PUT", re.compile(r"^mode/([^/]+)$"), self._put_mode),
            ("DELETE", re.compile(r"^mode/([^/]+)$"), self._delete_mode),
            ("POST", re.compile(r"^compatibility/subjects/([^/]+)/versions/([^/]+)$"), self._check),
            ("POST", re.compile(r"^compatibility/subjects/([^/]+)/versions$"), self._check),
        ]

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._serve, sock=self.sock, limit=MAX_HEADER_BYTES, ssl=self.server_ssl
        )

    def close(self) -> None:
        if self._server is not None:
            self._server.close()

    # -- HTTP/1.1 ------------------------------------------------------------------------------------
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEADER_BYTES)
        try:
            while True:
                request = await self._read_request(conn, reader)
                if request is None:
                    break
                if isinstance(request, Reply):  # refused before the body was read
                    await self._send(conn, writer, request, close=True)
                    await _discard(reader)
                    break
                reply = await self._handle(request)
                await self._send(conn, writer, reply)
                if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                    break
                conn.start_next_cycle()
        except (h11.ProtocolError, ConnectionError, TimeoutError):
            pass
        except Exception:
            log.exception("schema registry connection failed")
        finally:
            writer.close()

    async def _read_request(self, conn: h11.Connection, reader: asyncio.StreamReader) -> Request | Reply | None:
        head: h11.Request | None = None
        body = bytearray()
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as exc:
                return _error(exc.error_status_hint, exc.error_status_hint, f"Bad request: {exc}")
            if event is h11.NEED_DATA:
                data = await asyncio.wait_for(reader.read(65536), IDLE_TIMEOUT_S)
                if not data and head is None and conn.their_state is h11.IDLE:
                    return None
                conn.receive_data(data)
            elif isinstance(event, h11.Request):
                head = event
                length = next((v for k, v in event.headers if k == b"content-length"), None)
                if length is not None and int(length) > MAX_BODY_BYTES:
                    return _error(413, 413, f"Request body of {int(length)} bytes is over {MAX_BODY_BYTES}")
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > MAX_BODY_BYTES:
                    return _error(413, 413, f"Request body is over {MAX_BODY_BYTES} bytes")
            elif isinstance(event, h11.EndOfMessage):
                assert head is not None
                return Request(head.method.decode(), head.target, list(head.headers), bytes(body))
            elif isinstance(event, h11.ConnectionClosed):
                return None

    @staticmethod
    async def _send(conn: h11.Connection, writer: asyncio.StreamWriter, reply: Reply, close: bool = False) -> None:
        payload = reply.encode()
        headers = [("Content-Type", CONTENT_TYPE), ("Content-Length", str(len(payload)))]
        if reply.offset is not None:
            headers.append((OFFSET_HEADER, str(reply.offset)))
        if close:
            headers.append(("Connection", "close"))
        headers += reply.headers
        reason = HTTPStatus(reply.status).phrase.encode() if reply.status in _STATUSES else b""
        writer.write(conn.send(h11.Response(status_code=reply.status, headers=headers, reason=reason)) or b"")
        writer.write(conn.send(h11.Data(data=payload)) or b"")
        writer.write(conn.send(h11.EndOfMessage()) or b"")
        await writer.drain()

    # -- dispatch ------------------------------------------------------------------------------------
    def _refusal(self, request: Request) -> Reply | None:
        """401 without valid Basic credentials, 403 for a global config or mode change by a user
        who is not a super user; None when the request may go on."""
        assert self.authenticate is not None
        scheme, _, token = (request.header("authorization") or "").partition(" ")
        user = password = None
        if scheme.lower() == "basic":
            try:
                user, sep, password = base64.b64decode(token.strip(), validate=True).decode().partition(":")
            except (ValueError, UnicodeDecodeError):
                sep = ""
            if not sep:
                user = None
        if user is None or password is None or not self.authenticate(user, password):
            reply = _error(401, 40101, "Unauthorized: HTTP Basic credentials of a SCRAM user are required")
            reply.headers = [("WWW-Authenticate", 'Basic realm="strom Schema Registry"')]
            return reply
        if request.method in ("PUT", "DELETE") and request.path in ("config", "mode"):
            if f"User:{user}" not in self.super_users:
                return _error(
                    403, 40301, f"User {user} may not change the global {request.path}: it needs a super user"
                )
        return None

    async def _handle(self, request: Request) -> Reply:
        path = request.path
        if self.authenticate is not None:
            refused = self._refusal(request)
            if refused is not None:
                return refused
        matched_path = False
        for method, pattern, handler in self._routes:
            match = pattern.match(path)
            if match is None:
                continue
            matched_path = True
            if method != request.method:
                continue
            try:
                return await handler(request, *(unquote(g) for g in match.groups()))
            except RegistryError as exc:
                return _error(exc.status, exc.code, exc.message)
            except NotHere as exc:
                return await self._forward(request, exc.leader)
            except Exception as exc:
                log.exception("schema registry request %s %s failed", request.method, path)
                return _error(500, 50001, f"Error in the backend data store: {exc}")
        if matched_path:
            return _error(405, 405, f"HTTP {request.method} is not allowed on /{path}")
        return _error(404, 404, "HTTP 404 Not Found")

    async def _forward(self, request: Request, leader: int) -> Reply:
        if request.header(FORWARDED) is not None:
            return _error(
                500, 50003, f"Error while forwarding the request: broker {leader} is the writer, not this one"
            )
        url = self.registry_url(leader) if leader >= 0 else None
        if url is None:
            return _error(500, 50004, f"No Schema Registry writer known (the leader of _schemas is broker {leader})")
        try:
            status, headers, body = await _http_request(url, request, self.client_ssl)
        except (OSError, TimeoutError, h11.ProtocolError) as exc:
            return _error(500, 50003, f"Error while forwarding the request to {url}: {exc}")
        offset = headers.get(OFFSET_HEADER.lower())
        if offset is not None and 200 <= status < 300:
            await self.registry.caught_up_to(int(offset), READ_BACK_TIMEOUT_S)
        return Reply(status, None, raw=body)

    # -- routes --------------------------------------------------------------------------------------
    async def _root(self, request: Request) -> Reply:
        return Reply(200, {})

    async def _subjects(self, request: Request) -> Reply:
        return Reply(200, self.registry.subjects(request.flag("deleted"), request.query.get("subjectPrefix", "")))

    async def _versions(self, request: Request, subject: str) -> Reply:
        return Reply(200, self.registry.versions(subject, request.flag("deleted")))

    async def _register(self, request: Request, subject: str) -> Reply:
        schema, schema_type, references = request.schema_body()
        body = request.json()
        schema_id, version = _optional_int(body, "id"), _optional_int(body, "version")
        done = await self.registry.register(
            subject, schema, schema_type, references, request.flag("normalize"), schema_id, version
        )
        return Reply(200, {"id": done.schema_id, "version": done.version}, offset=done.offset)

    async def _text(self, request: Request, stored: StoredSchema) -> str:
        """The schema's text in the asked ``format`` (``serialized``: a Protobuf descriptor in base64;
        ``ignore_extensions``: a Protobuf text without custom options and extensions); another
        format is ignored, as Confluent ignores it."""
        asked = request.query.get("format")
        if asked in ("serialized", "ignore_extensions"):
            await self.registry.parse_ahead([(stored.schema, stored.schema_type, stored.references_json())])
            if asked == "serialized":
                return self.registry.serialized(stored)
            return self.registry.without_extensions(stored)
        return stored.schema

    async def _version(self, request: Request, subject: str, version: str) -> Reply:
        found = self.registry.version(subject, version, request.flag("deleted"))
        return Reply(200, _schema_reply(found, await self._text(request, RegistryState.stored(found))))

    async def _version_schema(self, request: Request, subject: str, version: str) -> Reply:
        found = self.registry.version(subject, version, request.flag("deleted"))
        return Reply(200, None, raw=(await self._text(request, RegistryState.stored(found))).encode())

    async def _delete_version(self, request: Request, subject: str, version: str) -> Reply:
        done = await self.registry.delete_version(subject, version, request.flag("permanent"))
        return Reply(200, done.version, offset=done.offset)

    async def _lookup(self, request: Request, subject: str) -> Reply:
        schema, schema_type, references = request.schema_body()
        await self.registry.parse_ahead([(schema, schema_type, references)])
        found = self.registry.lookup(
            subject, schema, schema_type, references, request.flag("normalize"), request.flag("deleted")
        )
        return Reply(200, _schema_reply(found, await self._text(request, RegistryState.stored(found))))

    async def _delete_subject(self, request: Request, subject: str) -> Reply:
        versions, offset = await self.registry.delete_subject(subject, request.flag("permanent"))
        return Reply(200, versions, offset=offset)

    @staticmethod
    def _id(text: str) -> int:
        try:
            return int(text)
        except ValueError:
            raise RegistryError(404, 40403, f"Schema {text} not found") from None

    async def _by_id(self, request: Request, schema_id: str) -> Reply:
        found = self.registry.schema_by_id(self._id(schema_id))
        out: dict[str, Any] = {}
        if found.schema_type != "AVRO":
            out["schemaType"] = found.schema_type
        if found.references:
            out["references"] = found.references_json()
        out["schema"] = await self._text(request, found)
        return Reply(200, out)

    async def _by_id_schema(self, request: Request, schema_id: str) -> Reply:
        stored = self.registry.schema_by_id(self._id(schema_id))
        return Reply(200, None, raw=(await self._text(request, stored)).encode())

    async def _id_subjects(self, request: Request, schema_id: str) -> Reply:
        used = self.registry.usages(self._id(schema_id), request.flag("deleted"))
        return Reply(200, sorted({v.subject for v in used}))

    async def _id_versions(self, request: Request, schema_id: str) -> Reply:
        used = self.registry.usages(self._id(schema_id), request.flag("deleted"))
        return Reply(200, [{"subject": v.subject, "version": v.version} for v in used])

    async def _types(self, request: Request) -> Reply:
        return Reply(200, list(SCHEMA_TYPES))

    async def _get_config(self, request: Request, subject: str | None = None) -> Reply:
        level = self.registry.compatibility(subject, request.flag("defaultToGlobal"))
        return Reply(200, {"compatibilityLevel": level})

    async def _put_config(self, request: Request, subject: str | None = None) -> Reply:
        level = request.json().get("compatibility")
        if not isinstance(level, str):
            raise RegistryError(422, 42203, "Invalid compatibility level: the body has no compatibility")
        offset = await self.registry.set_compatibility(subject, level.upper())
        return Reply(200, {"compatibility": level.upper()}, offset=offset)

    async def _delete_config(self, request: Request, subject: str | None = None) -> Reply:
        old, offset = await self.registry.delete_compatibility(subject)
        return Reply(200, {"compatibilityLevel": old}, offset=offset)

    async def _get_mode(self, request: Request, subject: str | None = None) -> Reply:
        return Reply(200, {"mode": self.registry.mode(subject, request.flag("defaultToGlobal"))})

    async def _put_mode(self, request: Request, subject: str | None = None) -> Reply:
        mode = request.json().get("mode")
        if not isinstance(mode, str):
            raise RegistryError(422, 42204, "Invalid mode: the body has no mode")
        offset = await self.registry.set_mode(subject, mode.upper(), request.flag("force"))
        return Reply(200, {"mode": mode.upper()}, offset=offset)

    async def _delete_mode(self, request: Request, subject: str) -> Reply:
        old, offset = await self.registry.delete_mode(subject)
        return Reply(200, {"mode": old}, offset=offset)

    async def _check(self, request: Request, subject: str, version: str | None = None) -> Reply:
        schema, schema_type, references = request.schema_body()
        await self.registry.parse_ahead([(schema, schema_type, references)], subject)
        problems = self.registry.check(subject, version, schema, schema_type, references, request.flag("normalize"))
        out: dict[str, Any] = {"is_compatible": not problems}
        if request.flag("verbose"):
            out["messages"] = problems
        return Reply(200, out)


async def _discard(reader: asyncio.StreamReader) -> None:
    """Read and drop what the client still sends of a refused body (bounded), so that it reads
    the answer instead of a reset; nothing of it is kept."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DISCARD_TIMEOUT_S
    left = DISCARD_MAX_BYTES
    while left > 0 and (remaining := deadline - loop.time()) > 0:
        try:
            chunk = await asyncio.wait_for(reader.read(65536), remaining)
        except (TimeoutError, ConnectionError):
            return
        if not chunk:
            return
        left -= len(chunk)


async def _http_request(
    base_url: str, request: Request, client_ssl: ssl.SSLContext | None = None
) -> tuple[int, dict[str, str], bytes]:
    """Send ``request`` to another broker's registry (one connection, bounded); (status, headers, body)."""
    parts = urlsplit(base_url)
    secure = parts.scheme == "https"
    host, port = parts.hostname or "127.0.0.1", parts.port or (443 if secure else 80)
    context = (client_ssl or ssl.create_default_context()) if secure else None

    async def exchange() -> tuple[int, dict[str, str], bytes]:
        reader, writer = await asyncio.open_connection(
            host, port, ssl=context, server_hostname=host if context is not None else None
        )
        try:
            conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEADER_BYTES)
            headers = [
                ("Host", f"{host}:{port}"),
                ("Content-Type", CONTENT_TYPE),
                ("Content-Length", str(len(request.body))),
                ("Connection", "close"),
                (FORWARDED, "1"),
            ]
            if request.header("authorization") is not None:  # the writer checks the user again
                headers.append(("Authorization", request.header("authorization") or ""))
            writer.write(conn.send(h11.Request(method=request.method, target=request.target, headers=headers)) or b"")
            writer.write(conn.send(h11.Data(data=request.body)) or b"")
            writer.write(conn.send(h11.EndOfMessage()) or b"")
            await writer.drain()
            status, got, body = 0, {}, bytearray()
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    conn.receive_data(await reader.read(65536))
                elif isinstance(event, h11.Response):
                    status = event.status_code
                    got = {k.decode().lower(): v.decode("latin-1") for k, v in event.headers}
                elif isinstance(event, h11.Data):
                    body += event.data
                    if len(body) > 64 * MAX_BODY_BYTES:
                        raise h11.RemoteProtocolError("response too large")
                elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                    return status, got, bytes(body)
        finally:
            writer.close()

    return await asyncio.wait_for(exchange(), FORWARD_TIMEOUT_S)
