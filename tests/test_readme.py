"""The README's generated tables match the code, and its two commands exist."""

import os

from strom.docs import render

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_generated_sections_are_up_to_date():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        text = handle.read()
    assert "<!-- BEGIN api-table -->" in text and "<!-- BEGIN config-table -->" in text
    assert render(text) == text, "run: python -m strom.docs --write README.md"


def test_the_two_commands_are_in_the_readme_and_ci_runs_the_test_one():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        text = handle.read()
    assert "bash scripts/test.sh" in text and "bash scripts/demo.sh" in text
    with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as handle:
        assert "bash scripts/test.sh" in handle.read()
