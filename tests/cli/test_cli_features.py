"""What issue 18 added, each on its own: Ctrl-C (real processes), refused handshakes,
store check/repair/backup/restore, identity export/import, reading posts, long posts,
board config over the link, completion, logging."""
import asyncio
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time

import pytest

from conftest import Server, spawn, tssb, wait_stderr
from tinyssb import bipf, crypto, entry
from tssb import cli
from tssb.context import EVENT_FILE, Context

STOP_S = 5.0         # a command must be gone this soon after Ctrl-C (it takes < 1 s)
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (INFO|WARNING) +tssb\.\w+: ")


def _interrupt(p):
    """Ctrl-C: SIGINT, then (exit status, stdout, rest of stderr, seconds to stop)."""
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    try:
        p.wait(timeout=STOP_S)
    except subprocess.TimeoutExpired:
        p.kill()
        raise AssertionError("still running %g s after Ctrl-C" % STOP_S)
    took = time.monotonic() - t0
    # read(), not communicate(): wait_stderr's readline may hold lines in the buffer
    return p.returncode, p.stdout.read().decode(), p.stderr.read().decode(), took


@pytest.fixture
def home(tmp_path):
    h = str(tmp_path / "h")
    assert tssb("id", "--home", h).code == 0
    for text in ("one", "two " * 80, "three"):
        assert tssb("post", "--home", h, text).code == 0
    return h


# -- Ctrl-C ---------------------------------------------------------------------------------

