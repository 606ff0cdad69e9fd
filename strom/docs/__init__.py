"""Documentation generated from the code: the site's reference pages, and the README's tables.

``strom.docs.reference`` writes the documentation site's reference pages (CLI, broker and topic
configs, metrics, APIs, modules) and ``strom.docs.mkdocs_hooks`` adds them to the site when
MkDocs builds it (mkdocs.yml, ``strom docs``). Below, the README's generated blocks: the supported
APIs and the broker and topic config references, all from the code (the handler table,
BrokerConfig's and LogConfig's key tables), so the README cannot drift from what the broker does:
``python -m strom.docs --write README.md`` rewrites the blocks between the ``<!-- BEGIN name -->`` /
``<!-- END name -->`` markers, and a test fails when the README is out of date.
"""

from __future__ import annotations

import argparse
import os
import re
import sys


def api_table() -> str:
    from strom.protocol.api import ApiKey
    from strom.protocol.legacy.schema.index import KAFKA_RANGES
    from strom.server.handlers import HANDLERS

    lines = ["| API | key | versions | Kafka 3.9 |", "| --- | --- | --- | --- |"]
    for spec in sorted(HANDLERS.values(), key=lambda s: s.api_key):
        name = "".join(part.capitalize() for part in ApiKey(spec.api_key).name.split("_"))
        kafka = KAFKA_RANGES.get(spec.api_key)
        kafka_text = f"{kafka[0]}–{kafka[1]}" if kafka else "–"
        lines.append(f"| {name} | {spec.api_key} | {spec.min_version}–{spec.max_version} | {kafka_text} |")
    return "\n".join(lines)


def config_table() -> str:
    from strom.server.config import config_reference_markdown

    return config_reference_markdown().rstrip()


def topic_config_table() -> str:
    from strom.storage.log_config import topic_config_reference_markdown

    return topic_config_reference_markdown().rstrip()


SECTIONS = {"api-table": api_table, "config-table": config_table, "topic-config-table": topic_config_table}


def render(text: str) -> str:
    for name, make in SECTIONS.items():
        pattern = re.compile(rf"(<!-- BEGIN {name} -->\n).*?(<!-- END {name} -->)", re.S)
        text = pattern.sub(lambda m: m.group(1) + make() + "\n" + m.group(2), text)
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", metavar="README", help="rewrite the generated blocks of this file")
    parser.add_argument("--reference", metavar="DIR", help="write the site's generated reference pages under DIR")
    args = parser.parse_args(argv)
    if args.reference:
        from strom.docs.reference import pages

        for path, make in pages().items():
            target = os.path.join(args.reference, path)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "w", encoding="utf-8") as handle:
                handle.write(make())
            print(target)
        return 0
    if args.write:
        with open(args.write, encoding="utf-8") as handle:
            text = handle.read()
        rendered = render(text)  # before touching the file: rendering imports the whole broker
        # replaced in one step, so a reader (or a second --write) never sees a half-written README
        temporary = f"{args.write}.tmp-{os.getpid()}"
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(rendered)
        os.replace(temporary, args.write)
        return 0
    for name, make in SECTIONS.items():
        print(f"## {name}\n{make()}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
