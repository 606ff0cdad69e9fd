"""Replica placement: Kafka's algorithm, as the seeds describe it.

Without racks: partition i's first replica goes on broker (i + start) mod n, and its other
replicas follow at a shift that grows every n partitions, so leaders spread round-robin and
followers do not always pair up with the same broker. With racks, brokers are first ordered
alternating between racks, so consecutive replicas land on different racks.
"""

from __future__ import annotations

import random


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def rack_alternating(brokers: dict[int, str | None]) -> list[int]:
    """Broker ids ordered rack by rack in turn: [r1b1, r2b1, r3b1, r1b2, ...]."""
    by_rack: dict[str, list[int]] = {}
    for broker_id in sorted(brokers):
        by_rack.setdefault(brokers[broker_id] or "", []).append(broker_id)
    racks = sorted(by_rack)
    ordered: list[int] = []
    depth = 0
    while len(ordered) < len(brokers):
        for rack in racks:
            if depth < len(by_rack[rack]):
                ordered.append(by_rack[rack][depth])
        depth += 1
    return ordered


def assign_replicas(
    brokers: dict[int, str | None],
    partitions: int,
    replication_factor: int,
    *,
    first_partition: int = 0,
    start_index: int | None = None,
    shift: int | None = None,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """partition -> replica broker ids for ``partitions`` new partitions numbered from ``first_partition``."""
    if replication_factor < 1:
        raise ValueError("replication factor must be at least 1")
    if replication_factor > len(brokers):
        raise ValueError(f"replication factor {replication_factor} is larger than the {len(brokers)} available brokers")
    rng = rng or random.Random()
    has_racks = any(rack for rack in brokers.values())
    order = rack_alternating(brokers) if has_racks else sorted(brokers)
    n = len(order)
    start = rng.randrange(n) if start_index is None else start_index
    next_shift = rng.randrange(n) if shift is None else shift
    result: dict[int, list[int]] = {}
    for i in range(partitions):
        index = first_partition + i
        if index > 0 and index % n == 0:
            next_shift += 1
        first = (index + start) % n
        replicas = [order[first]]
        for j in range(replication_factor - 1):
            replicas.append(order[_replica_index(first, next_shift, j, n)])
        if has_racks:
            replicas = _spread_racks(replicas, order, brokers, first, next_shift, replication_factor)
        result[index] = replicas
    return result


def _spread_racks(replicas, order, brokers, first, shift, rf):
    """Prefer a broker on a rack not yet used, as Kafka's rack-aware assignment does."""
    n = len(order)
    chosen = [order[first]]
    racks = {brokers[order[first]]}
    all_racks = {brokers[b] for b in order}
    k = 0
    while len(chosen) < rf and k < 10 * n:
        candidate = order[_replica_index(first, shift, k, n)]
        k += 1
        if candidate in chosen:
            continue
        if brokers[candidate] in racks and len(racks) < len(all_racks):
            continue
        chosen.append(candidate)
        racks.add(brokers[candidate])
        if len(racks) == len(all_racks):
            racks = set()
    for broker_id in order:  # fall back to any unused broker
        if len(chosen) >= rf:
            break
        if broker_id not in chosen:
            chosen.append(broker_id)
    return chosen
