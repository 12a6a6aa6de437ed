"""The report in headless Chromium (Debian's chromium, installed by `make browser`): the page
loads with every plot, and a screenshot is taken."""
import os
import re
import shutil
import subprocess

import pytest

from test_report_cli import PNG_MAGIC, _mesh
from tssb_spark import report

CHROMIUM = os.environ.get("TSSB_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"


def _chromium(*args):
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                           "--hide-scrollbars"] + list(args),
                          capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="no chromium (run `make browser`)")
def test_report_renders_in_headless_chromium(spark, tmp_path):
    src = _mesh().write(str(tmp_path / "logs"))
    path = report.build(src, str(tmp_path / "r"), spark=spark, mode="batch")
    url = "file://" + path
    dom = _chromium("--dump-dom", url).stdout
    imgs = re.findall(r'<img src="([^"]+)"', dom)
    assert len(imgs) >= 4 and "Where are the weak links?" in dom
    for img in imgs:
        with open(os.path.join(os.path.dirname(path), img), "rb") as f:
            assert f.read(8) == PNG_MAGIC
    shot = str(tmp_path / "page.png")
    _chromium("--window-size=1200,3000", "--screenshot=" + shot, url)
    with open(shot, "rb") as f:
        assert f.read(8) == PNG_MAGIC
    assert os.path.getsize(shot) > 50000      # a page with plots, not a blank one
