"""The chat commands as a user runs them: post (TAV / --raw), dm, read (chats, --chat,
--follow, --json), name, receipts, block and mute (through restarts and a sync)."""
import json
import threading
import time

import bipf as pub
import pytest

from conftest import Server, tssb
from tinyssb import bipf, crypto, entry
from tssb import posts
from tssb.bridge.hostnode import HostNode
from tssb.context import Context


def _copy(src_home, dst_home, fid):
    """Replicate fid from one home's store into another's (a sync, in short)."""
    s, d = Context.open(src_home), Context.open(dst_home)
    try:
        d.store.add_feed(fid)
        for q in range(d.store.front(fid)[0] + 1, s.store.front(fid)[0] + 1):
            d.store.append(fid, q, s.store.entry(fid, q), s.store.mid(fid, q))
            for c in range(s.store.chunk_count(fid, q)):
                d.store.put_chunk(fid, q, c, s.store.chunk(fid, q, c))
    finally:
        s.close()
        d.close()


def _key(home):
    c = Context.open(home)
    try:
        return c.identity.public
    finally:
        c.close()


@pytest.fixture
def three(tmp_path):
    homes = [str(tmp_path / n) for n in "abc"]
    for h in homes:
        assert tssb("id", "--home", h).code == 0
    return homes


def _content(home, fid, seq):
    c = Context.open(home)
    try:
        return posts.entry_content(c.store, fid, seq)[0]
    finally:
        c.close()


def test_post_writes_the_apps_public_tav_and_raw_on_request(three):
    a = three[0]
    fa = _key(a)
    assert tssb("post", "hello app", "--home", a).code == 0
    assert tssb("post", "--raw", "raw bytes", "--home", a).code == 0
    with open(a + "/v.c2", "wb") as f:
        f.write(b"\xc2" * 40)
    assert tssb("post", "--voice", a + "/v.c2", "--home", a).code == 0
    lst = pub.loads(_content(a, fa, 1))          # the pub (and the app) read it
    assert lst[:4] == ["TAV", [], "hello app", None] and abs(lst[4] - time.time()) < 60
    assert _content(a, fa, 2) == b"raw bytes"
    assert pub.loads(_content(a, fa, 3))[2:4] == [None, b"\xc2" * 40]
    r = tssb("read", "self", "--home", a)
    assert [l.split(": ", 1)[1] for l in r.out.splitlines()] == [
        "hello app", "raw bytes", "<voice message>"], r
    r = tssb("post", "--raw", "--voice", a + "/v.c2", "x", "--home", a)
    assert r.code == 2 and "--voice" in r.err


def test_raw_content_the_app_throws_on_is_refused_unless_forced(three):
    a = three[0]
    # the app reads 0x61 ("a") as a byte string of 12 bytes, takes it for a box and throws
    r = tssb("post", "--raw", "a raw post text", "--home", a)
    assert r.code == 1 and "SSBid.kt:117" in r.err and "--force" in r.err, r
    assert r.err.count("\n") == 1
    r = tssb("post", "--raw", "-", "--home", a, stdin=b"\tindented\n")
    assert r.code == 1 and "a box of 1 byte " in r.err, r
    with open(a + "/list.bin", "wb") as f:
        f.write(b"4&abcd")                   # a list holding true: the app's cast throws
    r = tssb("post", "--raw", "--file", a + "/list.bin", "--home", a)
    assert r.code == 1 and "Bipf.kt:491" in r.err, r
    assert tssb("feeds", "--home", a, "--json").out.strip() == ""      # nothing written
    # what the app takes goes out as before; the same text as the app's message too
    assert tssb("post", "--raw", "the raw post text", "--home", a).code == 0
    assert tssb("post", "a raw post text", "--home", a).code == 0
    # forced, and read back as the text it is (as every old raw post)
    r = tssb("post", "--raw", "--force", "a raw post text", "--home", a)
    assert r.code == 0 and "posted seq 3" in r.out, r
    r = tssb("read", "self", "--home", a)
    assert [l.split(": ", 1)[1] for l in r.out.splitlines()] == [
        "the raw post text", "a raw post text", "a raw post text"], r
    r = tssb("read", "--chat", "public", "--home", a, "--json")
    assert [json.loads(l)["text"] for l in r.out.splitlines()][-1] == "a raw post text", r


