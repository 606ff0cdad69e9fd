"""mkdocs.yml: a broken link or anchor fails `mkdocs build --strict`, as scripts/test.sh runs it."""

import os
import shutil
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _build(tmp_path, change_page):
    docs = tmp_path / "docs"
    shutil.copytree(os.path.join(ROOT, "docs"), docs)
    change_page(docs)
    with open(os.path.join(ROOT, "mkdocs.yml"), encoding="utf-8") as handle:
        config = yaml.safe_load(handle)
    config["docs_dir"] = str(docs)
    config["hooks"] = [os.path.join(ROOT, hook) for hook in config["hooks"]]
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(tmp_path / "mkdocs.yml")]
    command += ["-d", str(tmp_path / "site")]
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)


def test_a_broken_anchor_or_module_link_fails_the_strict_build(tmp_path):
    def break_links(docs):
        page = docs / "concepts" / "acks.md"
        page.write_text(
            page.read_text(encoding="utf-8") + "\n[a](../guides/security.md#no-such-section)\n", encoding="utf-8"
        )

    result = _build(tmp_path / "anchor", break_links)
    assert result.returncode == 1, result.stderr
    assert "does not contain an anchor '#no-such-section'" in result.stderr

    def unknown_module(docs):
        page = docs / "concepts" / "acks.md"
        page.write_text(page.read_text(encoding="utf-8") + "\n[b](module:strom.storage.gone)\n", encoding="utf-8")

    result = _build(tmp_path / "module", unknown_module)
    assert result.returncode == 1
    assert "concepts/acks.md: no module strom.storage.gone in strom" in result.stderr


def test_the_command_line_guide_names_every_subcommand():
    from strom.cli.main import SUBCOMMANDS

    with open(os.path.join(ROOT, "docs", "guides", "cli.md"), encoding="utf-8") as handle:
        guide = handle.read()
    assert [name for name in SUBCOMMANDS if f"`strom {name}" not in guide] == []


def test_every_concept_page_links_the_modules_that_implement_it():
    concepts = os.path.join(ROOT, "docs", "concepts")
    for name in sorted(os.listdir(concepts)):
        if name == "index.md":
            continue
        with open(os.path.join(concepts, name), encoding="utf-8") as handle:
            assert "](module:strom." in handle.read(), f"docs/concepts/{name} links no module"
