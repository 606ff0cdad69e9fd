"""A shared, writable memory mapping of a file that keeps no file descriptor open.

CPython's ``mmap.mmap`` duplicates the descriptor it is given and holds the copy for the life
of the mapping (``trackfd=False`` arrives only in Python 3.13). With an offset index and a time
index per segment, that made every partition replica cost three descriptors, and a broker
holding 10,000 replicas needed 30,000 of them, more than many containers allow (20,000 here,
with no way to raise it). The kernel needs no descriptor once a mapping exists, so this maps
with libc's mmap through ctypes and lends the bytes out as a memoryview: a replica then holds
one descriptor, its ``.log``.

The price is that nothing stops a use after ``close``: a memoryview into unmapped memory
crashes the process instead of raising. The owner (``IndexFile``) therefore never hands the
view out: callers get ints from ``struct`` and ``bytes`` copies of slices, and every use happens
on the event loop that also closes it.
"""

from __future__ import annotations

import ctypes
import mmap
import os

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.restype = ctypes.c_int
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.msync.restype = ctypes.c_int
_libc.msync.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.madvise.restype = ctypes.c_int
_libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_memory_view = ctypes.pythonapi.PyMemoryView_FromMemory
_memory_view.restype = ctypes.py_object
_memory_view.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int]

_MAP_FAILED = ctypes.c_void_p(-1).value
_MS_SYNC = 4  # <sys/mman.h> on Linux; the mmap module does not export it
_PYBUF_WRITE = 0x200


def _os_error(doing: str) -> OSError:
    code = ctypes.get_errno()
    return OSError(code, f"{doing}: {os.strerror(code)}")


class FileMapping:
    """``length`` bytes of the file open as ``fd``, mapped shared and writable; ``fd`` may be
    closed as soon as this returns."""

    def __init__(self, fd: int, length: int):
        if length <= 0:
            raise ValueError("cannot map an empty file")
        address = _libc.mmap(None, length, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
        if address is None or address == _MAP_FAILED:
            raise _os_error("mmap")
        self._address: int | None = address
        self._length = length
        # No readahead on a fault. An index is read by binary search and written one entry at a
        # time, so pages around a fault are rarely the next ones used. And a fresh index is a
        # preallocated sparse file: this kernel's readahead filled large folios of it with
        # zeroes on the first store. That was 2 s of broker CPU for a new topic of 512 partitions.
        _libc.madvise(address, length, mmap.MADV_RANDOM)  # advice only: a refusal changes nothing
        self.view: memoryview = _memory_view(address, length, _PYBUF_WRITE)

    def __len__(self) -> int:
        return self._length

    def flush(self) -> None:
        """Write dirty pages to the file now (msync), as ``mmap.mmap.flush`` does."""
        if self._address is not None and _libc.msync(self._address, self._length, _MS_SYNC) != 0:
            raise _os_error("msync")

    def close(self) -> None:
        """Unmap. The view is released first, so a use through it raises instead of crashing."""
        if self._address is None:
            return
        self.view.release()
        address, self._address = self._address, None
        if _libc.munmap(address, self._length) != 0:
            raise _os_error("munmap")

    def __del__(self) -> None:
        # a mapping dropped without close (an exception while opening) must not leak address space
        if getattr(self, "_address", None) is not None:
            try:
                self.close()
            except (OSError, BufferError):
                pass
