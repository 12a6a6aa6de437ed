"""The report (HTML + PNG) and the `tssb-spark` command line."""
import datetime
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
    for title in ("Did the mesh converge", "Where are the weak links",
                  "legal airtime budget", "What is being dropped", "Host syncs", "Ingest"):
        assert title in page, title
    assert "<td>unparsable</td><td>1</td>" in page
    for png in ("agreement.png", "replication.png", "delivery.png", "airtime.png"):
        assert ('src="%s"' % png) in page
        with open(os.path.join(out, png), "rb") as f:
            assert f.read(8) == PNG_MAGIC, png
    # delivery a -> b: 3 of 3, with the mean RSSI
    assert "<td>a</td><td>b</td><td>3</td><td>3</td><td>100.0 %</td><td>-100.0</td>" in page
    # both nodes agreed on one feed 0.5 s after the first event
    assert "all 2 nodes that logged a GOSET held the same one (1 feed) from" in page
    assert "500 ms after" in page
    # one sync row, readable units and ISO time
    assert "<td>2025-01-01 00:00:03Z</td><td>setu</td>" in page and "<td>300 B</td>" in page
    assert "No packets were dropped." in page and "e+0" not in page


def test_report_answers_from_region_and_drop_data(tmp_path):
    rows = [{"node": "a", "hour": datetime.datetime(2025, 1, 1), "tx_count": 10,
             "airtime_ms": 18000.0, "duty_cycle": 0.005, "freq_khz": 868100},
            {"node": "b", "hour": datetime.datetime(2025, 1, 1), "tx_count": 2,
             "airtime_ms": 3600.0, "duty_cycle": 0.001, "freq_khz": 915000}]
    air = report.airtime_rows(rows)
    assert [(r["region"], r["limit"]) for r in air] == [("EU868", 0.01), ("US915/AU915", None)]
    assert report.region(None) == ("unknown", None)
    assert report.plot_airtime(air, str(tmp_path / "a.png"))
    assert report.agreement_curve([(0, "a", "s1", 1), (5, "b", "s1", 1), (9, "a", "s2", 2)]) \
        == ([(0, 1, 1), (5, 2, 1), (9, 1, 2)], 2)
    curves = report.share_curves([("f", 1, 2000), ("f", 1, 1000)], 3)
    assert curves[("f", 1)] == [(0.0, 1 / 3), (1.0, 2 / 3), (2.0, 1.0)]
    assert report.secs(1500) == "1.5 s" and report.nbytes(10440) == "10.4 kB"
    assert report.iso(1735689600000) == "2025-01-01 00:00:00Z" and report.count(10440) == "10,440"


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
    assert "Where are the weak links" in open(path, encoding="utf-8").read()


def test_cli_errors_are_one_line(tmp_path, capsys):
    code, out, err = _run(["ingest", "--input", str(tmp_path / "nope"), "--output",
                           str(tmp_path / "lake")], capsys)
    assert code == 2 and "is not a directory" in err and "Traceback" not in err
    code, out, err = _run(["metrics", "--input", str(tmp_path)], capsys)
    assert code == 2 and "not a lake" in err
    code, out, err = _run([], capsys)
    assert code == 2 and "ingest" in out
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out, err = _run(["report", "--input", str(empty), "--output", str(tmp_path / "r")],
                          capsys)
    assert code == 2 and "no event logs under" in err and err.count("\n") == 1


def test_all_bad_input_says_where_the_quarantine_is(spark, tmp_path, capsys):
    src = tmp_path / "logs"
    src.mkdir()
    (src / "x.jsonl").write_text("garbage\n{\"v\": 1}\n")
    out = str(tmp_path / "r")
    code, stdout, err = _run(["report", "--input", str(src), "--output", out], capsys)
    lake = os.path.join(out, "lake")
    assert code == 2 and "none of the 2 lines" in err
    assert os.path.join(lake, "quarantine") in err and "tssb-spark quarantine --lake" in err
    code, stdout, err = _run(["quarantine", "--lake", lake], capsys)
    assert code == 0
    assert "2 quarantined line(s)" in stdout and "unparsable: 1 line(s)" in stdout
    assert "missing_field:event: 1 line(s) in file:" in stdout and "    garbage" in stdout
    code, stdout, err = _run(["quarantine", "--lake", lake, "--reason", "unparsable"], capsys)
    assert "missing_field" not in stdout and "garbage" in stdout


def test_module_help_runs():
    r = subprocess.run([sys.executable, "-m", "tssb_spark", "report", "--help"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "--master" in r.stdout and "--lake" in r.stdout


def test_jvm_options_of_a_caller_join_the_defaults():
    # --quiet's log4j setting (or a user's --conf) must not drop the JIT flag, nor the
    # other way round; other settings are replaced as usual.
    from tssb_spark.session import DEFAULTS, JIT_HUGE, merged_conf
    got = merged_conf(DEFAULTS, {"spark.driver.extraJavaOptions": "-Dx=1",
                                 "spark.ui.enabled": "false"})
    assert got["spark.driver.extraJavaOptions"] == JIT_HUGE + " -Dx=1"
    assert got["spark.executor.extraJavaOptions"] == JIT_HUGE
    assert got["spark.ui.enabled"] == "false"
    assert merged_conf(got, {"spark.driver.extraJavaOptions": "-Dx=1"}) == got
