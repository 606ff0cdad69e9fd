"""``python -m strom.chaos``: randomized fault schedules against a 3-broker cluster, checked.

    python -m strom.chaos --runs 50 --minutes 3 [--seed 1] [--unclean] [--faults kill,pause,...]
                          [--workload queue|txn]

Each run: ZooKeeper and 3 brokers (RF=3, min.insync.replicas=2, unclean election off unless
--unclean), producers writing throughout, and a schedule of faults drawn from the run's seed —
one at a time, each held for a few seconds (often past the 6 s ZooKeeper session), then healed.
At the end every fault is healed, the topic is read back and checked (strom.chaos.workload), the
brokers are stopped cleanly and their replica files compared batch by batch. A failing run keeps
its directory (history, broker logs, data) and prints the command that replays its schedule.
With --unclean, loss is allowed but must be detected and reported. A consumer group
(strom.chaos.group) consumes the topic throughout, under the faults, drains after healing, and
its history is checked too (committed offsets and high watermarks never going back, every
acknowledged value read, nothing read that definitely failed).

Network faults (strom.chaos.faults) are aimed at partition 0's leader and followers as ZooKeeper
names them when injected; what strom did while each was held (leader, ISR, epoch, writes
acknowledged per partition, the brokers' lines about fencing and elections) is printed under
it. ``unclean-election`` is only run when named, and its runs use min.insync.replicas=1.
``--workload txn`` replaces the idempotent producers with transactional ones (strom.chaos.txn)
and checks the topic as a read_committed consumer sees it. Clock faults (strom.chaos.clock) step
one broker's wall clock 1-6 hours forward or back; a run that has them stamps records with the
leader's clock (LogAppendTime) and also checks ListOffsets by timestamp (queue workload).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from strom.chaos import clock as clock_faults
from strom.chaos import faults as network
from strom.chaos.cluster import ChaosCluster
from strom.chaos.group import GroupConsumers, GroupVerdict, check_group, queue_outcomes, txn_outcomes
from strom.chaos.txn import TxnProducers, check_txn
from strom.chaos.workload import GroupChecks, Producers, Verdict, check, epoch_bumps, read_everything

TOPIC = "chaos"
PARTITIONS = 3
PROCESS_FAULTS = ("kill", "pause", "restart", "zookeeper-pause", "zookeeper-cut", "zookeeper-cut-one-way")
FAULTS = (
    *PROCESS_FAULTS,
    *network.NETWORK_FAULTS,
    *network.OVERLAPPING_FAULTS,
    *clock_faults.CLOCK_FAULTS,
    network.UNCLEAN_FAULT,
)
DEFAULT_FAULTS = tuple(k for k in FAULTS if k != network.UNCLEAN_FAULT)
WORKLOADS = ("queue", "txn")


@dataclass
class Fault:
    kind: str
    broker: int
    at_s: float
    hold_s: float
    jump_s: float = 0.0  # clock faults: how far the clock is stepped

    def describe(self) -> str:
        jump = f" by {self.jump_s / clock_faults.HOUR_S:+.2f} h" if self.jump_s else ""
        return f"{self.at_s:5.1f}s {self.kind}{jump} broker {self.broker} for {self.hold_s:.1f}s"


def schedule(seed: int, seconds: float, kinds: tuple[str, ...]) -> list[Fault]:
    """The faults of one run: the seed decides everything, so a run can be replayed."""
    rng = random.Random(seed)
    faults = []
    at = rng.uniform(3, 6)
    while at < seconds - 10:
        kind = rng.choice(kinds)
        hold = rng.uniform(2, 11) if kind != "restart" else 0.0
        faults.append(Fault(kind, rng.randint(1, 3), round(at, 1), round(hold, 1)))
        if kind in clock_faults.CLOCK_FAULTS:  # drawn only for them: other kinds' schedules stay as they were
            faults[-1].jump_s = clock_faults.draw_jump(rng, kind)
        at += hold + rng.uniform(6, 14)  # time to heal: sessions re-established, ISR back
    return faults


def _inject(cluster: ChaosCluster, fault: Fault) -> None:
    if fault.kind == "kill":
        cluster.kill(fault.broker)
    elif fault.kind == "pause":
        cluster.pause(fault.broker)
    elif fault.kind == "restart":
        cluster.restart(fault.broker)
    elif fault.kind == "zookeeper-pause":
        cluster.pause_zookeeper()
    elif fault.kind == "zookeeper-cut":
        cluster.cut_from_zookeeper(fault.broker)
    elif fault.kind == "zookeeper-cut-one-way":
        cluster.cut_from_zookeeper(fault.broker, "from_target")  # requests go out, answers never come back


def _heal(cluster: ChaosCluster) -> None:
    cluster.heal_all()
    cluster.start_all()


def run_once(
    root: Path,
    faults: list[Fault],
    seconds: float,
    unclean: bool,
    log=print,
    workload: str = "queue",
    observations: list[network.Observation] | None = None,
) -> tuple[Verdict, dict[str, int]]:
    """One run of a fault schedule; the verdict and how many faults of each kind were injected.

    What strom did under each network fault is appended to ``observations`` when given.
    """
    min_isr = "1" if any(f.kind == network.UNCLEAN_FAULT for f in faults) else "2"
    clocks = any(f.kind in clock_faults.CLOCK_FAULTS for f in faults)
    cluster = ChaosCluster(
        root,
        overrides={
            "unclean.leader.election.enable": "true" if unclean else "false",
            "min.insync.replicas": min_isr,
            "default.replication.factor": "3",
            "auto.create.topics.enable": "false",
            **(clock_faults.BROKER_OVERRIDES if clocks else {}),
        },
    ).start()
    injected: dict[str, int] = {}
    time_anomalies: list[str] = []  # ListOffsets by timestamp answers that contradict the stored records
    observer = None
    group = None
    try:
        _create_topic(cluster.bootstrap, clock_faults.TOPIC_CONFIG if clocks else {})
        observer = network.Observer(cluster, TOPIC, PARTITIONS)
        isolation = "read_committed" if workload == "txn" else "read_uncommitted"
        watching = observer

        def leader_epochs() -> dict[int, int | None]:
            return {p: (s.leader_epoch if s is not None else None) for p, s in watching.states().items()}

        group = GroupConsumers(cluster.bootstrap, TOPIC, PARTITIONS, isolation, leader_epochs).start()
        producers: Producers | TxnProducers
        producers = (TxnProducers if workload == "txn" else Producers)(cluster.bootstrap, TOPIC, log_dir=root).start()
        began = time.monotonic()
        for fault in faults:
            time.sleep(max(0.0, fault.at_s - (time.monotonic() - began)))
            log(f"  {fault.describe()}")
            if fault.kind in PROCESS_FAULTS:
                _inject(cluster, fault)
            else:
                before, acked_before = observer.states(), _acked(producers)
                observer.mark_logs()
                if fault.kind in clock_faults.CLOCK_FAULTS:
                    target = clock_faults.inject(cluster, observer, fault.kind, fault.broker, fault.jump_s, log)
                else:
                    target = network.inject(cluster, observer, fault.kind, fault.broker, log)
            injected[fault.kind] = injected.get(fault.kind, 0) + 1
            time.sleep(fault.hold_s)
            if fault.kind not in PROCESS_FAULTS:
                acked_after = _acked(producers)
                seen = network.Observation(
                    fault.kind,
                    target,
                    before,
                    observer.states(),
                    {p: acked_after[p] - acked_before[p] for p in acked_after},
                    observer.log_events(),
                )
                log(f"    {seen.describe()}")
                for event in seen.events[:12]:
                    log(f"      {event}")
                if observations is not None:
                    observations.append(seen)
            _heal(cluster)
        time.sleep(max(0.0, seconds - (time.monotonic() - began)))
        _heal(cluster)
        if isinstance(producers, TxnProducers):
            txn_history = producers.stop()
            read = read_everything(cluster.bootstrap, TOPIC, PARTITIONS, isolation="read_committed")
            (root / "history.json").write_text(
                json.dumps(
                    {
                        "committed": sorted(txn_history.committed),
                        "aborted": sorted(txn_history.aborted),
                        "unknown": sorted(txn_history.unknown),
                        "batch_size": producers.batch_size,
                    }
                )
            )
        else:
            history = producers.stop()
            read = read_everything(cluster.bootstrap, TOPIC, PARTITIONS)
            if clocks:
                time_anomalies, asked, steps_back = clock_faults.check_list_offsets(
                    cluster.bootstrap, TOPIC, PARTITIONS
                )
                log(
                    f"  ListOffsets by timestamp: {asked} asked, {len(time_anomalies)} wrong; "
                    f"timestamps stepped back {steps_back} times in the logs"
                )
            (root / "history.json").write_text(
                json.dumps({"acked": history.acked, "failed": history.failed, "fatal": history.fatal})
            )
            if history.fatal:
                log(f"  fatal producer errors (producer replaced): {len(history.fatal)}, first: {history.fatal[0]}")
        outcomes = txn_outcomes(txn_history) if isinstance(producers, TxnProducers) else queue_outcomes(history)
        group_verdict = _drain_and_check(root, group, outcomes, read, log)
        for node in cluster.nodes.values():  # clean stops flush every replica's files
            node.stop()
        differences = cluster.replicas_identical(TOPIC, PARTITIONS, 5)
        if isinstance(producers, TxnProducers):
            verdict = check_txn(txn_history, read, differences)
        else:
            verdict = check(history, read, differences)
            verdict.anomalies.extend(time_anomalies)
        verdict.group = group_verdict
        verdict.epoch_bumps = epoch_bumps(root)
        for line in verdict.epoch_bumps[:6]:
            log(f"    {line}")
        return verdict, injected
    finally:
        if group is not None:
            group.stop()
        if observer is not None:
            observer.close()
        cluster.stop()


def _drain_and_check(
    root: Path,
    group: GroupConsumers,
    outcomes: tuple[set[str], set[str], set[str]],
    read: dict[int, list[tuple[int, str]]],
    log,
) -> GroupVerdict:
    """Let the group read what is left after healing (bounded), stop it, and check its history."""
    acked, definitely_failed, indeterminate = outcomes
    present = {value for records in read.values() for _offset, value in records}
    began = time.monotonic()
    # what is no longer in the topic cannot be drained (the read-back check reports it as lost)
    drained = group.drain(acked & present)
    took = time.monotonic() - began
    history = group.stop()
    log(
        f"  group drain: {'complete' if drained else 'INCOMPLETE'} after {took:.1f}s, "
        f"members stopped in {time.monotonic() - began - took:.1f}s"
    )
    (root / "group.json").write_text(json.dumps(history.to_json()))
    return check_group(history, acked, definitely_failed, indeterminate)


def _acked(producers: Producers | TxnProducers) -> dict[int, int]:
    """Writes acknowledged so far per partition (committed batches' records count for the transactional workload)."""
    if isinstance(producers, Producers):
        return network.acked_per_partition(producers.history, PARTITIONS)
    return {network.ALL_PARTITIONS: producers.history.acked_count()}  # batches span partitions


def _create_topic(bootstrap: str, config: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 30
    while True:
        try:
            admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config=config)])[TOPIC].result(10)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


