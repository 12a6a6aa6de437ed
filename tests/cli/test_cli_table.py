"""Every `tssb` command, discovered from the parser, with good input and with the bad
input users met (issue 18): no traceback, the documented exit status (0 ok, 1 failure,
2 usage, 130 interrupted; cert compare 3), errors on one line, the store intact after.

GOOD lists one or more good invocations per command; a command the parser has and GOOD
lacks fails test_every_command_has_cases, so a new command cannot go untested here.
"""
import hashlib
import json
import os
import sqlite3

import pytest

from conftest import Server, tssb
from tinyssb import bipf, crypto, entry
from tssb.cli import build_parser
from tssb.cli.completion import table
from tssb.context import Context, ssb_id

DOCUMENTED = {0, 1, 2, 3, 130}
# Commands that need no data directory: they succeed on a missing one and create none.
HOMELESS = {("completion",), ("sim",), ("flash",), ("deploy",), ("cert", "verify"),
            ("cert", "compare"), ("listen",), ("config", "get"), ("config", "set"),
            ("config", "export"), ("config", "import"), ("info",), ("reboot",),
            ("regions",), ("vboard",)}
# Commands that read the home's files but not its store: a damaged store does not stop them.
FILES_ONLY = {("logs",)}
# Commands whose good case writes to the store.
WRITERS = {("post",), ("peer", "add"), ("dag", "post"), ("counter", "init"), ("dm",),
           ("name",), ("block",), ("mute",), ("receipts",)}
# Commands whose good run is covered elsewhere because it is long: only their bad input
# runs here.
ELSEWHERE = {("demo",): "tests/host/test_demo.py runs the whole demo"}

ANDROID_SEED = bytes(range(1, 33))


def leaves():
    return sorted(tuple(path.split()) for path, cmds, *_ in table(build_parser()) if not cmds)


def _append_app_feed(store):
    """A feed as the tinySSB Android app writes it: IAM name, then a TAV text post."""
    fid = crypto.publickey(ANDROID_SEED)
    store.add_feed(fid)
    author = entry.Author(fid, lambda m: crypto.sign(ANDROID_SEED, m))
    for content in (bipf.encode(["IAM", "Alice"]),
                    bipf.encode(["TAV", [], "hi from the app", None, 1700000000])):
        seq, pkt, mid, chunks = author.next(content)
        store.append(fid, seq, pkt, mid)
        for i, c in enumerate(chunks):
            store.put_chunk(fid, seq, i, c)
    return fid


def db_digest(home):
    """What the store holds (feeds, entries, chunks, identity, peers), as one hash."""
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(home, "tssb.db"), uri=True)
    try:
        h = hashlib.sha256()
        for q in ("SELECT fid, seq, pkt FROM entries ORDER BY fid, seq",
                  "SELECT fid, seq, cnr, chunk FROM chunks ORDER BY fid, seq, cnr",
                  "SELECT name, seed FROM identities ORDER BY name",
                  "SELECT public FROM peers ORDER BY public"):
            for row in db.execute(q):
                h.update(repr(row).encode())
        return h.hexdigest()
    finally:
        db.close()


@pytest.fixture(scope="module")
def world(tmp_path_factory, board):
    t = tmp_path_factory.mktemp("cli")
    a, b = str(t / "a"), str(t / "b")
    assert tssb("id", "--home", a).code == 0
    assert tssb("--home", b, "id").code == 0
    ca, cb = Context.open(a), Context.open(b)
    cb.set_network_key(ca.network_key)
    other = _append_app_feed(ca.store)
    server = Server(cb)
    ca.store.add_peer(cb.identity.public, "b", server.addr)
    w = {"tmp": str(t), "a": a, "b": b, "peer": server.addr, "port": board.port,
         "self_ssb": ssb_id(ca.identity.public), "other": other.hex()[:12],
         "b_key": cb.identity.public.hex(), "board": board}
    ca.close()
    img = t / "fw.bin"
    img.write_bytes(b"\xe9" + bytes(11) + b"\x09\x00" + bytes(1010))   # ESP32-S3 header
    w["image"] = str(img)
    (t / "tiny.toml").write_text(
        'name = "tiny"\nduration_s = 120\n[topology]\nkind = "line"\nnodes = 2\n'
        'spacing_m = 100\n[authors]\nnodes = [0]\n[posts]\nper_author = 1\nsizes = [20]\n')
    w["scenario"] = str(t / "tiny.toml")
    (t / "post.txt").write_bytes(b"from a file\n")
    w["post_file"] = str(t / "post.txt")
    assert tssb("post", "--home", a, "hello mesh").code == 0
    root = tssb("dag", "post", "--home", a, "the root").out.split()[0]
    w["root"] = root
    w["counter"] = tssb("counter", "--home", a, "init", "--delay-ms", "40", "--links", "2",
                        "--ratio", "1").out.split()[0]
    yield w
    server.close()


