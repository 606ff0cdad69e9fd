"""Files in a table's location that its metadata does not reference: a dropped table's, purged,
and a live table's orphans, removed once they are old enough.

**Purge** (a topic deleted with ``iceberg.delete=true``), as Iceberg's ``DROP TABLE ... PURGE``
(``CatalogUtil.dropTableData``) does it: the table is dropped from the catalog first, then every
file its last metadata references is deleted (each snapshot's manifest list, manifests and the
data files they list, the metadata.json files of its log and the current one). pyiceberg 0.12's
``purge_table`` leaves the current metadata.json, and neither counts what it deleted, so this is
strom's own. Then the files left in the table's location from before the drop began (a lost
commit's data file, metadata.json files past ``write.metadata.previous-versions-max``) are
deleted too: no table can have written there before the drop, as a table of the same name
cannot exist until the drop commits. A file written after the drop began is left (a table of a
topic made again with the same name uses the same location).

**Orphans** of a live table, as Iceberg's ``removeOrphanFiles``: files under the table's location
that no snapshot (manifest lists, manifests, the data files every manifest lists, live or
deleted) and no metadata.json of the metadata log references, left by a commit that lost its
race or a worker that died before committing. Only files older than ``older_than`` are deleted
(Iceberg's default: 3 days), so a file a writer has written and not committed yet is never
touched: what the metadata references is read *before* the location is listed, and a commit made
meanwhile only adds young files. Object stores are listed through pyarrow's file systems.

**Tables that share a location.** A catalog places a new table by its name unless told
otherwise, so a table renamed aside (a topic's old table kept with ``iceberg.delete=false``) and
the new table of the same name can share one directory: through a REST catalog strom does not
choose locations. Each file listed under a location is therefore also checked against every other
table of the namespace whose location overlaps it (one inside the other), and a file any of
them references is never an orphan nor a purge's leftover. Iceberg's removeOrphanFiles assumes
one table per location and would delete them.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from strom.iceberg.expired_files import Deleted, referenced

log = logging.getLogger("strom.iceberg")

DEFAULT_OLDER_THAN_MS = 3 * 24 * 3600 * 1000  # Iceberg's removeOrphanFiles default: 3 days


@dataclass
class Removed(Deleted):
    """What a purge or an orphan pass deleted (or, dry, would delete): an expiry's kinds and more."""

    metadata_files: int = 0
    orphan_files: int = 0  # files no metadata referenced (a purge's leftovers, or a live table's orphans)
    orphan_bytes: int = 0
    paths: list[str] | None = None  # the orphans' paths, when asked for

    @property
    def files(self) -> int:
        return super().files + self.metadata_files + self.orphan_files


@dataclass(frozen=True)
class Listed:
    path: str  # as the file system names it (no scheme)
    uri: str
    size: int
    mtime: float  # seconds since the epoch


def _key(location: str) -> str:
    """A path or URI as the file system names it: no scheme (``file:///a`` and ``/a`` are one file)."""
    parsed = urlparse(location)
    if not parsed.scheme or len(parsed.scheme) == 1:  # a Windows drive letter is no scheme
        return location
    return parsed.netloc + parsed.path


def list_location(location: str) -> list[Listed]:
    """Every file under a table's location (none when it does not exist)."""
    from pyarrow import fs

    filesystem, root = fs.FileSystem.from_uri(location)
    scheme = urlparse(location).scheme or "file"
    infos = filesystem.get_file_info(fs.FileSelector(root, recursive=True, allow_not_found=True))
    found = []
    for info in infos:
        if info.type != fs.FileType.File:
            continue
        uri = f"{scheme}://{info.path}"
        mtime = info.mtime.timestamp() if info.mtime is not None else time.time()
        found.append(Listed(info.path, uri, info.size or 0, mtime))
    return found


def metadata_files(table: Any) -> set[str]:
    """The metadata.json files a table's metadata names: the current one and its log's."""
    return {table.metadata_location, *(entry.metadata_file for entry in table.metadata.metadata_log)}


