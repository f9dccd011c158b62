"""`anonymize` and `dp-kmeans` on a real standalone Spark cluster: one master, one worker.

The master and the worker are started from the installed pyspark (``$SPARK_HOME/bin/spark-class``
with SPARK_HOME = the pyspark package folder) on loopback, free ports, small memory and a
temporary work dir; the jobs run as deployed (``python -m leteo_fed ...``, ``--engine spark``,
``SPARK_MASTER=spark://...``), so the executors run in the worker's JVM, not in the driver. Their
outputs must equal the in-process engine's. The cluster is stopped in a ``finally`` (the whole
process group of each daemon, executors included), so no JVM outlives the test.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from leteo_fed.demo.ports import free_port

pytestmark = [pytest.mark.spark, pytest.mark.timeout(240)]

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "tests" / "leteo_fed" / "anonymize"))
from job_cases import rows, write_csv, write_job  # noqa: E402


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _env(conf_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(_spark_home()),
        SPARK_CONF_DIR=str(conf_dir),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_DAEMON_MEMORY="256m",
        PYSPARK_PYTHON=sys.executable,  # executors' Python = the driver's (same minor version)
        PYSPARK_DRIVER_PYTHON=sys.executable,
        # the master's and the worker's JVMs get the tests' JVM options (tests/conftest.py)
        SPARK_DAEMON_JAVA_OPTS=os.environ.get("SPARK_SUBMIT_OPTS", ""),
    )
    env.pop("SPARK_MASTER", None)
    return env


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM the daemon's process group (its executors too), SIGKILL what is left."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=15)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=15)


def _status(ui: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as r:
        return json.loads(r.read())


@dataclass(frozen=True)
class Cluster:
    url: str  # spark://127.0.0.1:PORT
    env: dict[str, str]  # for a driver: SPARK_MASTER and the conf dir set
    ui: int  # the master's web UI port (JSON status at /json/)
    work: Path  # the worker's work dir (executor logs)


@contextlib.contextmanager
def standalone_cluster(tmp: Path) -> Iterator[Cluster]:
    """A running 1-worker standalone cluster, stopped (process groups killed) on exit."""
    tmp.mkdir(parents=True)
    conf = tmp / "conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text(
        "spark.executor.memory 512m\nspark.executor.cores 1\nspark.cores.max 1\n"
        "spark.driver.host 127.0.0.1\nspark.driver.bindAddress 127.0.0.1\n"
        f"spark.executor.extraJavaOptions {os.environ.get('SPARK_SUBMIT_OPTS', '')}\n"
    )
    env = _env(conf)
    spark_class = str(_spark_home() / "bin" / "spark-class")
    port, ui, wport, wui = (free_port() for _ in range(4))
    url = f"spark://127.0.0.1:{port}"
    logs = [tmp / "master.log", tmp / "worker.log"]
    procs: list[subprocess.Popen] = []
    try:
        master_cmd = [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1"]
        master_cmd += ["--port", str(port), "--webui-port", str(ui)]
        worker_cmd = [spark_class, "org.apache.spark.deploy.worker.Worker", url]
        worker_cmd += ["--host", "127.0.0.1", "--port", str(wport), "--webui-port", str(wui)]
        worker_cmd += ["--cores", "1", "--memory", "768m", "--work-dir", str(tmp / "work")]
        for cmd, log in zip((master_cmd, worker_cmd), logs, strict=True):
            with log.open("wb") as out:
                procs.append(
                    subprocess.Popen(
                        cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
                    )
                )
            if cmd is master_cmd:
                _wait(lambda: _status(ui)["status"] == "ALIVE", procs, logs, "the master UI")
        _wait(
            lambda: any(w["state"] == "ALIVE" for w in _status(ui)["workers"]),
            procs,
            logs,
            "the worker's registration",
        )
        yield Cluster(url, {**env, "SPARK_MASTER": url}, ui, tmp / "work")
    finally:
        for proc in reversed(procs):
            _stop(proc)


def _wait(ready, procs: list[subprocess.Popen], logs: list[Path], what: str) -> None:  # noqa: ANN001
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError, KeyError):
            if ready():
                return
        if any(p.poll() is not None for p in procs):
            break
        time.sleep(0.25)
    tails = "\n".join(f"--- {log.name}\n{log.read_text()[-2000:]}" for log in logs if log.exists())
    raise AssertionError(f"the Spark cluster did not come up ({what})\n{tails}")


RUN_BOTH = """
import json, sys
from leteo_fed.cli.main import main
runs = json.loads(sys.argv[1])
sys.exit(max(main(argv) for argv in runs))
"""


def _cli(env: dict[str, str], *runs: list[str]) -> subprocess.CompletedProcess:
    """The CLI commands, one after the other, in ONE new interpreter (one Spark application)."""
    return subprocess.run(
        [sys.executable, "-c", RUN_BOTH, json.dumps(list(runs))],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
    )


CONFIG = """\
[anonymization]
algorithm = "mondrian"
k = 10

