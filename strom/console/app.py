"""The console's HTTP server: the standard library's threading server, Jinja2 templates, no framework.

Every admin call blocks (confluent-kafka waits on futures), so one thread per request is the simple
fit and needs no event loop. Each route returns a rendered page; a failure from the cluster becomes
the page's error line (logged as one line too), never a traceback. State-changing actions are POST
forms behind a confirmation page, and each answers with a redirect so a reload does not repeat it.
Fragments (``/fragment`` URLs) are the parts of a page that ``console.js`` refreshes in place.
"""

from __future__ import annotations

import logging
import mimetypes
import re
import sys
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from strom.console.cluster import Cluster, ConsoleError
from strom.console.render import Shown, line_chart, show_bytes, show_rate, show_size, show_time
from strom.console.sampler import Sampler
from strom.console.schemas import SchemaBrowser, side_by_side

log = logging.getLogger("strom.console")
MAX_FORM_BYTES = 64 * 1024
TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


class Redirect(Exception):
    def __init__(self, location: str):
        super().__init__(location)
        self.location = location


class Console:
    """Routes and rendering, shared by the server's request threads."""

    def __init__(self, cluster: Cluster, sampler: Sampler, refresh_ms: int, schemas: SchemaBrowser | None = None):
        self.cluster = cluster
        self.sampler = sampler
        self.refresh_ms = refresh_ms
        self.schemas = schemas
        self.env = Environment(
            loader=PackageLoader("strom.console", "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
        )
        self.env.filters.update(
            url=lambda s: quote(str(s), safe=""), size=show_size, rate=show_rate, time=show_time, shown=self.show
        )
        self.routes: list[tuple[str, re.Pattern[str], Callable[..., str]]] = [
            ("GET", re.compile(r"/"), self.overview),
            ("GET", re.compile(r"/fragment/overview"), self.overview_fragment),
            ("GET", re.compile(r"/topics"), self.topics),
            ("POST", re.compile(r"/topics"), self.create_topic),
            ("GET", re.compile(r"/topics/([^/]+)"), self.topic),
            ("POST", re.compile(r"/topics/([^/]+)/config"), self.alter_config),
            ("GET", re.compile(r"/topics/([^/]+)/delete"), self.confirm_delete),
            ("POST", re.compile(r"/topics/([^/]+)/delete"), self.delete_topic),
            ("GET", re.compile(r"/topics/([^/]+)/messages"), self.messages),
            ("GET", re.compile(r"/topics/([^/]+)/messages/fragment"), self.messages_fragment),
            ("GET", re.compile(r"/groups"), self.groups),
            ("GET", re.compile(r"/groups/([^/]+)"), self.group),
            ("GET", re.compile(r"/groups/([^/]+)/fragment"), self.group_fragment),
            ("POST", re.compile(r"/groups/([^/]+)/reset"), self.reset_offsets),
            ("GET", re.compile(r"/users"), self.users),
            ("GET", re.compile(r"/transactions"), self.transactions),
            ("GET", re.compile(r"/acls"), self.acls),
            ("GET", re.compile(r"/schemas"), self.subjects),
            ("GET", re.compile(r"/schemas/([^/]+)"), self.subject),
        ]

    def show(self, data: bytes | None) -> Shown:
        """A message's field decoded with its registered schema where it names one, else as bytes."""
        decoded = self.schemas.decode(data) if self.schemas is not None else None
        return decoded or show_bytes(data)

    def render(self, template: str, **values: Any) -> str:
        return self.env.get_template(template).render(
            bootstrap=self.cluster.bootstrap,
            refresh_ms=self.refresh_ms,
            sampler_error=self.sampler.error,
            registry=self.schemas.url if self.schemas is not None else None,
            **values,
        )

    def page(self, template: str, produce: Callable[[], dict[str, Any]], **values: Any) -> str:
        """Render ``template`` with what ``produce`` returns, or with the cluster's error instead."""
        try:
            values.update(produce())
        except Redirect:
            raise
        except Exception as exc:
            values["error"] = describe_error(exc)
        return self.render(template, **values)

    # -- overview --------------------------------------------------------------------------------------

    def _overview_values(self) -> dict[str, Any]:
        brokers, topics, cluster_id = self.cluster.brokers()
        partitions = [p for t in topics for p in t.partitions]
        rates = self.sampler.snapshot("messages in", "messages consumed")
        charts = [Markup(line_chart(rates, "Messages per second", "/s"))]
        byte_rates = self.sampler.snapshot("bytes in", "bytes out")
        if byte_rates:
            charts.append(Markup(line_chart(byte_rates, "Bytes per second (from --metrics)", "B/s")))
        return {
            "brokers": brokers,
            "cluster_id": cluster_id,
            "topic_count": len(topics),
            "partition_count": len(partitions),
            "under_replicated": [(t.name, p) for t in topics for p in t.partitions if p.under_replicated],
            "offline": [(t.name, p) for t in topics for p in t.partitions if p.offline],
            "charts": charts,
            "scrapes": self.sampler.scrapes,
        }

    def overview(self, query: dict[str, str]) -> str:
        return self.page("overview.html", self._overview_values, nav="overview")

    def overview_fragment(self, query: dict[str, str]) -> str:
        return self.page("overview_body.html", self._overview_values, fragment=True)

    # -- topics ------------------------------------------------------------------------------------------

    def topics(self, query: dict[str, str]) -> str:
        def produce() -> dict[str, Any]:
            topics = self.cluster.topics()
            if query.get("internal") != "1":
                topics = [t for t in topics if not t.internal]
            sizes = self.cluster.partition_sizes(topics)
            totals = {
                t.name: sum(sizes.get((t.name, p.id), 0) for p in t.partitions) if sizes else None for t in topics
            }
            rates = {t.name: self.sampler.rate(t.name) for t in topics}
            return {"topics": topics, "sizes": totals, "rates": rates}

        return self.page(
            "topics.html", produce, nav="topics", message=query.get("msg"), show_internal=query.get("internal") == "1"
        )

    def create_topic(self, form: dict[str, str]) -> str:
        name = form.get("name", "").strip()
        try:
            if not TOPIC_NAME.match(name) or name in (".", ".."):
                raise ConsoleError(f"Invalid topic name '{name}': use 1 to 249 letters, digits, '.', '_' or '-'")
            partitions, replication = _int(form, "partitions", 1), _int(form, "replication", 1)
            configs = {}
            for line in form.get("configs", "").splitlines():
                if line.strip():
                    key, sep, value = line.partition("=")
                    if not sep:
                        raise ConsoleError(f"Invalid config line '{line}': expected key=value")
                    configs[key.strip()] = value.strip()
            self.cluster.create_topic(name, partitions, replication, configs)
        except Exception as exc:
            return self.page(
                "topics.html",
                lambda: {"topics": self.cluster.topics(), "sizes": {}, "rates": {}},
                nav="topics",
                error=describe_error(exc),
                form=form,
            )
        raise Redirect(f"/topics/{quote(name, safe='')}?msg=" + quote(f"Created topic {name}."))

    def topic(self, query: dict[str, str], name: str) -> str:
        def produce() -> dict[str, Any]:
            topic, topic_id = self.cluster.topic(name)
            configs = self.cluster.configs("topic", name)
            values = {"topic": topic, "topic_id": topic_id, "configs": configs, "rate": self.sampler.rate(name)}
            mode = next((c.value for c in configs if c.name == "iceberg.mode"), None)
            if mode not in (None, "disabled"):
                values["iceberg_mode"] = mode
                try:
                    values["iceberg_table"], values["iceberg_lags"] = self.cluster.iceberg(name)
                except Exception as exc:  # the catalog is not reachable from here: the rest of the page stands
                    values["iceberg_error"] = describe_error(exc)
            return values

        return self.page("topic.html", produce, nav="topics", name=name, message=query.get("msg"))

    def alter_config(self, form: dict[str, str], name: str) -> str:
        key = form.get("key", "").strip()
        try:
            if not key:
                raise ConsoleError("A config name is required")
            self.cluster.alter_topic_config(
                name, key, None if form.get("action") == "delete" else form.get("value", "")
            )
        except Exception as exc:
            raise Redirect(f"/topics/{quote(name, safe='')}?msg=" + quote(f"Error: {describe_error(exc)}")) from None
        done = f"Removed the override of {key}." if form.get("action") == "delete" else f"Set {key}."
        raise Redirect(f"/topics/{quote(name, safe='')}?msg=" + quote(done))

    def confirm_delete(self, query: dict[str, str], name: str) -> str:
        return self.render("confirm_delete.html", nav="topics", name=name)

    def delete_topic(self, form: dict[str, str], name: str) -> str:
        if form.get("confirm", "") != name:
            return self.render(
                "confirm_delete.html", nav="topics", name=name, error=f"Type the topic's name, {name}, to confirm"
            )
        try:
            self.cluster.delete_topic(name)
        except Exception as exc:
            return self.render("confirm_delete.html", nav="topics", name=name, error=describe_error(exc))
        raise Redirect("/topics?msg=" + quote(f"Deleted topic {name}."))

    # -- messages ------------------------------------------------------------------------------------------

    def _messages_values(self, query: dict[str, str], name: str) -> dict[str, Any]:
        topic = {t.name: t for t in self.cluster.topics()}.get(name)
        if topic is None:
            raise ConsoleError(f"Topic '{name}' does not exist")
        all_partitions = [p.id for p in topic.partitions]
        chosen = _partitions(query.get("partitions", ""), all_partitions)
        limit = min(max(_int(query, "limit", 50), 1), 500)
        mode = query.get("start", "beginning")
        if query.get("pos"):
            positions = _positions(query["pos"], chosen)
        else:
            positions = self.cluster.start_offsets(name, chosen, mode, query.get("value", ""), limit)
        page = self.cluster.read(name, positions, limit)
        next_query = {**query, "pos": ",".join(f"{p}:{o}" for p, o in sorted(page.next_positions.items()))}
        return {
            "all_partitions": all_partitions,
            "chosen": chosen,
            "limit": limit,
            "mode": mode,
            "value": query.get("value", ""),
            "page": page,
            "positions": positions,
            "next_url": f"/topics/{quote(name, safe='')}/messages?{urlencode(next_query)}",
            "follow": query.get("follow") == "1",
            "query": urlencode(query),
        }

    def messages(self, query: dict[str, str], name: str) -> str:
        return self.page("messages.html", lambda: self._messages_values(query, name), nav="topics", name=name)

    def messages_fragment(self, query: dict[str, str], name: str) -> str:
        return self.page("messages_body.html", lambda: self._messages_values(query, name), name=name, fragment=True)

    # -- groups ----------------------------------------------------------------------------------------------

    def groups(self, query: dict[str, str]) -> str:
        def produce() -> dict[str, Any]:
            groups = self.cluster.groups()
            lags = {g: (h[-1][1] if (h := self.sampler.lag_history(g)) else None) for g, _, _ in groups}
            return {"groups": groups, "lags": lags}

        return self.page("groups.html", produce, nav="groups")

    def _group_values(self, group_id: str) -> dict[str, Any]:
        view = self.cluster.group(group_id)
        chart = Markup(line_chart({"lag": self.sampler.lag_history(group_id)}, "Total lag (messages)"))
        return {"group": view, "chart": chart, "topics": sorted({p.topic for p in view.partitions})}

    def group(self, query: dict[str, str], group_id: str) -> str:
        return self.page(
            "group.html",
            lambda: self._group_values(group_id),
            nav="groups",
            group_id=group_id,
            message=query.get("msg"),
        )

    def group_fragment(self, query: dict[str, str], group_id: str) -> str:
        return self.page("group_body.html", lambda: self._group_values(group_id), group_id=group_id, fragment=True)

    def reset_offsets(self, form: dict[str, str], group_id: str) -> str:
        mode, value, topic = form.get("mode", ""), form.get("value", ""), form.get("topic") or None
        try:
            plan = self.cluster.reset_plan(group_id, mode, value, topic)
            if form.get("confirm") == "yes":
                self.cluster.commit(group_id, plan)
                raise Redirect(
                    f"/groups/{quote(group_id, safe='')}?msg=" + quote(f"Reset {len(plan)} partition(s) to {mode}.")
                )
            current = {(p.topic, p.partition): p.committed for p in self.cluster.group(group_id).partitions}
        except Redirect:
            raise
        except Exception as exc:
            return self.page(
                "group.html",
                lambda: self._group_values(group_id),
                nav="groups",
                group_id=group_id,
                message="Error: " + describe_error(exc),
            )
        rows = [(t, p, current.get((t, p)), o) for (t, p), o in sorted(plan.items())]
        return self.render(
            "confirm_reset.html", nav="groups", group_id=group_id, rows=rows, mode=mode, value=value, topic=topic or ""
        )

    # -- users, transactions, ACLs ------------------------------------------------------------------------

    def users(self, query: dict[str, str]) -> str:
        return self.page("users.html", lambda: {"users": self.cluster.scram_users()}, nav="users")

    def transactions(self, query: dict[str, str]) -> str:
        return self.page("transactions.html", lambda: {"transactions": self.cluster.transactions()}, nav="transactions")

    def acls(self, query: dict[str, str]) -> str:
        return self.page("acls.html", lambda: {"acls": self.cluster.acls()}, nav="acls")

    # -- schemas ---------------------------------------------------------------------------------------------

    def _registry(self) -> SchemaBrowser:
        if self.schemas is None:
            raise ConsoleError("No Schema Registry: start the console with --schema-registry-url URL")
        return self.schemas

    def subjects(self, query: dict[str, str]) -> str:
        return self.page("schemas.html", lambda: {"subjects": self._registry().subjects()}, nav="schemas")

    def subject(self, query: dict[str, str], name: str) -> str:
        """One subject: its compatibility level, a version's schema, and two versions side by side.

        ``version`` picks the version shown (default the latest); ``a`` and ``b`` the pair compared
        (default the two newest)."""

        def produce() -> dict[str, Any]:
            registry = self._registry()
            versions = registry.versions(name)
            shown = registry.version(name, _choice(query, "version", versions, versions[-1]))
            values: dict[str, Any] = {
                "versions": versions,
                "shown": shown,
                "compatibility": registry.compatibility(name),
            }
            if len(versions) > 1:
                older = registry.version(name, _choice(query, "a", versions, versions[-2]))
                newer = registry.version(name, _choice(query, "b", versions, versions[-1]))
                values.update(older=older, newer=newer, diff=Markup(side_by_side(older, newer)))
            return values

        return self.page("schema.html", produce, nav="schemas", name=name)


def describe_error(exc: BaseException) -> str:
    """One line for the page: the cluster's error name and text, or the tool's own message."""
    from strom.cli.client_props import error_name, error_text

    name = error_name(exc)
    text = error_text(exc)
    if isinstance(exc, TimeoutError) or type(exc).__name__ == "TimeoutError":
        text = "the cluster did not answer in time"
    line = f"{name}: {text}" if name and name not in text else text
    if name in ("_TRANSPORT", "_ALL_BROKERS_DOWN", "_RESOLVE"):
        line = f"cannot reach the cluster: {text}"
    log.warning("strom console: %s", line)
    return line


def _int(values: dict[str, str], key: str, default: int) -> int:
    raw = values.get(key, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConsoleError(f"Invalid {key} '{raw}': expected a whole number") from None


def _choice(values: dict[str, str], key: str, versions: list[int], default: int) -> int:
    chosen = _int(values, key, default)
    if chosen not in versions:
        raise ConsoleError(f"No version {chosen}: the subject has versions {versions}")
    return chosen


def _partitions(text: str, known: list[int]) -> list[int]:
    if not text.strip():
        return known
    try:
        chosen = sorted({int(p) for p in text.replace(" ", "").split(",") if p})
    except ValueError:
        raise ConsoleError(f"Invalid partitions '{text}': expected numbers separated by commas") from None
    unknown = [p for p in chosen if p not in known]
    if unknown:
        raise ConsoleError(f"Unknown partition(s) {unknown}: the topic has {len(known)}")
    return chosen


def _positions(text: str, chosen: list[int]) -> dict[int, int]:
    positions = {}
    for item in text.split(","):
        p, _, o = item.partition(":")
        try:
            if int(p) in chosen:
                positions[int(p)] = int(o)
        except ValueError:
            raise ConsoleError(f"Invalid position '{item}': expected partition:offset") from None
    return positions


class Handler(BaseHTTPRequestHandler):
    console: Console
    server_version = "strom-console"
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # access log off: errors are logged as they happen
        pass

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def _serve(self, method: str) -> None:
        split = urlsplit(self.path)
        path = split.path.rstrip("/") or "/"
        if method == "GET" and path.startswith("/static/"):
            return self._static(path[len("/static/") :])
        values = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        if method == "POST":
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_FORM_BYTES:
                return self._send(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, b"form too large", "text/plain")
            body = self.rfile.read(length).decode("utf-8", "replace")
            values = {k: v[-1] for k, v in parse_qs(body, keep_blank_values=True).items()}
        for route_method, pattern, action in self.console.routes:
            match = pattern.fullmatch(path)
            if match is None or route_method != method:
                continue
            try:
                text = action(values, *(unquote(g) for g in match.groups()))
            except Redirect as redirect:
                self.send_response(HTTPStatus.SEE_OTHER)
                self.send_header("Location", redirect.location)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            except Exception as exc:  # a bug in a page: one line in the log and on the page, no traceback
                log.exception("strom console: %s %s failed", method, path)
                text = self.console.render("error.html", error=f"{type(exc).__name__}: {exc}")
                return self._send(HTTPStatus.INTERNAL_SERVER_ERROR, text.encode(), "text/html; charset=utf-8")
            return self._send(HTTPStatus.OK, text.encode(), "text/html; charset=utf-8")
        text = self.console.render("error.html", error=f"No page at {path}")
        self._send(HTTPStatus.NOT_FOUND, text.encode(), "text/html; charset=utf-8")

    def _static(self, name: str) -> None:
        if not re.fullmatch(r"[a-z0-9_-]+\.[a-z]+", name):
            return self._send(HTTPStatus.NOT_FOUND, b"not found", "text/plain")
        try:
            data = resources.files("strom.console").joinpath("static", name).read_bytes()
        except (FileNotFoundError, IsADirectoryError):
            return self._send(HTTPStatus.NOT_FOUND, b"not found", "text/plain")
        self._send(HTTPStatus.OK, data, mimetypes.guess_type(name)[0] or "application/octet-stream")

    def _send(self, status: HTTPStatus, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)


def serve(
    cluster: Cluster,
    host: str,
    port: int,
    sample_interval_s: float,
    refresh_ms: int,
    metrics_urls: list[str],
    ready: Callable[[str], None] | None = None,
    stop: threading.Event | None = None,
    schemas: SchemaBrowser | None = None,
) -> None:
    """Serve until ``stop`` is set (or forever); ``ready`` gets the URL once the socket listens."""
    sampler = Sampler(cluster, sample_interval_s, metrics_urls)
    console = Console(cluster, sampler, refresh_ms, schemas)
    handler = type("ConsoleHandler", (Handler,), {"console": console})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    sampler.start()
    url = f"http://{host}:{server.server_address[1]}/"
    (ready or (lambda u: print(f"strom console: {u} (cluster {cluster.bootstrap})", flush=True)))(url)
    if stop is not None:

        def stop_when_told() -> None:
            stop.wait()
            server.shutdown()

        threading.Thread(target=stop_when_told, daemon=True).start()
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
        sampler.stop()
        sys.stdout.flush()
