"""MkDocs hooks (``hooks:`` in mkdocs.yml): the generated reference pages, and links to modules.

``on_files`` adds every page of ``strom.docs.reference.pages()`` to the site, built from the code
at that moment, so the reference cannot drift from it. ``on_page_markdown`` turns a link written
``[text](module:strom.storage.segment)`` into a link to that module's section of the generated
module pages; a module that does not exist fails the build, as a broken link does under --strict.
The benchmarks page gets its plots (SVG, drawn with matplotlib from the benchmark commands'
records) where it says ``<!-- benchmark-plots -->``.
"""

from __future__ import annotations

import re
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

from strom.docs import plots, reference

_PLOTS: dict[str, str] = {}  # the benchmarks page's plot sections, made by on_files
_MODULE_LINK = re.compile(r"\]\(module:(strom(?:\.\w+)*)\)")


def on_config(config: Any) -> Any:
    """Expand the nav's ``reference/modules/index.md`` entry into one page per package, so that a
    new package gets its page without an edit here."""
    pages = [path for path in reference.pages() if path.startswith("reference/modules/")]

    def expand(items: list[Any]) -> list[Any]:
        out = []
        for item in items:
            if isinstance(item, dict):
                ((title, value),) = item.items()
                if value == "reference/modules/index.md":
                    value = pages
                elif isinstance(value, list):
                    value = expand(value)
                out.append({title: value})
            else:
                out.append(item)
        return out

    config["nav"] = expand(config["nav"])
    return config


def on_files(files: Files, config: Any) -> Files:
    for path, make in reference.pages().items():
        if files.get_file_from_path(path) is not None:
            raise PluginError(f"docs/{path} is generated from the code: delete the file")
        files.append(File.generated(config, path, content=make()))
    svgs, _PLOTS["markdown"] = plots.plots()
    for path, content in svgs.items():
        files.append(File.generated(config, path, content=content))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    def link(match: re.Match[str]) -> str:
        try:
            return "](" + reference.module_link(match.group(1), page.file.src_uri) + ")"
        except KeyError as error:
            raise PluginError(f"{page.file.src_uri}: {error.args[0]}") from None

    if page.file.src_uri == "benchmarks.md":
        if plots.MARKER not in markdown:
            raise PluginError(f"benchmarks.md: no {plots.MARKER} to put the plots at")
        markdown = markdown.replace(plots.MARKER, _PLOTS["markdown"])
    return _MODULE_LINK.sub(link, markdown)