def test_a_group_message_to_a_feed_we_hold_nothing_of_warns(three):
    a, b = three[0], three[1]
    fb = _key(b)
    assert tssb("name", "Bea", "--home", b).code == 0
    _copy(b, a, fb)
    new = crypto.publickey(b"\x05" * 32)
    r = tssb("dm", "Bea", new.hex(), "hello both", "--home", a, "--json")
    assert r.code == 0 and json.loads(r.out)["unheard"] == [new.hex()], r
    assert r.err.count("warning:") == 1 and new.hex()[:8] in r.err.split("warning:")[1], r
    assert "Bea" not in r.err.split("warning:")[1]
    r = tssb("dm", "Bea", "just you", "--home", a)          # 1:1: the post tells Bea of us
    assert r.code == 0 and "warning" not in r.err, r


def test_dm_by_name_prefix_and_stdin_read_as_chats_with_receipts(three):
    a, b, c = three
    fa, fb = _key(a), _key(b)
    assert tssb("name", "Bea", "--home", b).code == 0
    _copy(b, a, fb)                       # A knows B's feed and name
    r = tssb("dm", "Bea", "see you at six", "--home", a)
    assert r.code == 0 and "Bea" in r.out, r
    r = tssb("dm", fb.hex()[:10], "-", "--home", a, "--json", stdin=b"second line\n")
    assert r.code == 0 and json.loads(r.out)["recipients"] == [fb.hex()], r
    for home in (b, c):
        _copy(a, home, fa)
    # B: one private chat with A; the first read sends the DLVs owed... none for history
    r = tssb("read", "--home", b)
    assert r.code == 0 and "\U0001f512 [" in r.out and "2 posts" in r.out, r
    r = tssb("read", "--chat", fa.hex()[:12], "--home", b, "--json")
    got = [json.loads(l) for l in r.out.splitlines()]
    assert [p["text"] for p in got] == ["see you at six", "second line"], r
    assert got[0]["chat"]["members"] == sorted([fa.hex(), fb.hex()])
    # showing them was reading them: B wrote an ACK for each (boxed to [B, A])
    cb = Context.open(b)
    acks = [posts.read(cb.store, fb, s) for s in range(1, cb.store.front(fb)[0] + 1)]
    cb.close()
    assert [p.kind for p in acks] == ["name", "private", "private"]     # IAM, 2 ACKs
    # C, not a recipient: no chat, the boxes only counted
    r = tssb("read", "--home", c)
    assert "(2 private posts not addressed to us)" in r.out and "\U0001f512" not in r.out, r
    r = tssb("read", fa.hex(), "--home", c)
    assert r.out.strip().endswith("(2 private posts not addressed to us)"), r
    # A sees B's read receipts on its posts
    _copy(b, a, fb)
    r = tssb("read", "--chat", "Bea", "--home", a)
    assert r.out.count("\u2714\u2714 Bea") == 2, r


def test_eight_members_refused_and_nothing_written(three):
    a = three[0]
    keys = [crypto.publickey(bytes([i]) * 32).hex() for i in range(1, 8)]
    r = tssb("dm", *keys, "too many", "--home", a)
    assert r.code == 2 and "at most 7 members" in r.err, r
    assert tssb("feeds", "--home", a, "--json").out.strip() == ""
    r = tssb("dm", *keys[:6], "six others", "--home", a, "--json")
    assert r.code == 0 and len(json.loads(r.out)["recipients"]) == 6, r


def test_receipts_switch(three):
    a, b = three[0], three[1]
    fa, fb = _key(a), _key(b)
    assert tssb("read", "--home", b).code == 0      # B's history scanned: later DMs are new
    assert tssb("receipts", "--read", "off", "--home", b).code == 0
    r = tssb("receipts", "--home", b, "--json")
    assert json.loads(r.out) == {"delivered": True, "read": False}
    assert tssb("dm", fb.hex(), "hi", "--home", a).code == 0
    _copy(a, b, fa)
    assert tssb("read", "--chat", fa.hex(), "--home", b).code == 0
    cb = Context.open(b)
    kinds = [posts.read(cb.store, fb, s, None).kind
             for s in range(1, cb.store.front(fb)[0] + 1)]
    cb.close()
    assert kinds == ["private"]                      # the DLV only, no ACK


