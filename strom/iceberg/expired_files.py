"""The files that only expired snapshots referenced, found and deleted after an expiry commits.

pyiceberg 0.12's expire_snapshots removes snapshots from the table's metadata and leaves every file
in the warehouse; Iceberg's own ExpireSnapshots then deletes what no remaining snapshot reaches.
This is that second half, made safe for tables that other brokers commit to while it runs:

- **Candidates are only files the expired snapshots referenced**: their manifest lists, their
  manifests and every file those manifests list. The warehouse is never listed, so a file no
  snapshot has referenced yet (a translation round's, written and not committed; a lost commit's
  orphan) is never a candidate.
- **What stays is read after the expiry committed**, from the table as the catalog then has it:
  each remaining snapshot's manifest list, its manifests and the live (added or existing) files
  they list. A candidate among them is kept. A later commit builds on the current snapshot (every
  strom commit is conditional on it, and expiry never removes it) and adds files of its own, so it
  cannot reach a file this read found unreachable.
- **A remaining snapshot whose files cannot be read stops the cleanup**: nothing is deleted rather
  than something still needed. A cleanup that dies half way leaves orphans, never a dangling reference.

Files that compaction replaced are deleted by the same path, once the snapshots that still list
them have expired. The old ``metadata.json`` files are not here: pyiceberg deletes those itself on
each commit when the table property ``write.metadata.delete-after-commit.enabled`` is true (as
Iceberg does), keeping ``write.metadata.previous-versions-max`` of them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("strom.iceberg")


@dataclass
class Referenced:
    """The paths a set of snapshots reaches, by kind (data files with their sizes)."""

    manifest_lists: set[str] = field(default_factory=set)
    manifests: set[str] = field(default_factory=set)
    data_files: dict[str, int] = field(default_factory=dict)  # path -> size in bytes


@dataclass
class Deleted:
    data_files: int = 0
    data_bytes: int = 0
    manifests: int = 0
    manifest_lists: int = 0

    @property
    def files(self) -> int:
        return self.data_files + self.manifests + self.manifest_lists


def referenced(io: Any, snapshots: Iterable[Any], live_only: bool, missing_ok: bool) -> Referenced:
    """The files ``snapshots`` reference. ``live_only``: of each manifest, only its added and
    existing entries (what a reader of the snapshot reads), not the entries it marks deleted.
    ``missing_ok``: a manifest list or manifest that is gone is skipped (another cleanup deleted
    it), otherwise FileNotFoundError."""
    found = Referenced()
    for snapshot in snapshots:
        if snapshot.manifest_list is None or snapshot.manifest_list in found.manifest_lists:
            continue
        try:
            manifests = snapshot.manifests(io)
        except FileNotFoundError:
            if not missing_ok:
                raise
            continue
        found.manifest_lists.add(snapshot.manifest_list)
        for manifest in manifests:
            if manifest.manifest_path in found.manifests:
                continue
            try:
                entries = manifest.fetch_manifest_entry(io, discard_deleted=live_only)
            except FileNotFoundError:
                if not missing_ok:
                    raise
                continue
            found.manifests.add(manifest.manifest_path)
            for entry in entries:
                found.data_files[entry.data_file.file_path] = entry.data_file.file_size_in_bytes
    return found


def delete_unreachable(table_after: Any, expired: list[Any]) -> Deleted:
    """Delete what ``expired`` (snapshots as the metadata before the expiry had them) referenced
    and no snapshot of ``table_after`` (the table reloaded after the expiry committed) reaches."""
    io = table_after.io
    candidates = referenced(io, expired, live_only=False, missing_ok=True)
    kept = referenced(io, table_after.metadata.snapshots, live_only=True, missing_ok=False)
    deleted = Deleted()
    for path, size in candidates.data_files.items():
        if path not in kept.data_files and _delete(io, path):
            deleted.data_files += 1
            deleted.data_bytes += size
    for path in candidates.manifests - kept.manifests:
        deleted.manifests += _delete(io, path)
    for path in candidates.manifest_lists - kept.manifest_lists:
        deleted.manifest_lists += _delete(io, path)
    return deleted


def _delete(io: Any, path: str) -> bool:
    try:
        io.delete(path)
    except FileNotFoundError:
        return False  # another broker's cleanup (a leadership moving) got there first
    except OSError as exc:  # left as an orphan: nothing references it, so nothing breaks
        log.warning("iceberg: could not delete %s, left in the warehouse: %r", path, exc)
        return False
    return True
