"""The README: what a newcomer needs on a screen or two, its two commands, and links into the site that resolve."""

import os
import re

from markdown.extensions.toc import slugify

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _read(*path):
    with open(os.path.join(ROOT, *path), encoding="utf-8") as handle:
        return handle.read()


def anchors(markdown_text: str) -> set[str]:
    """The ids MkDocs gives a page: its headings' slugs (or their explicit {#id}), and <a id> tags."""
    found = set(re.findall(r'<a id="([^"]+)"', markdown_text))
    fence = False
    for line in markdown_text.splitlines():
        if line.startswith("```"):
            fence = not fence
        match = None if fence else re.match(r"#{1,6} (.*)", line)
        if match:
            title = match.group(1)
            explicit = re.search(r"\{#([^}]+)\}\s*$", title)
            title = re.sub(r"`", "", title)
            found.add(explicit.group(1) if explicit else slugify(title, "-"))
    return found


def test_the_readme_fits_on_a_screen_or_two():
    assert len(_read("README.md").splitlines()) < 200


def test_the_two_commands_are_in_the_readme_and_ci_runs_the_test_one():
    text = _read("README.md")
    assert "bash scripts/test.sh" in text and "bash scripts/demo.sh" in text
    assert "bash scripts/test.sh" in _read(".ci", "run")


def test_every_link_into_the_site_resolves():
    links = [target for target in LINK.findall(_read("README.md")) if not re.match(r"[a-z]+:", target)]
    into_site = [target for target in links if target.startswith("docs/")]
    assert len(into_site) >= 10
    for target in links:
        path, _, anchor = target.partition("#")
        assert os.path.exists(os.path.join(ROOT, path)), f"README links to {path}, which does not exist"
        if anchor:
            assert path.endswith(".md"), target
            assert anchor in anchors(_read(path)), f"README links to {target}: {path} has no such heading"


def test_anchors_are_found_as_mkdocs_makes_them():
    page = "# Title\n\n## Growing a cluster: partition reassignment\n\n```\n# not a heading\n```\n## `strom.x` {#x.y}\n"
    assert anchors(page) == {"title", "growing-a-cluster-partition-reassignment", "x.y"}
