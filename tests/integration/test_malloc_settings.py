"""A broker keeps its megabyte-sized buffers in glibc's heap (strom.resources.keep_large_buffers_in_heap).

What a user would notice is the CPU per message: on one RF=3 partition, half of the leader's
and more than half of each follower's went to mapping, faulting in and unmapping buffers.
Timing that here would measure the shared machine; the page faults it saves are counted
instead, which the kernel does exactly.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.broker_process import BrokerProcess

# Buffers of 0.3-1.1 MB, three alive at a time, as a leader's request, its patched copy and a
# fetch response are: each page written once, as a received request's are.
_ALLOCATE = textwrap.dedent(
    """
    import random, resource, sys
    from strom.resources import keep_large_buffers_in_heap
    if sys.argv[1] == "kept":
        assert keep_large_buffers_in_heap()
    sizes = random.Random(1)
    live = []
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(300):
        buffer = bytearray(sizes.randrange(300_000, 1_100_000))
        buffer[::4096] = b"x" * len(range(0, len(buffer), 4096))
        live.append(buffer)
        if len(live) > 3:
            live.pop(0)
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    """
)


def _page_faults(mode: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", _ALLOCATE, mode], capture_output=True, text=True, timeout=60, check=True
    )
    return int(done.stdout)


def test_buffers_kept_in_the_heap_are_not_faulted_in_again():
    default, kept = _page_faults("default"), _page_faults("kept")
    # 300 buffers of 0.7 MB on average are about 51,000 pages; glibc's own dynamic threshold
    # already reuses some of them (about 9,800 faults here), the heap nearly all (about 1,250).
    assert kept * 3 < default, (kept, default)


class BrokerWithEnv(BrokerProcess):
    def __init__(self, *args, env: dict[str, str], **kwargs):
        super().__init__(*args, **kwargs)
        self.env = env

    def command(self) -> list[str]:
        return ["env", *(f"{k}={v}" for k, v in self.env.items()), *super().command()]


def test_the_broker_says_what_it_set_and_an_operators_glibc_variable_wins(tmp_path):
    broker = BrokerProcess(tmp_path / "default").start()
    try:
        assert "malloc: blocks up to 16 MiB come from the heap, which keeps up to 32 MiB free" in broker.read_log()
    finally:
        broker.stop()
    chosen = BrokerWithEnv(tmp_path / "chosen", env={"MALLOC_MMAP_THRESHOLD_": "131072"}).start()
    try:
        log = chosen.read_log()
        assert "MALLOC_MMAP_THRESHOLD_ or MALLOC_TRIM_THRESHOLD_ is set; leaving glibc's settings to it" in log
        assert "blocks up to 16 MiB" not in log
    finally:
        chosen.stop()
