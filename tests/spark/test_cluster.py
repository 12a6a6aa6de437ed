"""The same job on a real Spark standalone cluster: a master and a worker started from the
installed PySpark on 127.0.0.1, `tssb-spark ingest` and `report` through spark-submit,
and the lake they write equal to the local[2] result. The cluster is stopped (its whole
process groups, executors included) whatever happens."""
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from scenario import Scenario, hexid
from tssb_spark import ingest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLI = os.path.join(ROOT, "spark", "tssb_spark", "cli.py")
START_TIMEOUT_S = 90     # a cold JVM on a loaded 2-core machine
SUBMIT_TIMEOUT_S = 240


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port, proc, log):
    end = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise AssertionError("exited early:\n" + open(log).read()[-3000:])
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.3)
    raise AssertionError("no listener on %d:\n%s" % (port, open(log).read()[-3000:]))


def _wait_log(proc, log, text):
    end = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < end:
        if proc.poll() is not None:
            break
        if text in open(log).read():
            return
        time.sleep(0.3)
    raise AssertionError("no %r:\n%s" % (text, open(log).read()[-3000:]))


def _stop(proc):
    if proc is None or proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            pass


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    import pyspark
    home = os.path.dirname(pyspark.__file__)
    work = tmp_path_factory.mktemp("cluster")
    env = dict(os.environ, SPARK_HOME=home, SPARK_LOCAL_IP="127.0.0.1",
               PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               SPARK_NO_DAEMONIZE="1")
    cls = os.path.join(home, "bin", "spark-class")
    port, ui = _free_port(), _free_port()
    procs = []

    def start(name, args):
        log = str(work / (name + ".log"))
        p = subprocess.Popen([cls] + args, env=env, cwd=str(work), stdin=subprocess.DEVNULL,
                             stdout=open(log, "w"), stderr=subprocess.STDOUT,
                             start_new_session=True)   # its own group: stopped whole
        procs.append(p)
        return p, log

    try:
        m, mlog = start("master", ["org.apache.spark.deploy.master.Master", "--host",
                                   "127.0.0.1", "--port", str(port), "--webui-port", str(ui)])
        _wait_port(port, m, mlog)
        url = "spark://127.0.0.1:%d" % port
        w, wlog = start("worker", ["org.apache.spark.deploy.worker.Worker", url, "--host",
                                   "127.0.0.1", "--cores", "2", "--memory", "1g",
                                   "--webui-port", str(_free_port()),
                                   "--work-dir", str(work / "work")])
        _wait_log(w, wlog, "Successfully registered with master")
        yield url, env
    finally:
        for p in reversed(procs):
            _stop(p)
    assert all(p.poll() is not None for p in procs)


def _submit(env, url, *args):
    cmd = [os.path.join(env["SPARK_HOME"], "bin", "spark-submit"), "--master", url,
           "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
           "--conf", "spark.ui.enabled=false", "--conf", "spark.executor.memory=512m",
           "--conf", "spark.sql.shuffle.partitions=2", CLI] + list(args) + ["--quiet"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=SUBMIT_TIMEOUT_S,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


def _logs(directory):
    sc = Scenario()
    for i in range(6):
        pkt = ("%x" % (i + 1)) * 16
        sc.emit("a", i * 1000, "tx", kind="entry", length=120, airtime_ms=80.0, pkt=pkt)
        sc.emit("b", i * 1000 + 90, "rx", kind="entry", length=120, pkt=pkt, rssi=-100.0)
    sc.emit("a", 0, "goset", count=1, state=hexid("1"))
    sc.emit("b", 500, "goset", count=1, state=hexid("1"))
    sc.emit("b", 86400000, "want", n=1)              # a second date partition
    return sc.write(directory, extra={"bad.jsonl": ["{broken", '{"v": 1}']})


def _rows(df):
    return sorted(repr(sorted(r.asDict().items())) for r in df.collect())


def test_standalone_cluster_gives_the_local_result(spark, cluster, tmp_path):
    url, env = cluster
    src = _logs(str(tmp_path / "logs"))
    lake = str(tmp_path / "lake-cluster")
    r = _submit(env, url, "ingest", "--input", src, "--output", lake, "--mode", "batch")
    assert '"accepted": 15' in r.stdout and '"quarantined": 2' in r.stdout
    local = str(tmp_path / "lake-local")
    ingest.ingest(spark, src, local, mode="batch")
    ev_c, ev_l = ingest.read_events(spark, lake), ingest.read_events(spark, local)
    assert ev_c.count() == 15
    assert _rows(ev_c) == _rows(ev_l)
    drop = ["ingested_at"]
    assert _rows(ingest.read_quarantine(spark, lake).drop(*drop)) == \
        _rows(ingest.read_quarantine(spark, local).drop(*drop))
    # The report on the cluster, over the same lake: its ingest adds nothing.
    out = str(tmp_path / "report")
    _submit(env, url, "report", "--input", src, "--output", out, "--lake", lake, "--mode",
            "batch")
    page = open(os.path.join(out, "index.html"), encoding="utf-8").read()
    assert "<td>a</td><td>b</td><td>6</td><td>6</td>" in page
    assert ingest.read_events(spark, lake).count() == 15
