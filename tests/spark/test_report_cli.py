"""The report (HTML + PNG) and the `tssb-spark` command line."""
import json
import os
import subprocess
import sys

import pytest

from scenario import Scenario, hexid
from tssb_spark import cli, report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _mesh():
    sc = Scenario()
    for i, at in enumerate((0, 1000, 2000)):
        pkt = ("%x" % (i + 1)) * 16
        sc.emit("a", at, "tx", kind="entry", length=120, airtime_ms=80.0, pkt=pkt)
        sc.emit("b", at + 90, "rx", kind="entry", length=120, pkt=pkt, rssi=-100.0)
    sc.emit("a", 0, "goset", count=1, state=hexid("1"))
    sc.emit("b", 500, "goset", count=1, state=hexid("1"))
    sc.emit("a", 0, "append", feed=hexid("f"), seq=1, own=True, origin_ts=sc.now)
    sc.emit("b", 2500, "append", feed=hexid("f"), seq=1)
    sc.emit("h", 3000, "sync_done", proto="setu", peer=hexid("e"), ok=True, rounds=2,
            bytes_sent=100, bytes_recv=300, duration_ms=20.0)
    return sc


def _run(argv, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    out, err = capsys.readouterr()
    return e.value.code, out, err


def test_report_writes_page_and_plots(spark, tmp_path, capsys):
    src = _mesh().write(str(tmp_path / "logs"), extra={"junk.jsonl": ["{broken"]})
    out = str(tmp_path / "report")
    code, stdout, err = _run(["report", "--input", src, "--output", out, "--mode", "batch"],
                             capsys)
    assert code == 0
    path = json.loads(stdout)["report"]
    assert path == os.path.join(out, "index.html")
    assert os.path.isdir(os.path.join(out, "lake", "events"))
    assert "ingest" in err                      # progress on stderr
    page = open(path, encoding="utf-8").read()
    for title in ("Airtime and duty cycle", "Delivery ratio per link", "GOSET convergence",
                  "Host sessions", "Replication latency", "Quarantine"):
        assert title in page, title
    assert "<td>unparsable</td><td>1</td>" in page
    for png in ("airtime.png", "delivery.png", "convergence.png", "sessions.png",
                "latency.png"):
        assert ('src="%s"' % png) in page
        with open(os.path.join(out, png), "rb") as f:
            assert f.read(8) == PNG_MAGIC, png
    # delivery a -> b: 3 of 3
    assert "<td>a</td><td>b</td><td>3</td><td>3</td><td>1</td>" in page


def test_cli_ingest_then_metrics(spark, tmp_path, capsys):
    src = _mesh().write(str(tmp_path / "logs"))
    lake = str(tmp_path / "lake")
    code, out, err = _run(["ingest", "--input", src, "--output", lake, "--mode", "batch"],
                          capsys)
    assert code == 0
    assert json.loads(out)["accepted"] == len(_mesh().all_lines())
    code, out, err = _run(["metrics", "--input", lake], capsys)
    assert code == 0 and json.loads(out)["delivery"] == 1
    assert os.path.isdir(os.path.join(lake, "metrics", "goset_convergence"))
    # report.render() on the existing lake, as the demo may call it
    path = report.render(spark, lake, str(tmp_path / "r"))
    assert "Delivery ratio per link" in open(path, encoding="utf-8").read()


def test_cli_errors_are_one_line(tmp_path, capsys):
    code, out, err = _run(["ingest", "--input", str(tmp_path / "nope"), "--output",
                           str(tmp_path / "lake")], capsys)
    assert code == 2 and "is not a directory" in err and "Traceback" not in err
    code, out, err = _run(["metrics", "--input", str(tmp_path)], capsys)
    assert code == 2 and "not a lake" in err
    code, out, err = _run([], capsys)
    assert code == 2 and "ingest" in out


def test_module_help_runs():
    r = subprocess.run([sys.executable, "-m", "tssb_spark", "report", "--help"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "--master" in r.stdout and "--lake" in r.stdout