[[quasi_identifier]]
column = "age"
type = "numeric"

[[quasi_identifier]]
column = "education"
type = "categorical"
hierarchy = "education.csv"

[[sensitive]]
column = "income"
l_diversity = { variant = "distinct", l = 2 }

[identifiers]
drop = ["ssn"]
pseudonymize = ["name"]
key_file = "hmac.key"
"""


@pytest.mark.skipif(
    shutil.which("java") is None and "JAVA_HOME" not in os.environ, reason="no Java"
)
def test_jobs_on_a_standalone_cluster_equal_the_local_engine(tmp_path: Path) -> None:
    assert (_spark_home() / "bin" / "spark-class").exists()
    write_job(tmp_path / "job")
    config = tmp_path / "job" / "cluster.toml"
    config.write_text(CONFIG)
    data = tmp_path / "job" / "data.csv"
    write_csv(data, rows(160, seed=9))
    rng = np.random.default_rng(4)
    points = rng.normal(0, 0.3, size=(1_500, 2)) + rng.choice([-0.5, 0.5], size=(1_500, 1))
    pacsv.write_csv(pa.table({"a": points[:, 0], "b": points[:, 1]}), tmp_path / "pts.csv")
    kmeans = ["dp-kmeans", "--data", str(tmp_path / "pts.csv"), "--k", "2", "--epsilon", "1"]
    kmeans += ["--method", "eugkm", "--bounds=-1.5,1.5", "--seed", "3"]
    anonymize = ["anonymize", "--input", str(data), "--config", str(config)]

    def runs(engine: str, out: Path) -> list[list[str]]:
        return [
            [*anonymize, "--out", str(out / "release"), "--engine", engine],
            [*kmeans, "--out", str(out / "centers"), "--engine", engine],
        ]

    local = _cli(_env(tmp_path), *runs("local", tmp_path / "local"))
    assert local.returncode == 0, local.stderr
    with standalone_cluster(tmp_path / "cluster") as cluster:
        shared = tmp_path / "shared"  # the driver and the executor see this file system
        job = _cli(cluster.env, *runs("spark", shared))
        assert job.returncode == 0, job.stderr[-3000:]
        (app,) = _status(cluster.ui)["completedapps"]
        assert app["cores"] == 1
        assert list(cluster.work.rglob("stderr"))  # the executor ran in the worker

    report = json.loads((shared / "release" / "report.json").read_text())
    local_report = json.loads((tmp_path / "local" / "release" / "report.json").read_text())
    assert report["job"]["engine"]["used"] == "spark"
    assert (shared / "release" / "release.csv").read_bytes() == (
        tmp_path / "local" / "release" / "release.csv"
    ).read_bytes()
    for section in ("rows", "classes", "privacy", "information_loss", "algorithm_stats"):
        assert report[section] == local_report[section], section
    a = json.loads((tmp_path / "local" / "centers" / "dp_kmeans.json").read_text())
    b = json.loads((shared / "centers" / "dp_kmeans.json").read_text())
    assert (a["engine"]["used"], b["engine"]["used"]) == ("local", "spark")
    assert a["centers"] == b["centers"] and a["details"] == b["details"]
