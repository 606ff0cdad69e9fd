"""Documentation generated from the code: the documentation site's reference pages and plots.

``strom.docs.reference`` writes the reference pages (every CLI command and flag, broker and topic
config, metric, API version range and module) from the tables the broker itself uses, and
``strom.docs.plots`` draws the benchmarks page's plots from the benchmark commands' records;
``strom.docs.mkdocs_hooks`` adds both to the site when MkDocs builds it (mkdocs.yml; ``strom docs``
builds and serves it). ``python -m strom.docs --reference DIR`` writes the reference pages out.
"""

from __future__ import annotations

import argparse
import os
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--reference", metavar="DIR", required=True, help="write the site's generated reference pages under DIR"
    )
    args = parser.parse_args(argv)
    from strom.docs.reference import pages

    for path, make in pages().items():
        target = os.path.join(args.reference, path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w", encoding="utf-8") as handle:
            handle.write(make())
        print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