# (command path) -> good invocations; {name} is filled from the world; --home A is added
GOOD = {
    ("block",): ["block {b_key}", "block --list --json", "block --remove {b_key} --json"],
    ("bridge",): ["bridge --port {port} --duration 0.5"],
    ("cert", "make"): ["cert make self 1 -o {tmp}/c1.tssbcert --json",
                       "cert make {self_ssb} 1 -o {tmp}/c2.tssbcert"],
    ("cert", "verify"): ["cert verify {tmp}/c1.tssbcert --json"],
    ("cert", "compare"): ["cert compare {tmp}/c1.tssbcert {tmp}/c2.tssbcert"],
    ("cert", "status"): ["cert status", "cert status self --json"],
    ("clock", "status"): ["clock status"],
    ("clock", "sync"): ["clock sync --peer {peer} --json"],
    ("completion",): ["completion bash", "completion zsh"],
    ("config", "get"): ["config get --port {port}", "config get plan --port {port} --json"],
    ("config", "set"): ["config set name garden2 --port {port}",
                        "config set power 10 --port {port} --json"],
    ("config", "export"): ["config export {tmp}/board.json --port {port} --force",
                           "config export - --port {port} --json"],
    ("config", "import"): ["config import {tmp}/board.json --port {port}",
                           "config import {tmp}/board.json --port {port} --json"],
    ("counter", "init"): ["counter init --delay-ms 40 --links 2"],
    ("counter", "join"): ["counter join {counter}"],
    ("counter", "show"): ["counter show {counter}", "counter show {counter} --json"],
    ("counter", "increment"): ["counter increment {counter} --wait"],
    ("dag", "post"): ["dag post --root {root} reply", "dag post --json another"],
    ("dag", "show"): ["dag show {root}", "dag show list --json", "dag show {root} --json"],
    ("dag", "sync"): ["dag sync --peer {peer} --root {root} --json"],
    ("deploy",): ["deploy --board heltec-v3 --plan EU868.a --dry-run"],
    ("dm",): ["dm {b_key} hello", "dm {b_key} Alice self --json"],
    ("feeds",): ["feeds", "feeds --json"],
    ("flash",): ["flash --board heltec-v3 --image {image} --dry-run"],
    ("id",): ["id", "id --json"],
    ("info",): ["info --port {port}", "info --port {port} --json"],
    ("listen",): ["listen --port {port} --duration 0.5"],
    ("logs",): ["logs -n 5", "logs --event append -n 0"],
    ("mute",): ["mute {b_key}", "mute --list --json", "mute --remove {b_key}", "mute Alice"],
    ("name",): ["name Garden", "name --json"],
    ("peer", "add"): ["peer add {self_ssb} --name me --addr 127.0.0.1:9"],
    ("peer", "list"): ["peer list", "peer list --json"],
    ("peer", "remove"): ["peer remove {self_ssb}"],
    ("post",): ["post hello", "post --file {post_file} --json"],
    ("read",): ["read self", "read {other} --json", "read Alice", "read",
                "read --chat {b_key} --json", "read --chat public"],
    ("reboot",): ["reboot --port {port}", "reboot --repl --port {port} --json"],
    ("receipts",): ["receipts --read on", "receipts --json"],
    ("regions",): ["regions", "regions EU868.a --json"],
    ("serve",): ["serve --port 0 --duration 0.3"],
    ("sim",): ["sim {scenario} --quiet --json"],
    ("status",): ["status --json", "status --board --port {port} --json"],
    ("store", "backup"): ["store backup {tmp}/backup.db"],
    ("store", "check"): ["store check", "store check --json"],
    ("store", "restore"): ["store restore {tmp}/backup.db --home {tmp}/restored"],
    ("sync",): ["sync --peer {peer} --json"],
    ("vboard",): ["vboard --board heltec-v3 --plan EU868.a --duration 0.5"],
    ("web",): ["web --port 0 --duration 0.5", "web --serial {port} --port 0 --duration 1"],
}


def _argv(text, w, home=None):
    argv = [a.format(**w) for a in text.split()]
    if home is not None and "--home" not in argv:
        argv += ["--home", home]
    return argv


