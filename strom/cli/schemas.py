"""``strom schemas``: the Schema Registry from the command line, one action per REST route.

    strom schemas --registry-url http://127.0.0.1:8081 list [--deleted] [--prefix users]
    strom schemas --registry-url URL list --subject users-value          # its versions
    strom schemas --registry-url URL get --subject users-value [--schema-version 2|latest]
    strom schemas --registry-url URL get --id 3
    strom schemas --registry-url URL register --subject users-value --schema-file user.avsc [--normalize]
    strom schemas --registry-url URL check --subject users-value --schema-file user-v2.avsc [--schema-version N]
    strom schemas --registry-url URL delete --subject users-value [--schema-version 1] [--permanent]
    strom schemas --registry-url URL config [--subject users-value] [--set FULL | --delete]
    strom schemas --registry-url URL mode [--subject users-value] [--set READONLY | --delete]
    strom schemas --registry-url URL mode --set IMPORT [--force]      # then, to migrate a registry:
    strom schemas --registry-url URL register --subject users-value --schema-file user.avsc --id 7 [--schema-version 3]

It speaks Confluent's REST API over plain HTTP, so it works against strom's registry
(``schema.registry.listeners``) and Confluent's alike. ``list`` prints one subject (or version)
a line; the other actions print the API's JSON answer. ``check`` exits 1 when the schema is
incompatible (with ``--verbose`` the reasons are printed). An error of the registry is one line on
stderr with Confluent's error code, exit code 1.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import ssl
import sys
import urllib.error
import urllib.request
from urllib.parse import quote, urlencode

from strom.cli.client_props import ToolError

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
ACTIONS = ("list", "get", "register", "check", "delete", "config", "mode")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--registry-url", required=True, metavar="URL", help="the Schema Registry, http://HOST:PORT")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for each answer (default 30)")
    parser.add_argument(
        "--user-info",
        metavar="USER:PASSWORD",
        help="HTTP Basic credentials (a SCRAM user's, on brokers with SASL); default: $SCHEMA_REGISTRY_USER_INFO",
    )
    parser.add_argument("--ca-file", metavar="PEM", help="https: the CA certificates to trust (default: the system's)")
    parser.add_argument("action", choices=ACTIONS, help="what to do")
    parser.add_argument("--subject", help="the subject (list: its versions; config, mode: its own setting)")
    parser.add_argument(
        "--schema-version",
        dest="schema_version",
        help="a version number, or latest (get, check, delete); register in IMPORT mode: the version to take",
    )
    parser.add_argument("--id", type=int, help="get: the schema with this id; register in IMPORT mode: the id to take")
    parser.add_argument("--schema", help="register, check: the schema text (Avro JSON, a JSON Schema, .proto text)")
    parser.add_argument("--schema-file", help="register, check: a file holding the schema")
    parser.add_argument(
        "--schema-type",
        default="AVRO",
        type=str.upper,
        choices=("AVRO", "JSON", "PROTOBUF"),
        help="register, check: AVRO (default), JSON (a JSON Schema) or PROTOBUF (.proto text)",
    )
    parser.add_argument("--normalize", action="store_true", help="register: normalize the schema first")
    parser.add_argument("--deleted", action="store_true", help="list, get: include soft-deleted subjects and versions")
    parser.add_argument("--prefix", default="", help="list: only subjects that start with it")
    parser.add_argument("--permanent", action="store_true", help="delete: hard delete (after a soft delete)")
    parser.add_argument("--verbose", action="store_true", help="check: print why a schema is incompatible")
    parser.add_argument("--set", dest="set_value", metavar="VALUE", help="config: a level; mode: a mode")
    parser.add_argument("--delete", action="store_true", help="config, mode: remove the subject's own setting")
    parser.add_argument(
        "--force", action="store_true", help="mode --set IMPORT: even where schemas are registered (they stay)"
    )


class RegistryClient:
    """``user_info`` is ``USER:PASSWORD`` for a registry that asks for HTTP Basic credentials."""

    def __init__(self, url: str, timeout_s: float, user_info: str | None = None, ca_file: str | None = None):
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        # https: the CA certificates (PEM) to check the registry's certificate with; default: the system's
        self.context = ssl.create_default_context(cafile=ca_file) if ca_file else None
        self.authorization = "Basic " + base64.b64encode(user_info.encode()).decode() if user_info else None

    def call(self, method: str, path: str, body: dict | None = None, query: dict | None = None):
        url = self.url + path + ("?" + urlencode(query) if query else "")
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Accept", CONTENT_TYPE)
        if self.authorization is not None:
            request.add_header("Authorization", self.authorization)
        if data is not None:
            request.add_header("Content-Type", CONTENT_TYPE)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s, context=self.context) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                error = json.loads(raw)
                message = f"{error.get('message')} (error code {error.get('error_code')})"
            except (ValueError, AttributeError):
                message = raw.decode(errors="replace").strip() or exc.reason
            raise ToolError(f"{method} {path}: HTTP {exc.code}: {message}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ToolError(f"cannot reach the Schema Registry at {self.url}: {reason}") from None


def _subject(args: argparse.Namespace) -> str:
    if not args.subject:
        raise ToolError(f"{args.action} needs --subject")
    return "/subjects/" + quote(args.subject, safe="")


def _schema_body(args: argparse.Namespace) -> dict:
    if (args.schema is None) == (args.schema_file is None):
        raise ToolError(f"{args.action} needs one of --schema and --schema-file")
    if args.schema_file is not None:
        try:
            with open(args.schema_file, encoding="utf-8") as handle:
                text = handle.read()
        except OSError as exc:
            raise ToolError(f"cannot read {args.schema_file}: {exc.strerror}") from None
    else:
        text = args.schema
    body: dict = {"schema": text}
    if args.schema_type.upper() != "AVRO":
        body["schemaType"] = args.schema_type.upper()
    return body


def _print(value) -> None:
    print(json.dumps(value, indent=2))


def run(args: argparse.Namespace) -> int:
    try:
        user_info = args.user_info or os.environ.get("SCHEMA_REGISTRY_USER_INFO")
        try:
            client = RegistryClient(args.registry_url, args.timeout, user_info, args.ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise ToolError(f"--ca-file {args.ca_file}: {exc}") from None
        return _run(args, client)
    except ToolError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace, client: RegistryClient) -> int:
    action = args.action
    deleted: dict | None = {"deleted": "true"} if args.deleted else None
    query: dict | None
    if action == "list":
        if args.subject:
            names = client.call("GET", _subject(args) + "/versions", query=deleted)
        else:
            query = {**(deleted or {}), **({"subjectPrefix": args.prefix} if args.prefix else {})}
            names = client.call("GET", "/subjects", query=query or None)
        for name in names:
            print(name)
    elif action == "get":
        if args.id is not None:
            _print({"id": args.id, **client.call("GET", f"/schemas/ids/{args.id}")})
        else:
            version = quote(args.schema_version or "latest", safe="")
            _print(client.call("GET", f"{_subject(args)}/versions/{version}", query=deleted))
    elif action == "register":
        query = {"normalize": "true"} if args.normalize else None
        body = _schema_body(args)
        if args.id is not None:  # IMPORT mode: the schema keeps the id (and version) it had elsewhere
            body["id"] = args.id
        if args.schema_version is not None:
            if not args.schema_version.isdigit():
                raise ToolError(f"register --schema-version takes a number, not {args.schema_version!r}")
            body["version"] = int(args.schema_version)
        _print(client.call("POST", _subject(args) + "/versions", body, query))
    elif action == "check":
        version = quote(args.schema_version or "latest", safe="")
        path = f"/compatibility{_subject(args)}/versions/{version}"
        answer = client.call("POST", path, _schema_body(args), {"verbose": "true"} if args.verbose else None)
        _print(answer)
        return 0 if answer.get("is_compatible") else 1
    elif action == "delete":
        query = {"permanent": "true"} if args.permanent else None
        if args.schema_version:
            path = f"{_subject(args)}/versions/{quote(args.schema_version, safe='')}"
        else:
            path = _subject(args)
        _print(client.call("DELETE", path, query=query))
    else:  # config, mode
        path = "/" + action + (("/" + quote(args.subject, safe="")) if args.subject else "")
        if args.set_value and args.delete:
            raise ToolError(f"{action}: --set and --delete exclude each other")
        if args.set_value:
            field = "compatibility" if action == "config" else "mode"
            force = {"force": "true"} if args.force and action == "mode" else None
            _print(client.call("PUT", path, {field: args.set_value.upper()}, force))
        elif args.delete:
            if not args.subject:
                raise ToolError(f"{action} --delete needs --subject")
            _print(client.call("DELETE", path))
        else:
            _print(client.call("GET", path, query={"defaultToGlobal": "true"} if args.subject else None))
    return 0
