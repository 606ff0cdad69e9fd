"""A Spark standalone cluster on this machine: one master and N workers, from pyspark's own launcher.

    python -m strom.spark.standalone --workers 2 --dir ./spark-cluster    # Ctrl-C stops it
    spark-submit --master spark://127.0.0.1:PORT strom/spark/pipelines/access_log.py ...

    with StandaloneCluster("./spark-cluster", workers=2) as spark_cluster:
        subprocess.run(spark_cluster.submit_command("app.py", ["--flag"]), env=spark_cluster.env(), ...)

The pyspark wheel ships ``bin/spark-class`` but not ``sbin/start-master.sh``, so the master and the
workers are ``spark-class org.apache.spark.deploy.master.Master`` / ``...worker.Worker`` child
processes, each in its own process group: a worker's executors (and their Python workers) are
its children, so ending the group ends them too. Everything binds 127.0.0.1 on ports the
processes choose themselves (port 0); they are read back from the master's log and its JSON
status page. The master's REST submission server is off: it would take the fixed port 6066.

The executors run Python data sources and UDFs in the interpreter ``PYSPARK_PYTHON`` names,
which the driver passes to them: on this machine that is this interpreter (strom importable);
on a real cluster it must be a Python with strom installed on every worker host.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

from strom.spark import python_env

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
START_TIMEOUT_S = 120.0  # a JVM start on a loaded 2-core machine takes 10-30 s
STOP_TIMEOUT_S = 20.0
# the daemons' own heaps; executors get spark.executor.memory from the application
DAEMON_MEMORY = "256m"

_MASTER_URL = re.compile(r"Starting Spark master at (spark://\S+)")
_MASTER_UI = re.compile(r"Successfully started service 'MasterUI' on port (\d+)")


def spark_home() -> str:
    """The installed pyspark package: its bin/ holds spark-class and spark-submit."""
    from pyspark.find_spark_home import _find_spark_home

    return os.environ.get("SPARK_HOME") or _find_spark_home()


def _get_json(url: str, timeout: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (127.0.0.1 only)
        return json.load(response)


class StandaloneCluster:
    """Master + ``workers`` workers of ``cores`` cores and ``memory`` each, under ``directory``."""

    def __init__(self, directory: str | Path, workers: int = 2, cores: int = 1, memory: str = "1g"):
        self.directory = Path(directory).resolve()
        self.n_workers = workers
        self.cores = cores
        self.memory = memory
        self.master: subprocess.Popen[bytes] | None = None
        self.workers: list[subprocess.Popen[bytes]] = []
        self.master_url = ""
        self.ui_url = ""

    # -- environment -------------------------------------------------------------------------------
    def env(self) -> dict[str, str]:
        """Environment for the daemons and for spark-submit: 127.0.0.1 only, executors run this Python."""
        env = dict(os.environ)
        env.update(python_env())
        env.update(
            SPARK_HOME=spark_home(),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_LOCAL_HOSTNAME="127.0.0.1",
            SPARK_DAEMON_MEMORY=DAEMON_MEMORY,
            SPARK_CONF_DIR=str(self.directory / "conf"),
        )
        return env

    def _write_conf(self) -> Path:
        conf = self.directory / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        properties = conf / "daemons.conf"
        properties.write_text(
            "spark.master.rest.enabled false\n"
            # an application's work directory (its executors' logs) stays for the caller to read
            "spark.worker.cleanup.enabled false\n"
        )
        return properties

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        log = open(self.directory / f"{name}.log", "ab")
        try:
            return subprocess.Popen(
                [os.path.join(spark_home(), "bin", "spark-class"), *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env(),
                cwd=self.directory,
                start_new_session=True,  # its own process group: stop() ends executors with it
            )
        finally:
            log.close()

    def log(self, name: str) -> str:
        path = self.directory / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def logs(self) -> str:
        names = ["master"] + [f"worker-{i}" for i in range(len(self.workers))]
        return "\n".join(f"--- {name}\n{self.log(name)[-4000:]}" for name in names)

    # -- start -------------------------------------------------------------------------------------
    def launch_master(self) -> None:
        """Start the master process; ``wait_ready`` reads its URL. Returns at once."""
        self.directory.mkdir(parents=True, exist_ok=True)
        properties = self._write_conf()
        self.master = self._spawn(
            "master",
            [MASTER_CLASS, "--host", "127.0.0.1", "--port", "0", "--webui-port", "0"]
            + ["--properties-file", str(properties)],
        )

    def wait_master(self, timeout: float = START_TIMEOUT_S) -> str:
        """Wait until the master has bound its ports; returns its spark:// URL."""
        deadline = time.monotonic() + timeout
        while not self.master_url and time.monotonic() < deadline:
            self._check_alive()
            text = self.log("master")
            url, ui = _MASTER_URL.search(text), _MASTER_UI.search(text)
            if url and ui:
                self.master_url = url[1]
                self.ui_url = f"http://127.0.0.1:{ui[1]}"
            else:
                time.sleep(0.2)
        if not self.master_url:
            raise RuntimeError(f"the Spark master did not start in {timeout}s\n{self.logs()}")
        return self.master_url

    def launch_workers(self) -> None:
        """Start the workers (after ``wait_master``); ``wait_ready`` waits for them to register."""
        properties = self.directory / "conf" / "daemons.conf"
        for i in range(len(self.workers), self.n_workers):
            work_dir = self.directory / f"worker-{i}"
            work_dir.mkdir(parents=True, exist_ok=True)
            self.workers.append(
                self._spawn(
                    f"worker-{i}",
                    [WORKER_CLASS, self.master_url, "--host", "127.0.0.1", "--port", "0", "--webui-port", "0"]
                    + ["--cores", str(self.cores), "--memory", self.memory, "--work-dir", str(work_dir)]
                    + ["--properties-file", str(properties)],
                )
            )

    def _check_alive(self) -> None:
        for name, process in [("master", self.master)] + [(f"worker-{i}", w) for i, w in enumerate(self.workers)]:
            if process is not None and process.poll() is not None:
                raise RuntimeError(f"Spark {name} exited with {process.returncode}\n{self.logs()}")

    def wait_ready(self, timeout: float = START_TIMEOUT_S) -> StandaloneCluster:
        """Wait until every worker has registered with the master (launching those not yet started).

        The launch steps are separate so that a caller can start other things (brokers) while
        the JVMs come up; ``start`` does it all.
        """
        deadline = time.monotonic() + timeout
        self.wait_master(timeout)
        self.launch_workers()
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                if self.status()["aliveworkers"] >= self.n_workers:
                    return self
            except OSError:
                pass  # the UI answers a little after the log line
            time.sleep(0.3)
        raise RuntimeError(f"{self.n_workers} Spark workers did not register in {timeout}s\n{self.logs()}")

    def start(self, timeout: float = START_TIMEOUT_S) -> StandaloneCluster:
        if self.master is None:
            self.launch_master()
        try:
            return self.wait_ready(timeout)
        except BaseException:
            self.stop()
            raise

    # -- status ------------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        """The master's JSON status: workers, active and completed applications."""
        return dict(_get_json(self.ui_url + "/json/"))

    def worker_status(self) -> list[dict[str, Any]]:
        """Each registered worker's own JSON status: its running and finished executors."""
        return [dict(_get_json(w["webuiaddress"] + "/json/")) for w in self.status()["workers"]]

    def submit_command(
        self,
        app: str,
        app_args: list[str] | None = None,
        conf: dict[str, str] | None = None,
        executor_memory: str = "512m",
    ) -> list[str]:
        """spark-submit argv for ``app`` on this cluster: one executor of ``cores`` cores per worker."""
        settings = {
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.executor.cores": str(self.cores),
            "spark.executor.memory": executor_memory,
            **(conf or {}),
        }
        cmd = [os.path.join(spark_home(), "bin", "spark-submit"), "--master", self.master_url]
        for key, value in settings.items():
            cmd += ["--conf", f"{key}={value}"]
        return cmd + [app, *(app_args or [])]

    def submit(
        self,
        app: str,
        app_args: list[str] | None = None,
        conf: dict[str, str] | None = None,
        *,
        log_path: str | Path,
        timeout: float,
    ) -> int:
        """Run spark-submit for ``app`` to its end; its output goes to ``log_path``. Returns its exit
        code. After ``timeout`` seconds the driver's whole process group (the spark-submit JVM and
        the Python driver it starts) is killed and TimeoutError raised."""
        with open(log_path, "ab") as log:
            driver = subprocess.Popen(
                self.submit_command(app, app_args, conf),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env(),
                start_new_session=True,
            )
        try:
            return driver.wait(timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"spark-submit {app} did not finish in {timeout}s (log: {log_path})") from None
        finally:
            _signal_group(driver, signal.SIGKILL)  # whatever it left behind
            driver.wait(10)

    # -- stop --------------------------------------------------------------------------------------
    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM the workers (they end their executors), then the master; SIGKILL each process
        group that is still there after ``timeout``. Idempotent."""
        for process in [*self.workers, self.master]:
            if process is not None:
                _signal_group(process, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for process in [*self.workers, self.master]:
            if process is None:
                continue
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            # the group, not only the daemon: executors a dying worker left behind
            _signal_group(process, signal.SIGKILL)
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                pass
        self.workers = []
        self.master = None

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _signal_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    try:
        os.killpg(process.pid, sig)  # start_new_session: the group id is the daemon's pid
    except (ProcessLookupError, PermissionError):
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m strom.spark.standalone",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--dir", default="./spark-cluster", help="logs and the workers' work directories")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cores", type=int, default=1, help="cores per worker")
    parser.add_argument("--memory", default="1g", help="memory per worker for its executors")
    args = parser.parse_args(argv)

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    cluster = StandaloneCluster(args.dir, args.workers, args.cores, args.memory)
    try:
        cluster.start()
        pipeline = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pipelines", "access_log.py")
        print(
            f"Spark master {cluster.master_url} (web UI {cluster.ui_url}), {args.workers} workers; logs in {args.dir}"
        )
        print("submit with:")
        print(f"  PYSPARK_PYTHON={sys.executable} SPARK_LOCAL_IP=127.0.0.1 \\")
        print(f"  {' '.join(cluster.submit_command(pipeline))} --bootstrap-server ... --topic ... ")
        print("Ctrl-C stops the cluster", flush=True)
        stop.wait()
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
