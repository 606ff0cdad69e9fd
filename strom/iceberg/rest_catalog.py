"""An Iceberg REST catalog backed by strom's SQL catalog: the routes of Apache Iceberg's REST spec
(``rest-catalog-open-api.yaml``) that pyiceberg's ``RestCatalog`` and Spark's ``RESTCatalog`` use,
answered by a pyiceberg ``SqlCatalog``. Engines then reach an Iceberg topic's tables through the
standard protocol, without sharing the SQLite file or the SQLAlchemy URL, and brokers with
``iceberg.catalog.type=rest`` commit through it.

This module knows no socket: ``handle(method, target, headers, body)`` returns the status, the
JSON body and extra headers (strom.iceberg.rest_catalog_server serves it over HTTP). It blocks
(SQL and metadata files), so it runs on the HTTP server's threads, never on the broker's loop.

Bodies are read and written with pyiceberg's own models (``CreateTableRequest``,
``CommitTableRequest``, ``TableResponse``, ``CommitTableResponse``), so the shapes are the
client's. A commit delegates to ``SqlCatalog.commit_table``: its requirements (such as
``assert-ref-snapshot-id``) are checked against the table as it is, and the catalog's row is
swapped only if the metadata location is still the one the commit started from, so two writers
racing on one table (two brokers, or two servers over one shared SQL catalog) get one success and
one 409 ``CommitFailedException``, which the loser's client answers by reloading and retrying.

Errors are the spec's ``{"error": {"message", "type", "code"}}``: 404 NoSuchTableException and
NoSuchNamespaceException, 409 AlreadyExistsException, NamespaceNotEmptyException and
CommitFailedException, 400 BadRequestException for a body that is not the request's JSON (nothing
is changed then), 401 NotAuthorizedException.

Authentication, when ``authenticate`` is given (brokers with SASL/SCRAM): HTTP Basic with a SCRAM
user's name and password, or a bearer token from ``POST /v1/oauth/tokens`` (OAuth2 client
credentials, the client id and secret being a SCRAM user's name and password: pyiceberg's
``credential=user:password``). Tokens live in this server's memory for ``TOKEN_TTL_S``; a client
whose token expired or was issued by another server gets 401 and asks for a new one.
"""

from __future__ import annotations

import base64
import json
import logging
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import parse_qs, unquote, urlsplit

if TYPE_CHECKING:
    from pyiceberg.catalog import MetastoreCatalog
    from pyiceberg.table import Table

log = logging.getLogger("strom.iceberg")

NAMESPACE_SEPARATOR = "\x1f"  # the spec's default between a multi-level namespace's parts in a path
TOKEN_TTL_S = 3600
MAX_MESSAGE = 1000  # characters of an error message
MAX_TOKENS = 10000  # tokens kept at most (the expired ones are dropped first)

# what GET /v1/config announces: the clients check an endpoint is listed before calling it
ENDPOINTS = (
    "GET /v1/{prefix}/namespaces",
    "POST /v1/{prefix}/namespaces",
    "GET /v1/{prefix}/namespaces/{namespace}",
    "HEAD /v1/{prefix}/namespaces/{namespace}",
    "DELETE /v1/{prefix}/namespaces/{namespace}",
    "POST /v1/{prefix}/namespaces/{namespace}/properties",
    "GET /v1/{prefix}/namespaces/{namespace}/tables",
    "POST /v1/{prefix}/namespaces/{namespace}/tables",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/register",
    "POST /v1/{prefix}/tables/rename",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
)

# status, body (None: empty; bytes: JSON already encoded; else a value to encode), extra headers
Reply = tuple[int, Any, list[tuple[str, str]]]


class RestError(Exception):
    """A request the catalog refuses: the spec's error model."""

    def __init__(self, status: int, kind: str, message: str):
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


def _bad(message: str) -> RestError:
    return RestError(400, "BadRequestException", message)


class _Named:
    """What ``SqlCatalog.commit_table`` reads of the table it is given: its name (it loads the
    table as it is now itself, and creates it when a staged create is committed)."""

    def __init__(self, identifier: tuple[str, ...]):
        self._identifier = identifier

    def name(self) -> tuple[str, ...]:
        return self._identifier