def one_line_error(r):
    """The failure was said on one line, without a traceback."""
    assert "Traceback" not in r.out + r.err, r
    lines = [l for l in r.err.splitlines() if l.strip()]
    if r.code == 2 and lines and lines[0].startswith("usage:"):
        return     # argparse's usage error: the usage, then one error line
    errs = [l for l in lines if l.startswith("tssb: ")]
    assert len(errs) == 1, r


def test_every_command_has_cases():
    missing = [c for c in leaves() if c not in GOOD and c not in ELSEWHERE]
    assert not missing, "commands without a case in the CLI table: %s" % missing
    assert not [c for c in GOOD if c not in leaves()], "cases of commands that do not exist"


def test_global_options_at_every_level():
    """One convention: --home, --init, -v and --log-level on every (sub-)parser."""
    def walk(parser):
        yield parser
        for a in parser._actions:
            if isinstance(a.choices, dict):     # a sub-parsers action
                for sub in a.choices.values():
                    yield from walk(sub)
    for p in walk(build_parser()):
        opts = p._option_string_actions
        assert {"--home", "--init", "-v", "--log-level"} <= set(opts), p.prog


def test_good_input(world):
    for cmd in GOOD:                   # in the table's order: makers before users
        for i, text in enumerate(GOOD[cmd]):
            argv = _argv(text, world)
            # global options before the action for every other case, after it otherwise
            argv = (["--home", world["a"]] + argv) if i % 2 else argv + ["--home", world["a"]]
            if "--home" in text:
                argv = _argv(text, world)
            r = tssb(*argv)
            assert r.code == 0, (argv, r)
            assert "Traceback" not in r.err, r
            if "--json" in argv:              # the result, and nothing else, on stdout
                try:
                    json.loads(r.out)         # one object (sim: indented)
                except ValueError:
                    for line in r.out.splitlines():
                        json.loads(line)      # or one object per line
    r = tssb("store", "check", "--home", world["a"])
    assert r.code == 0 and r.out.strip().endswith("ok"), r


@pytest.mark.parametrize("kind", ["missing", "truncated", "scribbled", "read-only",
                                  "unopenable"])