def test_names_are_shown_in_feeds_and_peer_lists(three):
    a, b = three[0], three[1]
    fb = _key(b)
    assert tssb("name", "Bea", "--home", b).code == 0
    r = tssb("name", "--home", b)
    assert r.out.strip() == "Bea"
    _copy(b, a, fb)
    assert "Bea" in tssb("feeds", "--home", a).out
    assert tssb("peer", "add", fb.hex(), "--home", a).code == 0
    assert "calls itself 'Bea'" in tssb("peer", "list", "--home", a).out
    r = tssb("name", "x" * 65, "--home", b)
    assert r.code == 2


def _app_feed(home, texts):
    """A feed the app wrote: public TAVs. Returns its key."""
    seed = b"\x44" * 32
    fid = crypto.publickey(seed)
    c = Context.open(home)
    c.store.add_feed(fid)
    au = entry.Author(fid, lambda m: crypto.sign(seed, m))
    for t in texts:
        s, pkt, mid, chunks = au.next(bipf.encode(["TAV", [], t, None, 1778385000]))
        c.store.append(fid, s, pkt, mid)
        for i, ch in enumerate(chunks):
            c.store.put_chunk(fid, s, i, ch)
    c.close()
    return fid


def test_mute_hides_from_chats_and_keeps_the_feed(three):
    a = three[0]
    spam = _app_feed(a, ["buy now", "buy more now"])
    assert "buy now" in tssb("read", "--chat", "public", "--home", a).out
    assert tssb("mute", spam.hex(), "--home", a).code == 0
    assert "buy now" not in tssb("read", "--chat", "public", "--home", a).out
    assert spam.hex() in tssb("mute", "--list", "--home", a).out
    c = Context.open(a)
    assert c.store.front(spam)[0] == 2           # still stored, still relayed
    c.close()
    assert tssb("mute", "--remove", spam.hex(), "--home", a).code == 0
    assert "buy now" in tssb("read", "--chat", "public", "--home", a).out


def test_block_survives_a_restart_and_a_sync(three):
    a, b = three[0], three[1]
    spam = _app_feed(a, ["spam one", "spam two", "x" * 300])
    _app_feed(b, ["spam one", "spam two", "x" * 300])    # B holds the same feed
    r = tssb("block", spam.hex()[:10], "--home", a)
    assert r.code == 0 and "3 entries removed" in r.out, r
    c = Context.open(a)
    assert not c.store.has_feed(spam) and spam not in c.store.feeds()
    # a restart: the store refuses the feed whoever brings it, the node never takes its key
    h = HostNode(c.store, c.identity)
    assert spam in h.node.goset.banned and spam not in h.node.goset
    assert h.node.goset.add(spam) is False
    c.store.add_feed(spam)
    assert not c.store.has_feed(spam)
    # a sync with B, which holds it: everything else comes, the blocked feed does not
    cb = Context.open(b)
    cb.set_network_key(c.network_key)
    fb = cb.identity.public
    assert tssb("post", "from b", "--home", b).code == 0
    server = Server(cb)
    try:
        c.store.add_peer(fb, "b", server.addr)
        r = tssb("sync", "--peer", server.addr, "--home", a)
        assert r.code == 0, r
    finally:
        server.close()
        cb.close()
    assert c.store.front(fb)[0] == 1
    assert not c.store.has_feed(spam) and c.store.entry(spam, 1) is None
    assert c.store.chunk(spam, 3, 0) is None
    c.close()
    assert "spam" not in tssb("read", "--chat", "public", "--home", a).out
    assert spam.hex() in tssb("block", "--list", "--home", a).out
    assert tssb("block", "--remove", spam.hex(), "--home", a).code == 0
    r = tssb("block", "--remove", spam.hex(), "--home", a)
    assert r.code == 1 and "not blocked" in r.err


def test_read_follows_a_private_chat(three):
    a, b = three[0], three[1]
    fa, fb = _key(a), _key(b)
    assert tssb("dm", fb.hex(), "first", "--home", a).code == 0
    _copy(a, b, fa)

    def later():
        time.sleep(0.8)
        assert tssb("dm", fb.hex(), "second, while following", "--home", a).code == 0
        _copy(a, b, fa)
    t = threading.Thread(target=later)
    t.start()
    r = tssb("read", "--chat", fa.hex(), "--follow", "--duration", "3", "--json",
             "--home", b)
    t.join()
    got = [json.loads(l)["text"] for l in r.out.splitlines()]
    assert got == ["first", "second, while following"], r
