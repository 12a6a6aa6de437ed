"""One home shared by many commands, and a user's own feed that never forks by accident:
concurrent posts, a restore under a running server, posting after a restore or an
identity import, forks named wherever they reach a host, and posts that replicate."""
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import time

from conftest import home_key, spawn, tssb, two_homes, wait_stderr
from tinyssb import entry
from tssb.context import Context

# -- many commands at once -----------------------------------------------------------------

FORK_POSTS = textwrap.dedent("""
    import os, sys
    from tssb.cli import build_parser, main
    build_parser()     # every command module imported once, before the children fork
    home, n = sys.argv[1], int(sys.argv[2])
    kids = []
    for i in range(n):
        pid = os.fork()
        if pid == 0:
            fd = os.open(os.devnull, os.O_WRONLY)
            os.dup2(fd, 1)
            try:
                main(["post", "--home", home, "post %d" % i])
                code = 0
            except SystemExit as e:
                code = e.code
            os._exit(code or 0)
        kids.append(pid)
    codes = [os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) for p in kids]
    print(sum(1 for c in codes if c))
""")


def test_sixty_posts_at_once_on_one_home(tmp_path):
    """60 processes post at once (forked from one that imported tssb, so they really
    overlap): every one succeeds, seqs 1..60, one chain (on main 6-9 of 60 failed with
    "append out of order")."""
    home = str(tmp_path / "h")
    assert tssb("id", "--home", home).code == 0
    r = subprocess.run([sys.executable, "-c", FORK_POSTS, home, "60"], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "0", (r.stdout, r.stderr[-2000:])
    assert "Traceback" not in r.stderr
    ctx = Context.open(home)
    try:
        assert ctx.store.front(ctx.identity.public)[0] == 60
        texts = sorted(bytes(ctx.store.entry(ctx.identity.public, s)[8:56]).split(b"\0")[0][1:]
                       for s in range(1, 61))
        assert len(set(texts)) == 60
    finally:
        ctx.close()
    r = tssb("store", "check", "--home", home)
    assert r.code == 0 and r.out.strip().endswith("ok"), r


def test_restore_refused_while_serve_runs(tmp_path):
    """`tssb store restore` under a running `tssb serve` is refused and names it (on main
    the server went on writing into the replaced file); once it stopped, it restores."""
    home = str(tmp_path / "h")
    backup = str(tmp_path / "b.db")
    assert tssb("id", "--home", home).code == 0
    assert tssb("post", "--home", home, "one").code == 0
    assert tssb("store", "backup", backup, "--home", home).code == 0
    p = spawn("serve", "--port", 0, "--home", home)
    try:
        wait_stderr(p, "serving")
        r = tssb("store", "restore", backup, "--home", home)
        assert r.code == 1 and "tssb serve (pid %d)" % p.pid in r.err, r
        assert "stop it first" in r.err and len(r.err.strip().splitlines()) == 1
        r = tssb("id", "--import", backup, "--home", home)   # not an export: says so first
        assert r.code == 1
    finally:
        p.terminate()
        p.wait(10)
    r = tssb("store", "restore", backup, "--home", home)
    assert r.code == 0, r
    kept = [n for n in os.listdir(home) if n.startswith("tssb.db.replaced-") and
            not n.endswith("-wal")]      # the server was killed: its WAL travels along
    assert len(kept) == 1 and kept[0].endswith("Z") and "T" in kept[0], kept


# -- own-feed safety -------------------------------------------------------------------------

def test_restore_then_post_waits_for_a_peer(tmp_path):
    """A restored home does not reuse seqs its own feed already has elsewhere: `post`
    refuses with the way out until a sync with a peer (which brings the newer entries),
    then continues the feed (on main it posted a second seq 2: a fork)."""
    a, b, cb, server = two_homes(tmp_path)
    try:
        backup = str(tmp_path / "a.db")
        assert tssb("post", "--home", a, "one").code == 0
        assert tssb("store", "backup", backup, "--home", a).code == 0
        assert tssb("post", "--home", a, "two").code == 0
        assert tssb("sync", "--peer", server.addr, "--home", a).code == 0
        r = tssb("store", "restore", backup, "--home", a)
        assert r.code == 0 and "tssb sync" in r.err, r
        r = tssb("post", "--home", a, "three")
        assert r.code == 1 and "may be behind" in r.err and "tssb sync --peer" in r.err \
            and "--force" in r.err, r
        r = tssb("dag", "post", "--home", a, "a root")
        assert r.code == 1 and "may be behind" in r.err, r
        r = tssb("sync", "--peer", server.addr, "--home", a)
        assert r.code == 0 and "confirmed" in r.err, r
        r = tssb("post", "--home", a, "three", "--json")
        assert r.code == 0 and json.loads(r.out)["seq"] == 3, r
        assert tssb("sync", "--peer", server.addr, "--home", a).code == 0
        r = tssb("store", "check", "--home", b)
        assert r.code == 0 and "fork" not in r.out, r
    finally:
        server.close()
        cb.close()


def test_import_then_post_waits_and_force_forks_visibly(tmp_path):
    """A home made by `id --import` waits too; --force posts anyway, and the fork it makes
    is found by the next sync and named by sync, read, store check and the web view."""
    a, b, cb, server = two_homes(tmp_path)
    try:
        for text in ("one", "two"):
            assert tssb("post", "--home", a, text).code == 0
        assert tssb("sync", "--peer", server.addr, "--home", a).code == 0
        export = str(tmp_path / "a.id")
        assert tssb("id", "--export", export, "--home", a).code == 0
        c = str(tmp_path / "c")
        r = tssb("id", "--import", export, "--home", c)
        assert r.code == 0 and "waits for a sync" in r.err, r
        r = tssb("post", "--home", c, "seq one again")
        assert r.code == 1 and "identity imported" in r.err, r
        # long enough for a side chain: its chunks reach the peer too and are not outstanding
        r = tssb("post", "--home", c, "seq one again, " * 12, "--force")
        assert r.code == 0 and "posted seq 1" in r.out, r
        cc = Context.open(c)
        cc.store.add_peer(cb.identity.public, "bee", server.addr)
        cc.close()
        r = tssb("sync", "--peer", server.addr, "--home", c, "--json")
        # the peer stores no second entry for seq 1 (nor its chunks): it keeps the pair as
        # evidence, and the sync has done all it can
        assert r.code == 0 and "your own feed" in r.err and "forked" in r.err, r
        assert json.loads(r.out)["forks"] == [{"feed": home_key(a), "seq": 1}]
        # the peer that served the sync found it too
        r = tssb("store", "check", "--home", b, "--json")
        assert json.loads(r.out)["forks"] == [{"feed": home_key(a), "seq": 1}], r
        for home in (b, c):
            r = tssb("read", home_key(a), "--home", home)
            assert r.code == 0 and "seq 1" in r.err and "forked" in r.err, r
            r = tssb("store", "check", "--home", home)
            assert r.code == 0 and "fork" in r.out and "1 fork(s)" in r.out, r
        from tssb.web.feeds import FeedIndex
        ctx = Context.open(b)
        try:
            idx = FeedIndex(ctx.store)
            idx.refresh()
            assert [s["forks"] for s in idx.summaries() if s["fid"] == home_key(a)] == [[1]]
        finally:
            ctx.close()
    finally:
        server.close()
        cb.close()


def test_a_200_kb_post_reaches_the_other_home(tmp_path):
    """Every post a host accepts replicates: 200 KB (2,048 chunks) between two homes (on
    main side chains over 1,000 chunks were never fetched: "side chain incomplete")."""
    a, b, cb, server = two_homes(tmp_path)
    try:
        data = os.urandom(200 * 1024)
        f = tmp_path / "big.bin"
        f.write_bytes(data)
        r = tssb("post", "--home", a, "--file", f, "--raw", "--force", "--json")
        assert r.code == 0 and json.loads(r.out)["chunks"] == len(entry.chain20(data)[1])
        assert "between hosts only" in r.err, r      # boards stop at 1000 chunks
        r = tssb("sync", "--peer", server.addr, "--home", a)
        assert r.code == 0, r
        fid = bytes.fromhex(home_key(a))
        from tssb import posts
        # the server may still be writing when the client's sync returns (a sync that
        # waits for the peer's confirmation is another change)
        end = time.monotonic() + 30
        while time.monotonic() < end:
            got = posts.entry_content(cb.store, fid, 1)
            if got is not None and got[1]:
                break
            time.sleep(0.1)
        assert got is not None and got[1] and got[0] == data, (
            got and (got[1], len(got[0])), cb.store.chunk_count(fid, 1))
        r = tssb("read", fid.hex(), "--home", b, "--json")
        d = json.loads(r.out)
        assert d["have"] == d["length"] == len(data) and d["kind"] != "partial"
    finally:
        server.close()
        cb.close()


# -- restore and import take only what is ours --------------------------------------------

EVIL_TRIGGER = """CREATE TRIGGER evil AFTER INSERT ON entries BEGIN
    INSERT OR IGNORE INTO peers VALUES (x'%s', 'evil', '', 0); END""" % ("ee" * 32)


def _backup_with(tmp_path, *sql):
    home = str(tmp_path / "src")
    assert tssb("id", "--home", home).code == 0
    assert tssb("post", "--home", home, "hello").code == 0
    path = str(tmp_path / "evil.db")
    assert tssb("store", "backup", path, "--home", home).code == 0
    db = sqlite3.connect(path)
    for s in sql:
        db.execute(s)
    db.commit()
    db.close()
    return path


def test_restore_drops_a_foreign_trigger(tmp_path):
    """A backup with a trigger that adds a key to `peers` on every append: the restored
    store has no trigger, a post adds no peer, and the user is told (on main it restored
    with exit 0 and the key landed on the allow-list at the next post)."""
    backup = _backup_with(tmp_path, EVIL_TRIGGER, "CREATE VIEW v AS SELECT * FROM peers",
                          "CREATE TABLE extra (x)")
    home = str(tmp_path / "h")
    r = tssb("store", "restore", backup, "--home", home)
    assert r.code == 0, r
    for what in ("trigger 'evil' on entries", "view 'v'", "table 'extra'"):
        assert what in r.err, r
    assert tssb("post", "--home", home, "--force", "after the restore").code == 0
    ctx = Context.open(home)
    try:
        assert ctx.store.peers() == []
        kinds = ctx.store.db.execute("SELECT type, name FROM sqlite_master WHERE "
                                     "type IN ('trigger', 'view')").fetchall()
        assert kinds == []
    finally:
        ctx.close()
    # a live store that got one anyway: check names it, --repair drops it
    db = sqlite3.connect(os.path.join(home, "tssb.db"))
    db.execute(EVIL_TRIGGER)
    db.commit()
    db.close()
    r = tssb("store", "check", "--home", home)
    assert r.code == 1 and "trigger 'evil' on entries" in r.out, r
    r = tssb("store", "check", "--repair", "--home", home)
    assert r.code == 0 and "1 foreign schema object" in r.out, r
    assert tssb("store", "check", "--home", home).code == 0


def test_restore_refuses_bad_types_and_foreign_table_shapes(tmp_path):
    """Text in blob columns, or a tssb table redefined: one line, nothing restored (on
    main: "internal error: TypeError")."""
    cases = [
        (("UPDATE entries SET pkt = 'not bytes'",), "entries.pkt"),
        (("UPDATE identities SET seed = 12",), "identities.seed"),
        (("UPDATE config SET value = 'abc' WHERE key = 'network_key'",), "network_key"),
        (("DROP TABLE goset_keys", "CREATE TABLE goset_keys (key BLOB, added_ts INTEGER, "
          "evil DEFAULT (randomblob(8)))"), "goset_keys is defined otherwise"),
    ]
    for i, (sql, words) in enumerate(cases):
        sub = tmp_path / str(i)
        sub.mkdir()
        backup = _backup_with(sub, *sql)
        home = str(sub / "h")
        r = tssb("store", "restore", backup, "--home", home)
        assert r.code == 1 and words in r.err and "Traceback" not in r.err, (sql, r)
        assert len(r.err.strip().splitlines()) == 1, r
        assert not os.path.exists(home)


def test_restore_takes_an_empty_table_of_an_older_layout(tmp_path):
    """clock_blocked's first layout (empty, remade by the clock module on first use) does
    not stop a restore of an older backup."""
    backup = _backup_with(tmp_path, "DROP TABLE IF EXISTS clock_blocked",
                          "CREATE TABLE clock_blocked (author BLOB PRIMARY KEY, reason TEXT "
                          "NOT NULL, eid BLOB)")
    home = str(tmp_path / "h")
    r = tssb("store", "restore", backup, "--home", home)
    assert r.code == 0 and "table 'clock_blocked'" in r.err, r
    assert tssb("clock", "status", "--home", home).code == 0
    assert tssb("store", "check", "--home", home).code == 0


def test_import_of_a_nested_or_mistyped_identity(tmp_path):
    for i, body in enumerate(['{"type": "tssb-identity", "v": 1, "seed": %s}'
                              % ("[" * 1900 + "]" * 1900),   # within the 4 KiB an export may have
                              '{"type": "tssb-identity", "v": 1, "seed": {"a": 1}, '
                              '"public": 1, "network_key": null}',
                              "[" * 100000]):
        f = tmp_path / ("id%d.json" % i)
        f.write_text(body)
        home = str(tmp_path / ("h%d" % i))
        r = tssb("id", "--import", f, "--home", home)
        assert r.code == 1 and "not a tssb identity export" in r.err, r
        assert not os.path.exists(home)


# -- store diagnostics -------------------------------------------------------------------------

def test_damaged_store_diagnostics_do_not_go_in_circles(tmp_path):
    home = str(tmp_path / "h")
    assert tssb("id", "--home", home).code == 0
    for i in range(3):
        assert tssb("post", "--home", home, "post %d" % i).code == 0
    db = os.path.join(home, "tssb.db")
    raw = open(db, "rb").read()
    open(db, "wb").write(raw[:100] + os.urandom(4000) + raw[4100:])
    r = tssb("feeds", "--home", home)
    assert r.code == 1 and "tssb store check" in r.err, r
    r = tssb("store", "check", "--home", home)
    assert r.code == 1 and "tssb store check" not in r.err, r        # no circle
    assert "tssb store restore" in r.err and "tssb id --import" in r.err, r


def test_a_store_on_read_only_media_is_readable(tmp_path):
    """read, feeds, backup and check on a home mounted read-only (on main each failed on
    the event log's lock file). Needs mount namespaces (root in a container); else skip."""
    import shutil
    import pytest
    unshare = shutil.which("unshare")
    home = str(tmp_path / "h")
    assert tssb("id", "--home", home).code == 0
    assert tssb("post", "--home", home, "readable").code == 0
    ro = str(tmp_path / "ro")
    os.mkdir(ro)
    out = str(tmp_path / "out")
    os.mkdir(out)
    tssb_cmd = "%s -m tssb" % sys.executable
    script = " && ".join([
        "mount --bind %s %s" % (home, ro), "mount -o remount,ro,bind %s" % ro,
        "%s read self --home %s" % (tssb_cmd, ro),
        "%s feeds --home %s" % (tssb_cmd, ro),
        "%s store backup %s/b.db --home %s" % (tssb_cmd, out, ro),
        "%s store check --home %s" % (tssb_cmd, ro),
        "(%s post x --home %s; echo post=$?)" % (tssb_cmd, ro)])
    if unshare is None or subprocess.run([unshare, "-m", "true"],
                                         capture_output=True).returncode:
        pytest.skip("no mount namespaces here")
    r = subprocess.run([unshare, "-m", "sh", "-c", script], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "readable" in r.stdout
    assert "(read-only)" in r.stdout and "\nok\n" in r.stdout, r.stdout
    assert "post=1" in r.stdout and "read-only" in r.stderr, r.stderr
    assert os.path.getsize(os.path.join(out, "b.db")) > 0
