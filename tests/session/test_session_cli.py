"""`tssb id`, `tssb peer add/list/remove` and `tssb serve --help` through the real CLI."""
import json

import pytest

from tssb.cli import main
from tssb.context import SSB_MAIN_NETWORK_KEY, Context, ssb_id


def tssb(capsys, *argv):
    with pytest.raises(SystemExit) as e:
        main(["--init"] + list(argv))
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def test_id_creates_once_and_sets_network(tmp_path, capsys):
    home = str(tmp_path / "h")
    code, out, _ = tssb(capsys, "id", "--home", home, "--json")
    first = json.loads(out)
    assert code == 0 and first["network"] == "custom" and len(first["public"]) == 64
    code, out, _ = tssb(capsys, "id", "--home", home, "--json")
    assert json.loads(out)["public"] == first["public"]          # stable identity
    code, out, _ = tssb(capsys, "id", "--home", home, "--network", "ssb-main", "--json",
                        "--show-network-key")
    assert json.loads(out)["network_key"] == SSB_MAIN_NETWORK_KEY.hex()
    key = "ab" * 32
    tssb(capsys, "id", "--home", home, "--network", key)
    ctx = Context.open(home)
    assert ctx.network_key == bytes.fromhex(key)
    ctx.close()
    code, _, err = tssb(capsys, "id", "--home", home, "--network", "short")
    assert code == 2 and "64 hex digits" in err


def test_peer_add_list_remove(tmp_path, capsys, monkeypatch):
    home = str(tmp_path / "h")
    monkeypatch.setenv("TSSB_HOME", home)                        # default --home
    k1, k2 = bytes(range(32)), bytes(range(1, 33))
    assert tssb(capsys, "peer", "add", k1.hex(), "--name", "one", "--addr", "10.1.2.3:8008")[0] == 0
    code, out, _ = tssb(capsys, "peer", "add", ssb_id(k2))
    assert code == 0 and out.startswith("added")
    code, out, _ = tssb(capsys, "peer", "add", k2.hex(), "--name", "two")
    assert out.startswith("updated")
    code, out, _ = tssb(capsys, "peer", "list", "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["public"], r["name"], r["addr"]) for r in rows] == \
        [(k1.hex(), "one", "10.1.2.3:8008"), (k2.hex(), "two", "")]
    assert tssb(capsys, "peer", "remove", k1.hex())[0] == 0
    code, _, err = tssb(capsys, "peer", "remove", k1.hex())
    assert code == 1 and "no such peer" in err
    code, _, err = tssb(capsys, "peer", "add", "zz")
    assert code == 2 and "not a public key" in err
    code, _, err = tssb(capsys, "peer", "add", k1.hex(), "--addr", "nohostport")
    assert code == 2 and "HOST:PORT" in err
    ctx = Context.open(home)
    assert [p["public"] for p in ctx.store.peers()] == [k2]
    ctx.close()


def test_serve_help_explains(capsys):
    code, out, _ = tssb(capsys, "serve", "--help")
    assert code == 0 and "--open" in out and "--port" in out and "--home" in out