def purge(catalog: Any, name: tuple[str, str], topic_id: str | None = None) -> Removed | None:
    """Drop table ``name`` and delete its files (module docstring); None when there is no such
    table (another broker dropped it first, and purges it), or when ``topic_id`` is given and the
    table records another topic's id (a topic made again under the name: its table is not ours)."""
    from pyiceberg.exceptions import NoSuchTableError

    from strom.iceberg.table import TOPIC_ID_PROPERTY

    try:
        table = catalog.load_table(name)
    except NoSuchTableError:
        return None
    found = table.properties.get(TOPIC_ID_PROPERTY)
    if topic_id and found and found != topic_id:
        return None
    began = time.time()
    try:
        catalog.drop_table(name)
    except NoSuchTableError:
        return None
    io = table.io
    found = referenced(io, table.metadata.snapshots, live_only=False, missing_ok=True)
    removed = Removed()
    for path, size in found.data_files.items():
        if _delete(io, path):
            removed.data_files += 1
            removed.data_bytes += size
    removed.manifests = sum(_delete(io, path) for path in found.manifests)
    removed.manifest_lists = sum(_delete(io, path) for path in found.manifest_lists)
    removed.metadata_files = sum(_delete(io, path) for path in metadata_files(table))
    neighbours = _keys_of(sharing_tables(catalog, name, table.location()))
    for left in list_location(table.location()):
        if left.mtime < began and _key(left.path) not in neighbours and _delete(io, left.uri):
            removed.orphan_files += 1
            removed.orphan_bytes += left.size
    _remove_empty_directories(table.location())
    return removed


def sharing_tables(catalog: Any, name: tuple[str, ...], location: str) -> list[Any]:
    """The tables of ``name``'s namespace, other than ``name``, whose location is ``location``,
    lies inside it or holds it (module docstring: tables that share a location)."""
    from pyiceberg.exceptions import NoSuchTableError

    mine = _key(location).rstrip("/") + "/"
    found = []
    for other in catalog.list_tables(name[:-1]):
        if tuple(other) == tuple(name):
            continue
        try:
            table = catalog.load_table(other)
        except NoSuchTableError:
            continue  # dropped meanwhile: its files are its purge's
        theirs = _key(table.location()).rstrip("/") + "/"
        if theirs.startswith(mine) or mine.startswith(theirs):
            found.append(table)
    return found


def _keys_of(tables: Iterable[Any]) -> set[str]:
    """Every file ``tables`` reference, by file system name. A manifest that cannot be read
    raises, so that nothing is deleted on a guess."""
    known: set[str] = set()
    for table in tables:
        found = referenced(table.io, table.metadata.snapshots, live_only=False, missing_ok=False)
        known |= {_key(path) for path in (*found.data_files, *found.manifests, *found.manifest_lists)}
        known |= {_key(path) for path in metadata_files(table)}
    return known


def orphans(table: Any, older_than_ms: int, now: float | None = None, neighbours: Sequence[Any] = ()) -> list[Listed]:
    """The files under a live table's location that neither it nor a ``neighbours`` table (one
    sharing the location) references and that are older than ``older_than_ms`` (module
    docstring). A manifest that cannot be read raises: nothing is an orphan rather than something
    still needed."""
    cutoff = (time.time() if now is None else now) - older_than_ms / 1000
    known = _keys_of([table, *neighbours])
    return [f for f in list_location(table.location()) if f.mtime < cutoff and _key(f.path) not in known]


def remove_orphans(
    catalog: Any, table: Any, older_than_ms: int, dry_run: bool = False, now: float | None = None
) -> Removed:
    """Delete (``dry_run``: only list) a live table's orphan files older than ``older_than_ms``;
    files of the catalog's other tables that share its location are kept."""
    removed = Removed(paths=[])
    neighbours = sharing_tables(catalog, table.name(), table.location())
    for orphan in orphans(table, older_than_ms, now, neighbours):
        if dry_run or _delete(table.io, orphan.uri):
            removed.orphan_files += 1
            removed.orphan_bytes += orphan.size
            assert removed.paths is not None
            removed.paths.append(orphan.uri)
    return removed


def _delete(io: Any, path: str) -> bool:
    try:
        io.delete(path)
    except FileNotFoundError:
        return False  # already gone (another broker's cleanup got there first)
    except OSError as exc:
        log.warning("iceberg: could not delete %s, left in the warehouse: %r", path, exc)
        return False
    return True


def _remove_empty_directories(location: str) -> None:
    """A purged table's directories on a local file system, once empty (object stores have none)."""
    parsed = urlparse(location)
    if parsed.scheme not in ("", "file"):
        return
    root = parsed.path if parsed.scheme else location
    for directory, _, _ in sorted(os.walk(root), key=lambda entry: -len(entry[0])):
        try:
            os.rmdir(directory)
        except OSError:
            pass  # not empty: a file written after the drop began