def test_bad_homes(world, tmp_path, kind, monkeypatch):
    """Every command on a home that is missing, damaged, read-only or cannot be opened."""
    home = str(tmp_path / "h")
    db = os.path.join(home, "tssb.db")
    if kind == "unopenable":
        home = "/proc/1"          # exists, but no store can be made there
    elif kind != "missing":
        assert tssb("id", "--home", home).code == 0
        assert tssb("post", "--home", home, "kept").code == 0
        before = db_digest(home)
        raw = open(db, "rb").read()
        if kind == "truncated":
            open(db, "wb").write(raw[:len(raw) // 3])
        elif kind == "scribbled":
            open(db, "wb").write(raw[:100] + os.urandom(4000) + raw[4100:])
        else:
            # what SQLite reports for a store it may not write (root ignores file modes)
            real = sqlite3.connect
            monkeypatch.setattr(sqlite3, "connect", lambda path, *a, **k: real(
                "file:%s?mode=ro" % path, *a, uri=True, **k) if str(path).endswith(
                    "tssb.db") else real(path, *a, **k))
        damaged = open(db, "rb").read()
    for cmd in leaves():
        cases = GOOD.get(cmd) or []     # demo (ELSEWHERE) uses no home: bad --out below
        if not cases or (cmd in HOMELESS and kind != "missing") or cmd == ("store", "restore"):
            continue
        if kind == "missing" and cmd == ("id",):
            continue        # the one command that creates a home: last, below
        argv = _argv(cases[0], world)
        argv = [home if a == world["a"] else a for a in argv] + ["--home", home]
        r = tssb(*argv)
        assert r.code in DOCUMENTED, (argv, r)
        assert "Traceback" not in r.out + r.err, (argv, r)
        if kind == "missing":
            if cmd in HOMELESS:
                assert r.code == 0, (argv, r)
            else:
                assert r.code == 1 and "no tssb home" in r.err and "tssb id" in r.err, (argv, r)
                assert not os.path.exists(home), argv       # nothing created by mistake
                continue
        if r.code:
            one_line_error(r)
        if kind in ("truncated", "scribbled") and cmd not in FILES_ONLY:
            assert r.code == 1 and ("damaged" in r.err or "cannot be read" in r.err), (argv, r)
            assert open(db, "rb").read() == damaged, argv       # nothing written
        if kind == "read-only" and cmd in WRITERS:
            assert r.code == 1 and "read-only" in r.err, (argv, r)
        if kind == "unopenable" and cmd != ("id",):
            assert r.code == 1 and "no tssb home" in r.err, (argv, r)
    if kind == "missing":
        assert tssb("feeds", "--home", home).code == 1 and not os.path.exists(home)
        assert tssb("id", "--home", home).code == 0 and os.path.exists(db)
        assert tssb("feeds", "--home", home).code == 0
    if kind == "read-only":
        monkeypatch.undo()
        assert db_digest(home) == before
        assert tssb("store", "check", "--home", home).code == 0
    if kind == "unopenable":
        r = tssb("id", "--home", home)
        assert r.code == 1 and "cannot open the store" in r.err, r


def test_bad_files_ports_ids_and_scenarios(world, tmp_path):
    a = world["a"]
    before = db_digest(a)
    bad = [
        # (argv, exit status, words the one line must hold)
        (["sim", "small", "--logs", world["post_file"]], 2, "wants a directory"),
        (["sim", "nosuch"], 2, "bundled: demo, mule, random50, small"),
        (["sim", str(tmp_path / "empty.toml")], 2, "empty scenario"),
        (["demo", "--out", "/proc/1/demo"], 1, "/proc/1/demo"),
        (["cert", "make", "self", "1", "-o", "/proc/1/x.tssbcert"], 1, "/proc/1/x.tssbcert"),
        (["cert", "make", "@notakey.ed25519", "1"], 1, "match"),
        (["cert", "verify", str(tmp_path / "none.tssbcert")], 2, "cannot read"),
        (["status", "--board", "--port", "/dev/ttyUSB9"], 1, "cannot open serial port"),
        (["listen", "--port", "/dev/ttyUSB9"], 1, "cannot open serial port"),
        (["bridge", "--port", "/dev/ttyUSB9"], 1, "cannot open serial port"),
        (["config", "get", "--port", "/dev/ttyUSB9"], 1, "cannot open serial port"),
        (["config", "set", "power", "99"], 2, "-9..22"),
        (["config", "set", "plan", "Mars"], 2, "unknown region plan"),
        (["config", "set", "nosuchkey", "1"], 2, "invalid choice"),
        (["config", "import", str(tmp_path / "nofile")], 1, "cannot read"),
        (["config", "import", world["post_file"]], 2, "not a board config export"),
        (["config", "export", world["post_file"], "--port", world["port"]], 1, "exists"),
        (["info", "--port", "/dev/ttyUSB9"], 1, "cannot open serial port"),
        (["info"], 1, "no `tssb bridge` runs in"),
        (["reboot", "--repl", "--wait", "--port", world["port"]], 2, "--wait"),
        (["regions", "Mars"], 2, "unknown region plan"),
        (["vboard", "--board", "nosuch"], 2, "unknown board"),
        (["vboard", "--board", "heltec-v3", "--power", "99"], 2, "-9..22"),
        (["deploy", "--board", "heltec-v3", "--dry-run"], 2, "--plan"),
        (["peer", "add", "nokey"], 2, "not a public key"),
        (["read", "nobody"], 1, "match"),
        (["post", "--file", str(tmp_path / "nofile")], 1, "cannot read"),
        (["post"], 2, "nothing to post"),
        (["sync", "--peer", "nohostport"], 2, "HOST:PORT"),
        (["sync", "--peer", "127.0.0.1:1"], 1, "tssb peer add"),
        (["dag", "sync", "--peer", "127.0.0.1:1", "--root", world["root"]], 1, "tssb peer add"),
        (["store", "backup", world["post_file"]], 1, "exists"),
        (["store", "restore", world["post_file"]], 1, "not a tssb store"),
        (["id", "--import", world["post_file"]], 1, "not a tssb identity export"),
        (["logs", "--lines", "-1"], 2, "--lines"),
    ]
    (tmp_path / "empty.toml").write_text("")
    for argv, code, words in bad:
        r = tssb(*argv, "--home", a)
        assert r.code == code, (argv, r)
        one_line_error(r)
        assert words in r.err, (argv, r)
    r = tssb("post", "x" * 100000, "--home", a)
    assert r.code == 1 and "refused" in r.err and "206.2 s" in r.err, r
    assert "5.7 h of its 1 % duty cycle" in r.err, r       # the EU868 figures
    assert db_digest(a) == before
    r = tssb("post", "-", "--home", a, "--json", stdin=b"from stdin\n")
    assert r.code == 0 and json.loads(r.out)["format"] == "TAV", r
    r = tssb("read", "self", "--home", a, "-n", "1")
    assert r.out.rstrip().endswith(": from stdin"), r
