"""A scenario file is outside input (issue 34 item 6): nesting, size and values that TOML
allows but a scenario cannot use are one refusal line, never an internal error."""
import pytest

from tssb.cli import main as cli_main
from tssb.sim import ScenarioError, scenario

GOOD = '[topology]\nkind = "line"\nnodes = 2\n'


@pytest.mark.parametrize("text, words", [
    ("x = " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper than"),        # was RecursionError
    (GOOD + "[radio]\nloss = " + "{ a = " * 40 + "1" + " }" * 40 + "\n", "nested deeper than"),
    (GOOD + "[radio]\nd0_m = nan\n", "number out of range: nan"),   # NaN passed "d0_m <= 0"
    (GOOD + "[radio]\ntx_power_dbm = inf\n", "number out of range: inf"),
    (GOOD + "seed = 1" + "0" * 5000 + "\n", "Exceeds the limit"),     # was ValueError
    (b"name = \"\xff\"\n", "not UTF-8"),
    ("# " + "x" * ((1 << 20) + 10) + "\n", "too large"),          # 1 MiB at most
])
def test_abuse_is_one_refusal(tmp_path, capsys, text, words):
    path = tmp_path / "s.toml"
    (path.write_bytes if isinstance(text, bytes) else path.write_text)(text)
    with pytest.raises(ScenarioError) as e:
        scenario.load(str(path))
    assert words in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(SystemExit) as e:
        cli_main(["sim", str(path), "--quiet"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and words in err
    assert "Traceback" not in err and "internal error" not in err


def test_a_nested_but_valid_scenario_still_loads(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(GOOD + '[mobility]\nmodel = "random_waypoint"\narea = [0, 0, 500, 500]\n')
    assert scenario.load(str(path))["mobility"]["area"] == (0.0, 0.0, 500.0, 500.0)