def test_sigint_mid_sync_stops_at_once_and_keeps_the_store(home, tmp_path):
    """A peer that accepts and never answers: the sync waits in the handshake; Ctrl-C."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    addr = "127.0.0.1:%d" % srv.getsockname()[1]
    c = Context.open(home)
    c.store.add_peer(bytes(range(32)), "silent", addr)
    c.close()
    try:
        p = spawn("sync", "--peer", addr, "--home", home)
        wait_stderr(p, "connecting to")
        conn, _ = srv.accept()
        code, out, err, took = _interrupt(p)
        conn.close()
    finally:
        srv.close()
    assert code == 130 and err.strip() == "tssb: interrupted", (code, out, err)
    assert "Traceback" not in err
    r = tssb("store", "check", "--home", home)
    assert r.code == 0 and r.out.strip().endswith("ok"), r
    assert tssb("feeds", "--home", home).code == 0          # the next command works
    events = [json.loads(l) for l in open(os.path.join(home, EVENT_FILE))]
    done = [e for e in events if e["event"] == "sync_done"]
    assert done and done[-1]["reason"] == "interrupted" and not done[-1]["ok"]


def test_sigint_mid_sim(tmp_path):
    p = spawn("sim", "random50", "--logs", tmp_path / "logs")
    wait_stderr(p, "s virtual")            # the first progress line: mid-run
    code, out, err, _ = _interrupt(p)
    assert code == 130 and err.strip().endswith("tssb: interrupted"), (code, err)
    assert "Traceback" not in err


def test_sigint_stops_serve_with_timestamped_logs(home):
    p = spawn("serve", "--port", 0, "--home", home)
    lines = wait_stderr(p, "serving")
    code, _, err, _ = _interrupt(p)
    lines += err.splitlines()
    assert code == 0 and "stopped" in lines[-1], (code, lines)
    assert all(LOG_LINE.match(l) for l in lines if l.strip()), lines
    assert any("no allowed peers yet" in l for l in lines)


def test_run_async_stops_work_that_swallows_a_cancellation():
    """CPython 3.11's asyncio.wait_for can lose a cancellation that races with its result
    (the first Ctrl-C of `tssb sync` used to be ignored): run_async cancels until done."""
    swallowed = []

    async def stubborn():
        loop = asyncio.get_running_loop()
        loop.call_later(0.05, signal.raise_signal, signal.SIGINT)
        for _ in range(200):                 # 10 s if nothing stopped it
            try:
                await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                swallowed.append(1)          # as a lost cancellation would: go on
                if len(swallowed) > 3:
                    raise
        return "finished"
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        cli.run_async(stubborn())
    assert swallowed and time.monotonic() - t0 < STOP_S
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def _py4j_after_ctrl_c(*args):
    """A Spark step as py4j fails once the JVM got the same SIGINT."""
    try:
        signal.raise_signal(signal.SIGINT)
    except KeyboardInterrupt:
        pass
    raise RuntimeError("py4j.protocol.Py4JNetworkError: Answer from Java side is empty")


def test_ctrl_c_in_a_spark_step_of_tssb_is_one_line(home, monkeypatch):
    """`tssb demo` runs Spark in-process: after Ctrl-C py4j fails with its own errors."""
    from tssb.cli import feeds
    monkeypatch.setattr(feeds, "feed_rows", _py4j_after_ctrl_c)
    r = tssb("feeds", "--home", home)
    assert r.code == 130 and r.err == "tssb: interrupted\n", r
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_spark_ctrl_c_is_one_line(monkeypatch, capsys):
    import argparse
    from tssb_spark import cli as spark_cli

    def fake_parser():
        p = argparse.ArgumentParser()
        p.set_defaults(func=_py4j_after_ctrl_c)
        return p
    monkeypatch.setattr(spark_cli, "build_parser", fake_parser)
    old = signal.getsignal(signal.SIGINT)
    try:
        with pytest.raises(SystemExit) as e:
            spark_cli.main([])
    finally:
        signal.signal(signal.SIGINT, old)
    assert e.value.code == 130 and capsys.readouterr().err == "tssb-spark: interrupted\n"


# -- refused handshakes -----------------------------------------------------------------------

class Records(logging.Handler):
    def __init__(self):
        logging.Handler.__init__(self, logging.INFO)
        self.records = []

    def emit(self, record):
        self.records.append(record)


def test_refused_handshakes_are_logged_and_explained(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    tssb("id", "--home", a)
    tssb("id", "--home", b)
    ca, cb = Context.open(a), Context.open(b)
    server = Server(cb, open_mode=False)          # allows nobody yet
    ca.store.add_peer(cb.identity.public, "b", server.addr)
    ca.close()
    caught = Records()
    logging.getLogger("tssb.session").addHandler(caught)   # the server's logger
    try:
        if True:
            r = tssb("sync", "--peer", server.addr, "--home", a)     # other network key
            assert r.code == 1 and "another network key" in r.err, r
            cb.set_network_key(Context.open(a).network_key)
            server.close()
            server = Server(cb, open_mode=False)
            c = Context.open(a)
            c.store.add_peer(cb.identity.public, "b", server.addr)
            c.close()
            r = tssb("sync", "--peer", server.addr, "--home", a)     # not on the allow-list
            assert r.code == 1 and "refused our key" in r.err and "tssb peer add" in r.err, r
            cb.store.add_peer(Context.open(a).identity.public, "a")
            r = tssb("sync", "--peer", server.addr, "--home", a, "--json")
            assert r.code == 0 and json.loads(r.out)["ok"], r
    finally:
        server.close()
        logging.getLogger("tssb.session").removeHandler(caught)
    refused = [rec.getMessage() for rec in caught.records if "refused" in rec.getMessage()]
    assert all(rec.levelno == logging.WARNING for rec in caught.records
               if "refused" in rec.getMessage())
    assert len(refused) == 2, refused
    assert "127.0.0.1" in refused[0] and "network key" in refused[0]
    assert "127.0.0.1" in refused[1] and "not in `tssb peer list`" in refused[1]


# -- the store -------------------------------------------------------------------------------

def test_store_check_finds_and_repairs_damage(home, tmp_path):
    c = Context.open(home)
    fid = c.identity.public
    db = c.store.db
    good = db.execute("SELECT pkt FROM entries WHERE fid=? AND seq=3", (fid,)).fetchone()[0]
    bad = bytearray(good)
    bad[100] ^= 1                                                  # a signature bit
    db.execute("UPDATE entries SET pkt=? WHERE fid=? AND seq=3", (bytes(bad), fid))
    chunk = db.execute("SELECT chunk FROM chunks WHERE fid=? AND seq=2 AND cnr=1",
                       (fid,)).fetchone()[0]
    db.execute("UPDATE chunks SET chunk=? WHERE fid=? AND seq=2 AND cnr=1",
               (bytes(120), fid))                                  # a chunk scribbled
    db.execute("INSERT INTO chunks VALUES (?, 9, 0, ?)", (fid, chunk))   # an orphan
    c.close()
    r = tssb("store", "check", "--home", home, "--json")
    rep = json.loads(r.out)
    assert r.code == 1 and not rep["ok"]
    kinds = sorted((p["kind"], p["seq"]) for p in rep["problems"])
    assert kinds == [("chunk", 2), ("entry", 3), ("orphan", 9)], kinds
    r = tssb("store", "check", "--home", home, "--repair")
    assert r.code == 0 and "repaired: deleted 1 entries" in r.out, r
    saved = [f for f in os.listdir(home) if f.startswith("tssb.db.before-repair")]
    assert len(saved) == 1
    r = tssb("store", "check", "--home", home)
    assert r.code == 0 and "1 side chains still incomplete" in r.out, r   # refetchable
    assert tssb("post", "--home", home, "after repair").code == 0


def test_backup_restore_and_identity_export_import(home, tmp_path):
    bk, ex = tmp_path / "bk.db", tmp_path / "id.json"
    assert tssb("store", "backup", bk, "--home", home).code == 0
    assert oct(os.stat(bk).st_mode & 0o777) == "0o600"
    assert tssb("post", "--home", home, "after the backup").code == 0
    r = tssb("store", "restore", bk, "--home", home)
    assert r.code == 0 and "replaced store is kept" in r.out, r
    assert json.loads(tssb("feeds", "--json", "--home", home).out)["entries"] == 3
    kept = [f for f in os.listdir(home) if ".replaced-" in f and not f.endswith("-wal")]
    old = Context.open(home)
    old.close()
    assert len(kept) == 1
    r = tssb("id", "--home", home, "--export", ex, "--json")
    me = json.loads(r.out)
    assert oct(os.stat(ex).st_mode & 0o777) == "0o600"
    new = str(tmp_path / "moved")
    r = tssb("id", "--home", new, "--import", ex, "--json")
    moved = json.loads(r.out)
    assert (moved["public"], moved["network_fingerprint"]) == \
        (me["public"], me["network_fingerprint"])
    r = tssb("id", "--home", new, "--import", ex)
    assert r.code == 1 and "already has a data directory" in r.err
    ex.write_text(ex.read_text().replace(me["public"][:8], "00000000"))
    assert tssb("id", "--home", str(tmp_path / "x"), "--import", ex).code == 1


# -- reading and posting ---------------------------------------------------------------------

def test_read_decodes_app_posts_with_names_and_follows(home):
    seed = bytes(range(40, 72))
    fid = crypto.publickey(seed)
    c = Context.open(home)
    c.store.add_feed(fid)
    author = entry.Author(fid, lambda m: crypto.sign(seed, m))

    def put(content):
        seq, pkt, mid, chunks = author.next(content)
        c.store.append(fid, seq, pkt, mid)
        for i, ch in enumerate(chunks):
            c.store.put_chunk(fid, seq, i, ch)
    put(bipf.encode(["IAM", "Bob"]))
    put(bipf.encode(["TAV", ["%" + "ab" * 10], "a reply\x1b[31m", None, 1700000000]))
    put(bipf.encode(["KAN", "board", 1]))
    r = tssb("read", "Bob", "--home", home)
    lines = r.out.splitlines()
    assert r.code == 0 and len(lines) == 3, r
    assert lines[0].endswith("is called 'Bob'")
    assert "Bob (%s): (reply) a reply\ufffd[31m" % fid.hex()[:8] in lines[1]   # no escapes
    assert lines[2].endswith("[KAN message (3 elements)]")

    def later():
        time.sleep(0.6)
        put(bipf.encode(["TAV", [], "while following", None, 1700000100]))
    t = threading.Thread(target=later)
    t.start()
    r = tssb("read", fid.hex(), "--home", home, "-n", "1", "--follow", "--duration", "2",
             "--json")
    t.join()
    c.close()
    got = [json.loads(l) for l in r.out.splitlines()]
    assert [(p["seq"], p["author"]) for p in got] == [(3, "Bob"), (4, "Bob")], r
    assert got[1]["text"] == "while following"


def test_long_posts_estimate_refuse_and_force(home, tmp_path):
    r = tssb("post", "y" * 3000, "--home", home, "--plan", "EU868.a")
    assert r.code == 0 and "31 packets, 6.4 s of airtime per hop under EU868.a" in r.err, r
    r = tssb("post", "y" * 5000, "--home", home, "--plan", "US915.a")
    assert r.code == 1 and "10.5 s" in r.err and "--force" in r.err, r
    r = tssb("post", "y" * 5000, "--home", home, "--plan", "US915.a", "--force", "--json")
    assert r.code == 0 and json.loads(r.out)["chunks"] == 50, r
    big = tmp_path / "big"
    big.write_bytes(b"z" * ((1 << 20) + 1))
    r = tssb("post", "--file", big, "--home", home, "--force")
    assert r.code == 2 and "too long" in r.err, r
    assert tssb("post", "x", "--file", big, "--home", home).code == 2
    assert tssb("post", "-", "--home", home, stdin=b"").code == 2      # empty


# -- the board -------------------------------------------------------------------------------

def test_config_over_the_link_persists_on_the_board(board, home):
    from tssbfw import config
    r = tssb("config", "set", "plan", "AU915.a", "--port", board.port, "--home", home)
    assert r.code == 0 and "restart it to apply" in r.out, r
    cfg, _ = config.load(board.fw.root)
    assert cfg["plan"] == "AU915.a"                         # on the board's flash
    r = tssb("config", "set", "sf", "null", "--port", board.port, "--json")
    assert r.code == 0 and json.loads(r.out) == {"key": "sf", "value": None, "restart": True}
    r = tssb("config", "get", "--port", board.port, "--json")
    assert json.loads(r.out)["plan"] == "AU915.a"
    # the plan read from the board is the one long posts are estimated with
    r = tssb("post", "y" * 3000, "--home", home)
    assert "under AU915.a" in r.err, r
    r = tssb("status", "--board", "--port", board.port, "--home", home, "--json")
    assert r.code == 0 and json.loads(r.out)["board"]["plan"] == "EU868.a"   # until restart


# -- completion and logging ------------------------------------------------------------------

def test_completion_scripts_complete_from_the_parser(tmp_path):
    r = tssb("completion", "bash")
    script = tmp_path / "c.sh"
    script.write_text(r.out)
    for name in cli.command_modules():
        assert name in r.out
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash")
    probe = ('source %s; COMP_WORDS=(tssb store c); COMP_CWORD=2; _tssb; echo "${COMPREPLY[*]}";'
             ' COMP_WORDS=(tssb --log-level ""); COMP_CWORD=2; _tssb; echo "${COMPREPLY[*]}"'
             % script)
    out = subprocess.run([bash, "-c", probe], capture_output=True, text=True, timeout=30)
    assert out.stdout.splitlines() == ["check", "debug info warning error"], out
    z = tssb("completion", "zsh").out
    assert "bashcompinit" in z and "complete -o filenames -F _tssb tssb" in z


def test_log_levels_and_verbose():
    for argv, level in ((["feeds"], logging.WARNING), (["-v", "feeds"], logging.INFO),
                        (["feeds", "-vv"], logging.DEBUG),
                        (["serve", "--log-level", "error"], logging.ERROR),
                        (["serve"], logging.INFO), (["listen", "-v"], logging.INFO)):
        assert cli.log_level(cli.parse_args(cli.build_parser(), argv)) == level, argv


def test_internal_errors_are_one_line_and_traceback_only_with_debug(home, monkeypatch):
    from tssb.cli import feeds
    from tssb.store import StoreError

    def refused(*a):
        raise StoreError("append out of order")
    monkeypatch.setattr(feeds, "feed_rows", refused)      # a subsystem's own error
    r = tssb("feeds", "--home", home)
    assert r.code == 1 and r.err == "tssb: error: the store refused a write: append out " \
        "of order\n", r
    monkeypatch.setattr(feeds, "feed_rows", lambda *a: {}["boom"])     # a bug
    r = tssb("feeds", "--home", home)
    assert r.code == 1 and r.err.startswith("tssb: internal error: KeyError") and \
        "Traceback" not in r.err and len(r.err.splitlines()) == 1, r
    r = tssb("feeds", "--home", home, "-vv")
    assert r.code == 1 and "Traceback" in r.err and "internal error" in r.err, r
