"""The process table as /proc shows it, for tests that kill processes and check what is left."""

from __future__ import annotations

import collections
import os
from pathlib import Path


def children_by_parent() -> dict[int, list[int]]:
    """Every running process's pid, under its parent's pid."""
    children = collections.defaultdict(list)
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue  # gone meanwhile
            children[int(stat.rsplit(")", 1)[1].split()[1])].append(int(entry))
    return children


def alive(pid: int) -> bool:
    """Running, not exited (a zombie that nobody has reaped yet counts as gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def descendants(pid: int) -> list[int]:
    """Every running process started by ``pid`` or by one of its descendants."""
    children = children_by_parent()
    found, todo = [], [pid]
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