class RestCatalogService:
    """``catalog``: the SQL catalog served (shared by the threads: SQLAlchemy's pool is);
    ``authenticate(user, password)``: None serves everyone."""

    def __init__(self, catalog: MetastoreCatalog, authenticate: Callable[[str, str], bool] | None = None):
        self.catalog = catalog
        self.authenticate = authenticate
        self._tokens: dict[str, tuple[str, float]] = {}  # token -> (user, expiry on the monotonic clock)
        self._tokens_lock = threading.Lock()
        # one mutation at a time in this process: SQLite takes one writer anyway, and a commit that
        # waits here rather than on the database's lock cannot time out on it
        self._writes = threading.Lock()
        self._routes: list[tuple[str, tuple[str, ...], Callable[..., Reply]]] = [
            ("GET", ("config",), self._config),
            ("POST", ("oauth", "tokens"), self._token),
            ("GET", ("namespaces",), self._list_namespaces),
            ("POST", ("namespaces",), self._create_namespace),
            ("GET", ("namespaces", "*"), self._load_namespace),
            ("HEAD", ("namespaces", "*"), self._namespace_exists),
            ("DELETE", ("namespaces", "*"), self._drop_namespace),
            ("POST", ("namespaces", "*", "properties"), self._update_namespace),
            ("GET", ("namespaces", "*", "tables"), self._list_tables),
            ("POST", ("namespaces", "*", "tables"), self._create_table),
            ("POST", ("namespaces", "*", "register"), self._register_table),
            ("GET", ("namespaces", "*", "tables", "*"), self._load_table),
            ("HEAD", ("namespaces", "*", "tables", "*"), self._table_exists),
            ("POST", ("namespaces", "*", "tables", "*"), self._commit_table),
            ("DELETE", ("namespaces", "*", "tables", "*"), self._drop_table),
            ("POST", ("tables", "rename"), self._rename_table),
            ("POST", ("namespaces", "*", "tables", "*", "metrics"), self._report_metrics),
        ]

    # -- dispatch ------------------------------------------------------------------------------------
    def handle(self, method: str, target: str, headers: Mapping[str, str], body: bytes) -> Reply:
        """One request: (status, JSON body or None, extra headers). ``headers``' names lower case."""
        split = urlsplit(target)
        parts = [unquote(p) for p in split.path.split("/") if p]
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        if not parts or parts[0] != "v1":
            return _error(RestError(404, "NoSuchEndpointException", f"No route for {method} {split.path}"))
        parts = parts[1:]
        matched = False
        for route_method, pattern, handler in self._routes:
            if len(pattern) != len(parts) or any(p != "*" and p != got for p, got in zip(pattern, parts, strict=True)):
                continue
            matched = True
            if route_method != method:
                continue
            try:
                if handler != self._token and self.authenticate is not None:
                    self._check_login(headers.get("authorization", ""))
                args = [got for p, got in zip(pattern, parts, strict=True) if p == "*"]
                return handler(query, body, headers, *args)
            except RestError as exc:
                return _error(exc)
            except Exception as exc:
                return _error(self._known(exc, method, split.path))
        if matched:
            return _error(RestError(405, "MethodNotAllowedException", f"{method} is not allowed on {split.path}"))
        return _error(RestError(404, "NoSuchEndpointException", f"No route for {method} {split.path}"))

    @staticmethod
    def _known(exc: Exception, method: str, path: str) -> RestError:
        """pyiceberg's exceptions as the spec's errors; anything else is the server's failure."""
        from pydantic import ValidationError
        from pyiceberg import exceptions as e

        statuses: list[tuple[type[Exception], int, str]] = [
            (e.NoSuchTableError, 404, "NoSuchTableException"),
            (e.NoSuchNamespaceError, 404, "NoSuchNamespaceException"),
            (e.TableAlreadyExistsError, 409, "AlreadyExistsException"),
            (e.NamespaceAlreadyExistsError, 409, "AlreadyExistsException"),
            (e.NamespaceNotEmptyError, 409, "NamespaceNotEmptyException"),
            (e.CommitFailedException, 409, "CommitFailedException"),
            (e.NoSuchPropertyException, 400, "BadRequestException"),
            (ValidationError, 400, "BadRequestException"),
            (ValueError, 400, "BadRequestException"),
        ]
        for kind, status, name in statuses:
            if isinstance(exc, kind):
                text = " ".join(str(exc).split())  # pydantic's errors span lines: the field at fault is below the first
                return RestError(status, name, text[:MAX_MESSAGE] or name)
        log.exception("iceberg rest catalog: %s %s failed", method, path)
        return RestError(500, "ServiceFailureException", f"{type(exc).__name__}: {exc}")

    # -- authentication ------------------------------------------------------------------------------
    def _check_login(self, authorization: str) -> str:
        assert self.authenticate is not None
        scheme, _, value = authorization.partition(" ")
        value = value.strip()
        if scheme.lower() == "bearer":
            with self._tokens_lock:
                found = self._tokens.get(value)
            if found is not None and found[1] > time.monotonic():
                return found[0]
            raise RestError(401, "NotAuthorizedException", "Not authorized: the bearer token is unknown or expired")
        if scheme.lower() == "basic":
            user, password = _basic(value)
            if user is not None and password is not None and self.authenticate(user, password):
                return user
        raise RestError(
            401,
            "NotAuthorizedException",
            "Not authorized: HTTP Basic credentials of a SCRAM user, or a bearer token from /v1/oauth/tokens, "
            "are required",
        )

    def _token(self, query: dict[str, str], body: bytes, headers: Mapping[str, str]) -> Reply:
        """OAuth2 client credentials (RFC 6749 4.4): the client id and secret in the form or as
        HTTP Basic. Errors are OAuth's own body, as the clients read it on this route."""
        form = {k: v[-1] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}
        if form.get("grant_type") != "client_credentials":
            return 400, {"error": "unsupported_grant_type", "error_description": "only client_credentials"}, []
        user, password = form.get("client_id"), form.get("client_secret")
        if user is None and headers.get("authorization", "").lower().startswith("basic "):
            user, password = _basic(headers["authorization"][6:].strip())
        if self.authenticate is not None and (
            user is None or password is None or not self.authenticate(user, password)
        ):
            return 401, {"error": "invalid_client", "error_description": "unknown client id or wrong secret"}, []
        token = secrets.token_urlsafe(32)
        now = time.monotonic()
        with self._tokens_lock:
            if len(self._tokens) >= MAX_TOKENS:
                self._tokens = {t: v for t, v in self._tokens.items() if v[1] > now}
                if len(self._tokens) >= MAX_TOKENS:
                    self._tokens.clear()
            self._tokens[token] = (user or "", now + TOKEN_TTL_S)
        reply = {
            "access_token": token,
            "token_type": "bearer",
            "expires_in": TOKEN_TTL_S,
            "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
        }
        return 200, reply, [("Cache-Control", "no-store")]

    # -- routes --------------------------------------------------------------------------------------
    def _config(self, query: dict[str, str], body: bytes, headers: Mapping[str, str]) -> Reply:
        return 200, {"defaults": {}, "overrides": {}, "endpoints": list(ENDPOINTS)}, []

    def _list_namespaces(self, query: dict[str, str], body: bytes, headers: Mapping[str, str]) -> Reply:
        parent = _namespace(query["parent"]) if query.get("parent") else ()
        if parent and not self._namespace_known(parent):
            raise RestError(404, "NoSuchNamespaceException", f"Namespace does not exist: {'.'.join(parent)}")
        found = [list(n) for n in self.catalog.list_namespaces(parent)]
        return 200, {"namespaces": found}, []

    def _create_namespace(self, query: dict[str, str], body: bytes, headers: Mapping[str, str]) -> Reply:
        request = _json(body)
        namespace = request.get("namespace")
        properties = request.get("properties") or {}
        if not _is_identifier(namespace) or not _is_properties(properties):
            raise _bad("namespace must be a non-empty list of strings and properties an object of strings")
        with self._writes:
            self.catalog.create_namespace(tuple(cast("list[str]", namespace)), properties)
        return 200, {"namespace": namespace, "properties": properties}, []

    def _namespace_known(self, namespace: tuple[str, ...]) -> bool:
        from pyiceberg.exceptions import NoSuchNamespaceError

        try:
            self.catalog.load_namespace_properties(namespace)
        except NoSuchNamespaceError:
            return False
        return True

    def _load_namespace(self, query: dict[str, str], body: bytes, headers: Mapping[str, str], ns: str) -> Reply:
        namespace = _namespace(ns)
        return 200, {"namespace": list(namespace), "properties": self.catalog.load_namespace_properties(namespace)}, []

    def _namespace_exists(self, query: dict[str, str], body: bytes, headers: Mapping[str, str], ns: str) -> Reply:
        if not self._namespace_known(_namespace(ns)):
            raise RestError(404, "NoSuchNamespaceException", f"Namespace does not exist: {ns}")
        return 204, None, []

    def _drop_namespace(self, query: dict[str, str], body: bytes, headers: Mapping[str, str], ns: str) -> Reply:
        with self._writes:
            self.catalog.drop_namespace(_namespace(ns))
        return 204, None, []

    def _update_namespace(self, query: dict[str, str], body: bytes, headers: Mapping[str, str], ns: str) -> Reply:
        request = _json(body)
        removals = request.get("removals") or []
        updates = request.get("updates") or {}
        if not isinstance(removals, list) or not all(isinstance(r, str) for r in removals):
            raise _bad("removals must be a list of strings")
        if not _is_properties(updates):
            raise _bad("updates must be an object of strings")
        if set(removals) & set(updates):
            raise RestError(422, "UnprocessableEntityException", "a property is both removed and updated")
        with self._writes:
            summary = self.catalog.update_namespace_properties(_namespace(ns), set(removals), updates)
        return 200, {"updated": summary.updated, "removed": summary.removed, "missing": summary.missing or []}, []

    def _list_tables(self, query: dict[str, str], body: bytes, headers: Mapping[str, str], ns: str) -> Reply:
        namespace = _namespace(ns)
        if not self._namespace_known(namespace):
            raise RestError(404, "NoSuchNamespaceException", f"Namespace does not exist: {'.'.join(namespace)}")
        found = [{"namespace": list(t[:-1]), "name": t[-1]} for t in self.catalog.list_tables(namespace)]
        return 200, {"identifiers": found}, []

    def _create_table(self, query: dict[str, str], body: bytes, headers: Mapping[str, str], ns: str) -> Reply:
        from pyiceberg.catalog.rest import CreateTableRequest
        from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
        from pyiceberg.table.sorting import UNSORTED_SORT_ORDER

        given = _json(body)
        for optional in ("location", "partition-spec", "write-order"):  # pyiceberg's model wants them, maybe null
            given.setdefault(optional, None)
        request = CreateTableRequest.model_validate(given)
        namespace = _namespace(ns)
        identifier = (*namespace, request.name)
        spec = request.partition_spec or UNPARTITIONED_PARTITION_SPEC
        order = request.write_order or UNSORTED_SORT_ORDER
        if request.stage_create:  # nothing is written: the create transaction's commit makes the table
            if not self._namespace_known(namespace):
                raise RestError(404, "NoSuchNamespaceException", f"Namespace does not exist: {'.'.join(namespace)}")
            if self.catalog.table_exists(identifier):
                raise RestError(409, "AlreadyExistsException", f"Table {'.'.join(identifier)} already exists")
            staged = self.catalog._create_staged_table(  # noqa: SLF001 (pyiceberg's own staging, as create_table_transaction)
                identifier, request.table_schema, request.location, spec, order, request.properties
            )
            return 200, _table_body(None, staged.metadata), []  # the spec: no metadata location while staged
        with self._writes:
            table = self.catalog.create_table(
                identifier, request.table_schema, request.location, spec, order, request.properties
            )
        return 200, _table_body(table.metadata_location, table.metadata), []

    def _register_table(self, query: dict[str, str], body: bytes, headers: Mapping[str, str], ns: str) -> Reply:
        from pyiceberg.catalog.rest import RegisterTableRequest

        request = RegisterTableRequest.model_validate_json(body or b"null")
        with self._writes:
            table = self.catalog.register_table((*_namespace(ns), request.name), request.metadata_location)
        return 200, _table_body(table.metadata_location, table.metadata), []

    def _load_table(self, query: dict[str, str], body: bytes, headers: Mapping[str, str], ns: str, name: str) -> Reply:
        table = self.catalog.load_table((*_namespace(ns), name))
        return 200, _table_body(table.metadata_location, table.metadata), []

    def _table_exists(
        self, query: dict[str, str], body: bytes, headers: Mapping[str, str], ns: str, name: str
    ) -> Reply:
        if not self.catalog.table_exists((*_namespace(ns), name)):
            raise RestError(404, "NoSuchTableException", f"Table does not exist: {ns}.{name}")
        return 204, None, []

    def _commit_table(
        self, query: dict[str, str], body: bytes, headers: Mapping[str, str], ns: str, name: str
    ) -> Reply:
        from pyiceberg.table import CommitTableRequest

        identifier = (*_namespace(ns), name)
        given = _json(body)
        # the spec makes the body's identifier optional (the path names the table); pyiceberg's model wants it
        given.setdefault("identifier", {"namespace": list(identifier[:-1]), "name": name})
        request = CommitTableRequest.model_validate(given)
        wanted = (*request.identifier.namespace.root, request.identifier.name)
        if wanted != identifier:
            raise _bad(f"the body names table {'.'.join(wanted)}, the path {'.'.join(identifier)}")
        with self._writes:
            done = self.catalog.commit_table(
                cast("Table", _Named(identifier)), tuple(request.requirements), tuple(request.updates)
            )
        return 200, done.model_dump_json().encode(), []

    def _drop_table(self, query: dict[str, str], body: bytes, headers: Mapping[str, str], ns: str, name: str) -> Reply:
        identifier = (*_namespace(ns), name)
        with self._writes:
            if query.get("purgeRequested", "false").lower() == "true":
                self.catalog.purge_table(identifier)
            else:
                self.catalog.drop_table(identifier)
        return 204, None, []

    def _rename_table(self, query: dict[str, str], body: bytes, headers: Mapping[str, str]) -> Reply:
        request = _json(body)
        source, destination = request.get("source"), request.get("destination")
        if not (_is_table(source) and _is_table(destination)):
            raise _bad("source and destination must each be {namespace: [strings], name: string}")
        assert isinstance(source, dict) and isinstance(destination, dict)
        with self._writes:
            self.catalog.rename_table(
                (*source["namespace"], source["name"]), (*destination["namespace"], destination["name"])
            )
        return 204, None, []

    def _report_metrics(
        self, query: dict[str, str], body: bytes, headers: Mapping[str, str], ns: str, name: str
    ) -> Reply:
        """Java's client reports each scan's and commit's metrics here; they are taken and not kept."""
        _json(body)
        return 204, None, []


