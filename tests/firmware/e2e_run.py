"""Runs an end-to-end firmware script (e2e_*.py) under an interpreter and reads its result."""
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(exe, script, workdir, timeout=120):
    """(exit code, the script's `E2E {json}` line as a dict); fails when it printed none."""
    r = subprocess.run([exe, "tests/firmware/" + script, str(workdir)], cwd=ROOT,
                       capture_output=True, text=True, timeout=timeout)
    line = [l for l in r.stdout.splitlines() if l.startswith("E2E ")]
    assert line, r.stdout + r.stderr
    return r.returncode, json.loads(line[0][4:])
