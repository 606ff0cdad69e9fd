"""``strom docs``: build this documentation site and serve it on 127.0.0.1, or only build it.

    strom docs [--port 8000] [--host 127.0.0.1]     build into a temporary dir, serve until Ctrl-C
    strom docs --build-dir site                     build into ./site and stop (open site/index.html)

The site is MkDocs with the Material theme, from mkdocs.yml and docs/ in a source checkout; its
reference pages (every command and flag, broker and topic config, metric and API version) are
generated from the code while it builds. Nothing is fetched from the network, at build time or
when the pages are viewed. It needs mkdocs and mkdocs-material (the test extra, or
``pip install 'strom[docs]'``).
"""

from __future__ import annotations

import argparse
import errno
import functools
import http.server
import importlib.util
import os
import subprocess
import sys
import tempfile

import strom


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--build-dir", metavar="DIR", help="only build the site into DIR (then open DIR/index.html); no server"
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port to serve on; 0 picks a free one (default 8000)")


def config_file() -> str:
    """mkdocs.yml of the checkout strom runs from (the site is not part of an installed wheel)."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(strom.__file__))), "mkdocs.yml")


def build(site_dir: str) -> int:
    """``mkdocs build --strict`` into ``site_dir``; returns its exit status. Not ``--quiet``: it hides
    the warnings, and ``--strict`` then has none to fail on."""
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", config_file(), "-d", site_dir]
    return subprocess.run(command, env=env, check=False).returncode


def run(args: argparse.Namespace) -> int:
    if not os.path.exists(config_file()):
        print(f"strom docs: no {config_file()}: the site is built from a source checkout of strom", file=sys.stderr)
        return 1
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        print("strom docs: needs mkdocs and mkdocs-material: pip install 'strom[docs]'", file=sys.stderr)
        return 1
    if args.build_dir:
        status = build(os.path.abspath(args.build_dir))
        if status == 0:
            print(f"strom docs: built {os.path.join(os.path.abspath(args.build_dir), 'index.html')}")
        return status
    with tempfile.TemporaryDirectory(prefix="strom-docs-") as site_dir:
        try:
            handler = functools.partial(QuietHandler, directory=site_dir)
            server = http.server.ThreadingHTTPServer((args.host, args.port), handler)
        except OSError as error:
            reason = "in use" if error.errno == errno.EADDRINUSE else error.strerror
            print(f"strom docs: cannot listen on {args.host}:{args.port}: {reason}", file=sys.stderr)
            return 1
        with server:
            status = build(site_dir)
            if status != 0:
                return status
            port = server.server_address[1]
            print(f"strom docs: http://{args.host}:{port}/index.html (Ctrl-C stops)", flush=True)
            try:
                server.serve_forever()
            except KeyboardInterrupt:
                pass
    return 0


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # one line per page view is noise here
        pass