GROUP_FIGURES = (
    "reads",
    "duplicate_reads",
    "commits",
    "commits_failed",
    "rebalances",
    "crashes",
    "missed",
    "failed_read",
    "commit_backwards",
    "watermark_backwards",
    "watermark_back_after_election",
)


def _group_figures(group: GroupChecks) -> dict[str, int]:
    return {name: (len(v) if isinstance(v := getattr(group, name), list) else v) for name in GROUP_FIGURES}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m strom.chaos", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--minutes", type=float, default=1.0, help="length of each run")
    parser.add_argument("--seed", type=int, default=1, help="seed of the first run (run i uses seed + i)")
    parser.add_argument("--unclean", action="store_true", help="unclean.leader.election.enable=true")
    parser.add_argument(
        "--faults",
        default=",".join(DEFAULT_FAULTS),
        help=f"comma-separated subset of {','.join(FAULTS)} (default: all but {network.UNCLEAN_FAULT})",
    )
    parser.add_argument(
        "--workload",
        choices=WORKLOADS,
        default="queue",
        help="queue: idempotent producers; txn: transactional producers, checked read_committed",
    )
    parser.add_argument("--dir", default=None, help="where runs keep their files (a temporary directory if not given)")
    args = parser.parse_args(argv)
    kinds = tuple(k for k in args.faults.split(",") if k)
    unknown = [k for k in kinds if k not in FAULTS]
    if unknown:
        parser.error(f"unknown faults {unknown}; known: {', '.join(FAULTS)}")
    base = Path(args.dir or tempfile.mkdtemp(prefix="strom-chaos-"))
    totals = {"acked": 0, "lost": 0, "duplicated": 0, "moved": 0, "out_of_order": 0, "failed_runs": 0, "bumps": 0}
    group_totals = dict.fromkeys(GROUP_FIGURES, 0)
    faults_total: dict[str, int] = {}
    per_kind: dict[str, dict[str, int]] = {}  # fault kind -> figures of the runs it was injected in
    for i in range(args.runs):
        seed = args.seed + i
        root = base / f"run-{seed}"
        print(
            f"run {i + 1}/{args.runs} seed {seed}{' (unclean)' if args.unclean else ''}"
            f"{' workload txn' if args.workload == 'txn' else ''}",
            flush=True,
        )
        replay = (
            f"    kept in {root}; replay: python -m strom.chaos --runs 1 --seed {seed} "
            f"--minutes {args.minutes} --faults {','.join(kinds)} --workload {args.workload}"
            f"{' --unclean' if args.unclean else ''}"
        )
        try:
            verdict, injected = run_once(
                root,
                schedule(seed, args.minutes * 60, kinds),
                args.minutes * 60,
                args.unclean,
                log=lambda line: print(line, flush=True),
                workload=args.workload,
            )
        except Exception as exc:  # the history could not be checked: a failed run, and the campaign goes on
            totals["failed_runs"] += 1
            print(f"  ERROR: the run could not be checked: {type(exc).__name__}: {exc}", flush=True)
            print(replay, flush=True)
            continue
        for kind, n in injected.items():
            faults_total[kind] = faults_total.get(kind, 0) + n
            figures = per_kind.setdefault(kind, dict.fromkeys(("runs", "faults", "acked", "lost", "duplicated"), 0))
            figures["runs"] += 1
            figures["faults"] += n
            figures["acked"] += verdict.acknowledged
            figures["lost"] += len(verdict.lost)
            figures["duplicated"] += len(verdict.duplicated)
        totals["acked"] += verdict.acknowledged
        totals["lost"] += len(verdict.lost)
        totals["duplicated"] += len(verdict.duplicated)
        totals["moved"] += len(verdict.moved)
        totals["out_of_order"] += len(verdict.out_of_order)
        totals["bumps"] += len(verdict.epoch_bumps)
        if verdict.group is not None:
            for name, value in _group_figures(verdict.group).items():
                group_totals[name] += value
        print(f"  {'ok' if verdict.ok else 'ANOMALY'}: {verdict.summary()}", flush=True)
        lagging = verdict.group.watermark_back_after_election if verdict.group is not None else []
        if lagging:
            print(f"    group watermark back after an election (not a failure): {lagging[:3]}", flush=True)
        if verdict.ok:
            shutil.rmtree(root, ignore_errors=True)
        else:
            totals["failed_runs"] += 1
            for name in ("lost", "duplicated", "moved", "out_of_order", "replica_differences", "anomalies"):
                items = getattr(verdict, name)
                if items:
                    print(f"    {name}: {items[:10]}{' ...' if len(items) > 10 else ''}")
            for name in ("missed", "failed_read", "commit_backwards", "watermark_backwards"):
                items = getattr(verdict.group, name) if verdict.group is not None else []
                if items:
                    print(f"    group {name}: {items[:10]}{' ...' if len(items) > 10 else ''}")
            print(replay, flush=True)
    print(f"\nfaults injected: {', '.join(f'{k} {n}' for k, n in sorted(faults_total.items()))}")
    print("per fault kind (figures of the runs it was injected in):")
    for kind, figures in sorted(per_kind.items()):
        print(
            f"  {kind:24} runs {figures['runs']:3}  faults {figures['faults']:3}  acked {figures['acked']:8}  "
            f"lost {figures['lost']:5}  duplicated {figures['duplicated']:5}"
        )
    print(
        f"runs {args.runs}, anomalous {totals['failed_runs']}; acknowledged {totals['acked']}, lost {totals['lost']}, "
        f"duplicated {totals['duplicated']}, moved {totals['moved']}, out of order {totals['out_of_order']}; "
        f"producer epoch bumps {totals['bumps']}"
    )
    print(
        f"consumer group: read {group_totals['reads']} ({group_totals['duplicate_reads']} duplicate reads, "
        f"after rebalances), commits {group_totals['commits']} ({group_totals['commits_failed']} failed), "
        f"assignments {group_totals['rebalances']} ({group_totals['crashes']} member crashes), "
        f"missed {group_totals['missed']}, "
        f"failed values read {group_totals['failed_read']}, commits backwards {group_totals['commit_backwards']}, "
        f"watermark backwards {group_totals['watermark_backwards']} (and "
        f"{group_totals['watermark_back_after_election']} after an election: a new leader's lagging watermark)"
    )
    return 1 if totals["failed_runs"] and not args.unclean else 0


if __name__ == "__main__":
    sys.exit(main())
