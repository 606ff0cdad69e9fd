"""``python -m strom.fuzz TARGET [--runs N] [--seconds S] [-- libFuzzer flags]`` and its helpers.

    python -m strom.fuzz decode --runs 200000          # coverage-guided, seeds from tests/fuzz/corpus
    python -m strom.fuzz replay broker tests/fuzz/corpus/broker/regressions
    python -m strom.fuzz capture                       # re-capture the seeds from the four clients
    python -m strom.fuzz storage-campaign --runs 200   # corrupt a real broker's data dir, restart it

A run reads the target's seeds and regressions from tests/fuzz/corpus/<target>/ and grows a
working corpus in --work (default /tmp/strom-fuzz/<target>); a crash leaves its input there as
crash-<sha1>, to be copied to tests/fuzz/corpus/<target>/regressions once fixed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from strom.fuzz.corpus import corpus_dirs

TARGETS = ("frame", "decode", "broker", "records", "storage")


def make_target(name: str, root: str | None = None):
    """A target object with setup/check/teardown (the plain functions are wrapped)."""
    from strom.fuzz import targets

    if name == "broker":
        return targets.BrokerTarget(root)
    if name == "records":
        return targets.RecordsTarget(root)
    if name == "storage":
        from strom.fuzz.storage import StorageTarget

        return StorageTarget(root)
    return _Plain(getattr(targets, f"check_{name}"))


class _Plain:
    def __init__(self, check):
        self.check = check
        self.counts: dict[str, int] = {}

    def setup(self) -> None:
        from strom.fuzz.targets import warm_up_codec

        warm_up_codec()

    def teardown(self) -> None:
        pass


def _scratch(target: str, chosen: str | None) -> str:
    """Where a target's data dirs go: /dev/shm when there is one (the targets write and fsync
    files for every input), in a directory per target that each run empties first, because
    libFuzzer ends the process with exit() and no teardown runs after a crash."""
    base = chosen or ("/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else "/tmp")
    root = Path(base) / f"strom-fuzz-{target}"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    return str(root)


def _fuzz(args: argparse.Namespace, extra: list[str]) -> int:
    import atheris

    with atheris.instrument_imports(include=["strom"]):
        import strom.fuzz.storage  # noqa: F401
        import strom.fuzz.targets  # noqa: F401
        import strom.protocol.codec  # noqa: F401
        import strom.server.broker  # noqa: F401
        import strom.server.handlers  # noqa: F401
        import strom.storage.log_manager  # noqa: F401
    from strom.fuzz.targets import instrument_generated_readers, run_checked

    work = Path(args.work or f"/tmp/strom-fuzz/{args.target}")
    work.mkdir(parents=True, exist_ok=True)
    (work / "corpus").mkdir(exist_ok=True)
    target = make_target(args.target, _scratch(args.target, args.tmp))
    target.setup()
    instrument_generated_readers(atheris)
    executed = 0

    def one_input(data: bytes) -> None:
        nonlocal executed
        run_checked(target, data)
        executed += 1
        if executed == args.runs:  # libFuzzer exits right after the last run: report while we can
            print(f"strom.fuzz {args.target}: {target.counts}", file=sys.stderr, flush=True)

    flags = [
        f"-artifact_prefix={work}/",
        f"-rss_limit_mb={args.rss_limit_mb}",
        f"-timeout={args.timeout}",
        f"-max_len={args.max_len}",
        "-print_final_stats=1",
        "-reload=0",
    ]
    if args.runs is not None:
        flags.append(f"-runs={args.runs}")
    if args.seconds is not None:
        flags.append(f"-max_total_time={args.seconds}")
    if args.seed is not None:
        flags.append(f"-seed={args.seed}")
    dirs = [str(work / "corpus")] + [str(d) for d in corpus_dirs(args.target)]
    atheris.Setup([sys.argv[0], *flags, *extra, *dirs], one_input)
    try:
        atheris.Fuzz()
    finally:
        print(f"strom.fuzz {args.target}: {target.counts}", file=sys.stderr, flush=True)
        target.teardown()
    return 0


def _replay(args: argparse.Namespace) -> int:
    """Run inputs through a target without atheris; exit 1 on the first finding."""
    from strom.fuzz.targets import Finding, run_checked

    paths: list[Path] = []
    for item in args.inputs or [str(d) for d in corpus_dirs(args.target)]:
        path = Path(item)
        paths.extend(sorted(p for p in path.iterdir() if p.is_file()) if path.is_dir() else [path])
    scratch = args.tmp or _scratch(args.target + "-replay", None)
    target = make_target(args.target, scratch)
    target.setup()
    failed = 0
    try:
        for path in paths:
            try:
                run_checked(target, path.read_bytes())
            except Finding as exc:
                failed += 1
                print(f"FINDING {path}: {exc}", file=sys.stderr)
    finally:
        target.teardown()
        if not args.tmp:
            shutil.rmtree(scratch, ignore_errors=True)
    print(f"replayed {len(paths)} inputs through {args.target}: {failed} findings, {target.counts}")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1 :]
        argv = argv[: argv.index("--")]
    if argv and argv[0] == "capture":
        from strom.fuzz.capture import main as capture_main

        return capture_main(argv[1:])
    if argv and argv[0] == "storage-campaign":
        from strom.fuzz.storage import campaign_main

        return campaign_main(argv[1:])
    parser = argparse.ArgumentParser(
        prog="python -m strom.fuzz", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("target", help=f"one of {', '.join(TARGETS)}, or 'replay TARGET [FILE...]'")
    parser.add_argument("inputs", nargs="*", help="replay: files or directories (default: the kept corpus)")
    parser.add_argument("--runs", type=int, default=None, help="inputs to execute (libFuzzer -runs)")
    parser.add_argument("--seconds", type=int, default=None, help="stop after this many seconds")
    parser.add_argument("--seed", type=int, default=None, help="libFuzzer -seed, for a reproducible run")
    parser.add_argument("--work", default=None, help="working corpus and crash files (default /tmp/strom-fuzz/TARGET)")
    parser.add_argument("--tmp", default=None, help="where the broker's and logs' temporary data dirs go")
    parser.add_argument("--rss-limit-mb", type=int, default=1536, help="RSS bound: above it libFuzzer stops (crash)")
    parser.add_argument("--timeout", type=int, default=20, help="seconds one input may take before it is a hang")
    parser.add_argument("--max-len", type=int, default=16384, help="largest input the fuzzer builds")
    args = parser.parse_args(argv)
    if args.target == "replay":
        if not args.inputs:
            parser.error("replay needs a target")
        args.target, args.inputs = args.inputs[0], args.inputs[1:]
        if args.target not in TARGETS:
            parser.error(f"unknown target {args.target!r}")
        return _replay(args)
    if args.target not in TARGETS:
        parser.error(f"unknown target {args.target!r}")
    if args.inputs:
        parser.error("inputs are only for replay")
    return _fuzz(args, extra)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