def _error(exc: RestError) -> Reply:
    headers = [("WWW-Authenticate", 'Basic realm="strom Iceberg catalog"')] if exc.status == 401 else []
    return exc.status, {"error": {"message": exc.message, "type": exc.kind, "code": exc.status}}, headers


def _table_body(metadata_location: str | None, metadata: Any) -> bytes:
    """The spec's LoadTableResult (pyiceberg's TableResponse), the metadata as pyiceberg writes its
    files (not parsed again only to be printed)."""
    location = json.dumps(metadata_location) if metadata_location is not None else "null"
    return f'{{"metadata-location": {location}, "metadata": {metadata.model_dump_json()}, "config": {{}}}}'.encode()


def _json(body: bytes) -> dict[str, Any]:
    try:
        value = json.loads(body or b"null")
    except (ValueError, UnicodeDecodeError) as exc:
        raise _bad(f"Malformed JSON: {exc}") from None
    if not isinstance(value, dict):
        raise _bad("The request body must be a JSON object")
    return value


def _namespace(text: str) -> tuple[str, ...]:
    parts = tuple(text.split(NAMESPACE_SEPARATOR))
    if not all(parts):
        raise _bad(f"Invalid namespace {text!r}")
    return parts


def _basic(token: str) -> tuple[str | None, str | None]:
    try:
        user, sep, password = base64.b64decode(token, validate=True).decode().partition(":")
    except (ValueError, UnicodeDecodeError):
        return None, None
    return (user, password) if sep else (None, None)


def _is_identifier(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(p, str) and p for p in value)


def _is_properties(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())


def _is_table(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and _is_identifier(value.get("namespace"))
        and isinstance(value.get("name"), str)
        and bool(value["name"])
    )
