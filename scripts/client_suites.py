"""Run kafka-python's and aiokafka's own integration tests against a strom broker.

    .venv/bin/python scripts/client_suites.py                  # both suites
    .venv/bin/python scripts/client_suites.py --suite kafka-python -- -k test_kafka_consumer

The suites are the clients' own, of the versions installed in the venv, kept outside the repo in
``$STROM_CLIENT_SUITES_CACHE`` (default ``~/.cache/strom-client-suites``): kafka-python's tests come
from its PyPI sdist, plus the four support files (test/conftest.py, service.py, mock_broker.py,
__init__.py) the sdist leaves out, taken from the project's git at the release tag; aiokafka's sdist
has no tests, so they come from its git tag. Nothing of them is changed.

How each is pointed at strom, with no Kafka, ZooKeeper or docker:
- kafka-python reads ``KAFKA_VERSION`` (which Kafka to expect: 3.9.0, the line whose API versions
  strom serves) and ``KAFKA_URI`` (an external broker instead of one it would start).
- aiokafka starts a docker image through fixtures; ``scripts/strom_aiokafka_plugin.py`` answers
  those fixtures with a strom broker this script starts with the listeners of aiokafka's image
  (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL, ACLs on, admin a super user). Only the tests that need
  a broker run; the unit tests are deselected.

Prints pass/fail/skip counts per suite and one line per failure (from JUnit XML).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path

from strom.cluster.zookeeper_server import free_port
from strom.testing.nodes import ProcessNode

CACHE = Path(os.environ.get("STROM_CLIENT_SUITES_CACHE", Path.home() / ".cache" / "strom-client-suites"))
# bare git mirrors of the clients' repositories, used instead of cloning from GitHub when present
MIRRORS = Path(os.environ.get("STROM_GIT_MIRRORS", "/work/.mirror"))
# test-only dependencies of the suites, kept out of the project's venv (aiokafka's conftest imports docker)
SUITE_DEPS = [
    "pytest-asyncio==1.3.0",
    "pytest-mock==3.15.1",
    "docker==7.1.0",
    "requests",
    "urllib3",
    "certifi",
    "idna",
    "charset-normalizer",
]
GIT_SOURCES = {
    "kafka-python": ("https://github.com/dpkp/kafka-python.git", MIRRORS / "dpkp+kafka-python" / "repo"),
    "aiokafka": ("https://github.com/aio-libs/aiokafka.git", MIRRORS / "aio-libs+aiokafka" / "repo"),
}
# the support files kafka-python's sdist leaves out, taken from the newest release tag at or below the
# installed version (3.0.12 is not tagged in the mirror here; its test files are byte for byte 3.0.11's)
KAFKA_PYTHON_SUPPORT = ["test/__init__.py", "test/conftest.py", "test/service.py", "test/mock_broker.py"]
SUITE_TIMEOUT_S = 3600


def run(cmd: list[str]) -> None:
    subprocess.run(cmd, check=True)


def git_dir(suite: str) -> Path:
    """A bare clone of the client's repository (a local mirror when there is one)."""
    url, mirror = GIT_SOURCES[suite]
    if mirror.exists():
        return mirror
    target = CACHE / f"{suite}.git"
    if not target.exists():
        run(["git", "clone", "--bare", "--filter=blob:none", url, str(target)])
    return target


def git_extract(suite: str, ref: str, paths: list[str], dest: Path) -> None:
    archive = subprocess.run(
        ["git", "--git-dir", str(git_dir(suite)), "archive", ref, *paths], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "x", "-C", str(dest)], input=archive, check=True)


def newest_tag_at_most(suite: str, release: str) -> str:
    tags = subprocess.run(
        ["git", "--git-dir", str(git_dir(suite)), "tag"], check=True, capture_output=True, text=True
    ).stdout.split()

    def key(tag: str) -> tuple[int, ...]:
        return tuple(int(part) for part in tag.lstrip("v").split("."))

    wanted = key(release)
    numeric = [t for t in tags if all(p.isdigit() for p in t.lstrip("v").split("."))]
    return max((t for t in numeric if key(t) <= wanted), key=key)


def pip(*args: str) -> None:
    run([sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args])


def prepare_kafka_python() -> Path:
    release = version("kafka-python")
    root = CACHE / f"kafka-python-{release}-tests"
    if (root / "test" / "conftest.py").exists():
        return root
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        pip("download", "--no-binary", ":all:", "--no-deps", f"kafka-python=={release}", "-d", tmp)
        with tarfile.open(next(Path(tmp).glob("kafka_python-*.tar.gz"))) as sdist:
            sdist.extractall(tmp)  # noqa: S202 (a PyPI sdist)
        unpacked = Path(tmp) / f"kafka_python-{release}"
        root.mkdir(parents=True, exist_ok=True)
        shutil.copytree(unpacked / "test", root / "test", dirs_exist_ok=True)
        shutil.copy(unpacked / "pyproject.toml", root / "pyproject.toml")
    git_extract("kafka-python", newest_tag_at_most("kafka-python", release), KAFKA_PYTHON_SUPPORT, root)
    return root


def prepare_aiokafka() -> Path:
    release = version("aiokafka")
    root = CACHE / f"aiokafka-{release}-tests"
    if (root / "tests" / "conftest.py").exists():
        return root
    root.mkdir(parents=True, exist_ok=True)
    git_extract("aiokafka", f"v{release}", ["tests", "pyproject.toml", "docker/scripts"], root)
    return root


def prepare_deps() -> Path:
    site = CACHE / "site"
    if not (site / "docker").exists():
        pip("install", "--no-deps", "--target", str(site), *SUITE_DEPS)
    return site


