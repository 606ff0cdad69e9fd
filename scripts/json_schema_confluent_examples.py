"""Run Confluent Schema Registry's JSON Schema diff examples against strom's compatibility check.

    git clone --depth 1 https://github.com/confluentinc/schema-registry /tmp/schema-registry
    .venv/bin/python scripts/json_schema_confluent_examples.py /tmp/schema-registry
    .venv/bin/python scripts/json_schema_confluent_examples.py /tmp/schema-registry --verbose

The examples are the test resources of Confluent's json-schema-provider module (read where they
are, not copied into strom): diff-schema-examples.json, diff-schema-examples-2020-12.json,
diff-combined-schema-examples.json and diff-combined-schema-examples-2020-12.json. Each case is an
``original_schema``, an ``update_schema`` and Confluent's verdict ``compatible``, which its
SchemaDiffTest checks with the STRICT policy, the one its registry uses: the update registered over
the original at BACKWARD. This runs ``json_schema.compatibility_problems("BACKWARD", update,
[original])`` on each, prints the cases whose verdict differs, and the count that agree. The
argument is a checkout (work tree or bare git directory, read at ``--rev``) or the resources
directory itself. The files are read as Java's org.json reads them, which lets an object or
array end with a comma (the 2020-12 file has some). strom's own rules, for ``format`` and
``if``/``then``/``else``, are tested in tests/schemas/test_json_schema.py: no example has them.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

from strom.schemas import json_schema

RESOURCES = "json-schema-provider/src/test/resources"
FILES = (
    "diff-schema-examples.json",
    "diff-schema-examples-2020-12.json",
    "diff-combined-schema-examples.json",
    "diff-combined-schema-examples-2020-12.json",
)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")


def read_examples(source: Path, rev: str) -> dict[str, list[dict]]:
    """File name -> its cases, from a work tree, a git directory or the resources directory."""
    found = {}
    for name in FILES:
        if (source / name).is_file():
            text = (source / name).read_text()
        elif (source / RESOURCES / name).is_file():
            text = (source / RESOURCES / name).read_text()
        else:
            text = subprocess.run(
                ["git", "--git-dir", str(source), "show", f"{rev}:{RESOURCES}/{name}"],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
        found[name] = json.loads(_TRAILING_COMMA.sub(r"\1", text))
    return found


def verdict(case: dict) -> list[str]:
    """strom's problems with registering the case's update over its original at BACKWARD."""
    try:
        original = json_schema.parse(json.dumps(case["original_schema"]))[0]
        update = json_schema.parse(json.dumps(case["update_schema"]))[0]
    except json_schema.InvalidSchemaError as exc:
        return [f"refused: {exc}"]
    return json_schema.compatibility_problems("BACKWARD", update, [original])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help="a schema-registry checkout, its git dir, or the resources dir")
    parser.add_argument("--rev", default="HEAD", help="the revision to read from a git directory")
    parser.add_argument("--verbose", action="store_true", help="print the schemas and strom's problems too")
    args = parser.parse_args(argv)
    agree = total = 0
    for name, cases in read_examples(args.source, args.rev).items():
        for index, case in enumerate(cases):
            total += 1
            problems = verdict(case)
            if (not problems) == case["compatible"]:
                agree += 1
                continue
            print(f"{name}[{index}] {case['description']!r}: Confluent {case['compatible']} {case['changes']}")
            if args.verbose:
                print(f"    original: {json.dumps(case['original_schema'])}")
                print(f"    update:   {json.dumps(case['update_schema'])}")
                print(f"    strom:    {problems}")
    print(f"{agree} of {total} Confluent JSON Schema diff examples agree")
    return 0 if agree == total else 1


if __name__ == "__main__":
    sys.exit(main())
