"""``strom console``: a web console for a Kafka cluster (strom or Apache Kafka), in the browser.

    strom console --bootstrap-server 127.0.0.1:9092 [--metrics http://127.0.0.1:9404/metrics ...]
                  [--port 8080] [--command-config client.properties] [--schema-registry-url URL]

Prints its URL and serves until interrupted. It talks only the Kafka protocol (and scrapes the
optional Prometheus endpoints), so it works against Apache Kafka too. Pages: overview (brokers,
under-replicated and offline partitions, messages per second), topics (create, delete, configs,
partitions), a message browser, consumer groups (lag over time, offset resets), SCRAM users,
transactions and ACLs; with --schema-registry-url, the registry's subjects and versions side by
side, and the message browser decodes records whose values carry a schema id. --port 0 picks a
free port.
"""

from __future__ import annotations

import argparse
import errno
import sys

from strom.cli.client_props import ToolError, add_command_config_argument, add_timeout_argument


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT", help="the broker(s) to connect to")
    add_command_config_argument(parser)
    parser.add_argument(
        "--metrics",
        action="append",
        default=[],
        metavar="URL",
        help="a broker's Prometheus endpoint to scrape (repeatable)",
    )
    parser.add_argument(
        "--schema-registry-url",
        metavar="URL",
        help="a Schema Registry (strom's or Confluent's) for the Schemas page and decoded messages; it is "
        "logged in to with the --command-config's SASL user and password (strom's registry checks the "
        "brokers' SCRAM users), and an https one is checked with its CA file (ssl.truststore.location)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8080, help="port to listen on; 0 picks a free one (default 8080)")
    parser.add_argument(
        "--sample-interval",
        type=float,
        default=2.0,
        metavar="S",
        help="seconds between offset samples for rates and lag charts (default 2)",
    )
    parser.add_argument(
        "--refresh-ms",
        type=int,
        default=2000,
        metavar="MS",
        help="how often live parts of a page refresh (default 2000)",
    )
    add_timeout_argument(parser, default_ms=5000)


def run(args: argparse.Namespace) -> int:
    import logging
    import signal

    from strom.console.app import serve
    from strom.console.cluster import Cluster
    from strom.console.schemas import SchemaBrowser

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    signal.signal(signal.SIGTERM, interrupt)  # stop as on Ctrl-C: the server closes its socket
    try:
        cluster = Cluster(args.bootstrap_server, args.command_config, args.timeout / 1000)
        schemas = None
        if args.schema_registry_url:
            props = cluster.properties
            user_info = None
            if props.get("sasl.username") is not None:
                user_info = f"{props['sasl.username']}:{props.get('sasl.password', '')}"
            ca_file = props.get("ssl.ca.location")
            try:
                schemas = SchemaBrowser(args.schema_registry_url, args.timeout / 1000, user_info, ca_file)
            except (OSError, ValueError) as exc:
                raise ToolError(f"--schema-registry-url {args.schema_registry_url}: {exc}") from None

        def ready(url: str) -> None:  # listening: a port in use has been refused at once
            print(f"strom console: {url} (cluster {cluster.bootstrap})", flush=True)
            try:
                cluster.check_reachable()
            except ToolError as exc:  # serve anyway: the pages show the error until the cluster is up
                print(f"WARNING {exc}", file=sys.stderr)

        serve(
            cluster,
            args.host,
            args.port,
            max(args.sample_interval, 0.1),
            max(args.refresh_ms, 250),
            args.metrics,
            ready=ready,
            schemas=schemas,
        )
    except ToolError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # the port is taken, or the address is not this host's: named as the broker does
        from strom.startup import bind_failure

        key = "--port" if exc.errno in (errno.EADDRINUSE, errno.EACCES) else "--host"
        print(f"strom console: cannot start: {bind_failure(key, args.host, args.port, exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0