@dataclass
class Outcome:
    suite: str
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def line(self) -> str:
        total = self.passed + self.failed + self.errors + self.skipped
        return (
            f"{self.suite}: {self.passed} passed, {self.failed} failed, {self.errors} errors, "
            f"{self.skipped} skipped of {total} ({self.seconds:.0f} s)"
        )


def read_junit(suite: str, path: Path) -> Outcome:
    outcome = Outcome(suite)
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        kinds = {child.tag: child for child in case}
        if "failure" in kinds or "error" in kinds:
            child = kinds.get("failure", kinds.get("error"))
            assert child is not None
            if "failure" in kinds:
                outcome.failed += 1
            else:
                outcome.errors += 1
            message = (child.get("message") or "").strip().splitlines()
            outcome.failures.append(f"{name}: {message[0][:200] if message else child.tag}")
        elif "skipped" in kinds:
            outcome.skipped += 1
        else:
            outcome.passed += 1
    return outcome


def start_broker(data: Path, overrides: dict[str, str]) -> ProcessNode:
    node = ProcessNode(0, data, overrides)
    node.start(timeout=60)
    return node


def pytest_run(suite: str, root: Path, env: dict[str, str], args: list[str], work: Path) -> Outcome:
    junit = work / f"{suite}.xml"
    log = work / f"{suite}.log"
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--junitxml={junit}", "-q", *args]
    began = time.monotonic()
    with open(log, "wb") as out:
        subprocess.run(
            cmd,
            cwd=root,
            env={**os.environ, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=SUITE_TIMEOUT_S,
            check=False,
        )
    if not junit.exists():
        raise SystemExit(f"{suite}: pytest wrote no report (a crash before the tests ran?), see {log}")
    outcome = read_junit(suite, junit)
    outcome.seconds = time.monotonic() - began
    print(f"  (pytest output: {log})")
    return outcome


def run_kafka_python(work: Path, site: Path, extra: list[str], kafka_version: str) -> Outcome:
    root = prepare_kafka_python()
    # what the suite's own broker fixture configures for Kafka 3.x (servers/resources/default/kafka.properties)
    overrides = {
        "num.partitions": "4",
        "group.min.session.timeout.ms": "1000",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
    }
    node = start_broker(work / "kafka-python-broker", overrides)
    no_kafka = work / "no-kafka-install"  # the fixtures check that KAFKA_ROOT exists, even for an external broker
    no_kafka.mkdir(exist_ok=True)
    try:
        env = {
            "PYTHONPATH": str(site),
            "KAFKA_ROOT": str(no_kafka),
            "KAFKA_VERSION": kafka_version,
            "KAFKA_URI": f"PLAINTEXT://127.0.0.1:{node.port}",
        }
        return pytest_run("kafka-python", root, env, ["test/integration", *extra], work)
    finally:
        node.stop()


def run_aiokafka(work: Path, site: Path, extra: list[str], kafka_version: str) -> Outcome:
    sys.path.insert(0, str(Path(__file__).parent))
    from strom_aiokafka_plugin import make_ssl_folder

    root = prepare_aiokafka()
    ssl_dir = make_ssl_folder(work / "aiokafka-ssl")
    ports = {name: free_port() for name in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")}
    users = 'username="admin" password="admin" user_admin="admin" user_test="test" user_test2="test2";'
    overrides = {
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "num.partitions": "2",
        "auto.create.topics.enable": "true",
        "ssl.keystore.location": str(ssl_dir / "broker.pem"),
        "ssl.truststore.location": str(ssl_dir / "ca.crt"),
        "listener.name.ssl.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": f"org.apache.kafka.common.security.plain.PlainLoginModule required {users}",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": f"org.apache.kafka.common.security.plain.PlainLoginModule required {users}",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
        "super.users": "User:admin",
    }
    node = start_broker(work / "aiokafka-broker", overrides)
    try:
        env = {
            "PYTHONPATH": os.pathsep.join([str(site), str(Path(__file__).parent)]),
            "STROM_AIOKAFKA_PORTS": ",".join(str(ports[n]) for n in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")),
            "STROM_AIOKAFKA_SSL_DIR": str(ssl_dir),
            "STROM_PYTHON": sys.executable,
        }
        # pytest-asyncio 1.3 warns when this is unset, and the suite turns warnings into errors
        args = [
            "-p",
            "strom_aiokafka_plugin",
            "--docker-image",
            f"strom:{kafka_version}",
            "--timeout=120",
            "-o",
            "asyncio_default_fixture_loop_scope=function",
            # protocol unit tests, none needs a broker; their collection fails on pytest 9.2 (PytestRemovedIn10Warning)
            "--ignore=tests/test_requests.py",
            "tests",
            *extra,
        ]
        return pytest_run("aiokafka", root, env, args, work)
    finally:
        node.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", action="append", choices=["kafka-python", "aiokafka"], help="default: both")
    parser.add_argument(
        "--kafka-version",
        default="3.9.0",
        help="the Kafka the suites expect (they gate tests on it): 3.9.0, the line whose API versions strom serves",
    )
    parser.add_argument("pytest_args", nargs="*", help="after --: passed to pytest")
    options = parser.parse_args()
    suites = options.suite or ["kafka-python", "aiokafka"]
    extra = options.pytest_args
    CACHE.mkdir(parents=True, exist_ok=True)
    site = prepare_deps()
    work = Path(tempfile.mkdtemp(prefix="run-", dir=CACHE))
    outcomes = []
    for suite in suites:
        print(f"== {suite} {version(suite)}", flush=True)
        runner = run_kafka_python if suite == "kafka-python" else run_aiokafka
        outcome = runner(work, site, extra, options.kafka_version)
        print(outcome.line())
        for failure in outcome.failures:
            print(f"  FAIL {failure}")
        outcomes.append(outcome)
    print("== summary")
    for outcome in outcomes:
        print(outcome.line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
