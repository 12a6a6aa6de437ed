"""Private chats between homes (tssb.chat.inbox): a 1:1 DM, a group of 7, voice and long
texts, receipts both ways (ours and the app's), a non-recipient who sees nothing."""
import bipf as pub
import pytest

from appbox import open_box as app_open, seal as app_seal
from tinyssb import bipf, crypto, entry
from tssb import ownfeed, posts
from tssb.chat import appmsg, box, inbox, views
from tssb.context import Context


def _copy(src, dst, fid):
    """Replicate fid's entries and chunks from one store to another (as a sync would)."""
    dst.add_feed(fid)
    for s in range(dst.front(fid)[0] + 1, src.front(fid)[0] + 1):
        dst.append(fid, s, src.entry(fid, s), src.mid(fid, s))
        for c in range(src.chunk_count(fid, s)):
            dst.put_chunk(fid, s, c, src.chunk(fid, s, c))


@pytest.fixture
def homes(tmp_path):
    made = []

    def make(name):
        c = Context.open(str(tmp_path / name))
        made.append(c)
        return c
    yield make
    for c in made:
        c.close()


def _dm(src, others, text, voice=None):
    content, order = appmsg.private_tav(src.identity.public, others, text, voice)
    return ownfeed.post(src, content), order


def _ready(ctx):
    """An inbox past its first scan (the home's history): what arrives now is new."""
    ib = inbox.Inbox(ctx.store, ctx.identity)
    ib.refresh()
    return ib


def test_one_to_one_dm_and_a_non_recipient_who_sees_nothing(homes):
    a, b, c = homes("a"), homes("b"), homes("c")
    ib, ic = _ready(b), _ready(c)
    fa = a.identity.public
    seq, order = _dm(a, [b.identity.public], "hello bob")
    assert order == [b.identity.public, fa]
    for ctx in (b, c):
        _copy(a.store, ctx.store, fa)
    (p,) = ib.refresh()
    assert (p.text, p.private, p.fid, p.seq) == ("hello bob", "open", fa, seq)
    key = inbox.chat_key([fa, b.identity.public])
    assert [k for k, _, _ in ib.chats()] == [key]
    assert views.title(key, b.identity.public, {fa: "Alice"}) == "\U0001f512 [Alice (%s)]" % fa.hex()[:8]
    assert [q.text for q in views.private(b.store, ib, key, ib.keys)] == ["hello bob"]
    # the non-recipient: counted, no chat, nothing opened
    assert ic.refresh() == [] and ic.chats() == []
    assert ic.counts() == {"sealed": 1}
    q = posts.read(c.store, fa, seq, ic.keys)
    assert q.kind == "private" and q.private == "sealed" and "hello" not in q.text


def test_a_group_of_seven_and_eight_refused(homes):
    a = homes("a")
    others = [homes("m%d" % i) for i in range(6)]
    keys = [o.identity.public for o in others]
    with pytest.raises(box.BoxError, match="at most 7 members"):
        appmsg.private_tav(a.identity.public, keys + [crypto.publickey(b"\x09" * 32)], "x")
    seq, order = _dm(a, keys, "hello all")
    assert len(order) == 7 and order[-1] == a.identity.public
    want = inbox.chat_key(order)
    for o in others:
        ib = _ready(o)
        _copy(a.store, o.store, a.identity.public)
        (p,) = ib.refresh()
        assert p.text == "hello all" and ib.chat_of(p.fid, p.seq) == want
    ia = _ready(a)          # our own post opens too: we are the last slot
    assert ia.chat_of(a.identity.public, seq) == want


def test_voice_only_and_a_long_text_in_several_chunks(homes):
    a, b = homes("a"), homes("b")
    ib = _ready(b)
    long = "a long message, line %d. " * 40 % tuple(range(40))
    s1, _ = _dm(a, [b.identity.public], None, voice=b"\xc2" * 300)
    s2, _ = _dm(a, [b.identity.public], long)
    assert a.store.chunk_count(a.identity.public, s2) >= 10
    _copy(a.store, b.store, a.identity.public)
    v, t = ib.refresh()
    assert (v.text, v.voice) == ("<voice message>", True)
    assert t.text == long


def test_receipts_both_ways_between_our_homes(homes):
    a, b = homes("a"), homes("b")
    fa, fb = a.identity.public, b.identity.public
    ia, ib = _ready(a), _ready(b)
    seq, _ = _dm(a, [fb], "did you get this?")
    _copy(a.store, b.store, fa)
    (p,) = ib.refresh()
    write_b = lambda content: ownfeed.post(b, content)     # noqa: E731
    (dlv,) = ib.settle(write_b)
    assert ib.settle(write_b) == []                           # once only
    (ack,) = ib.mark_read([p], write_b)
    assert ib.mark_read([p], write_b) == []
    # each receipt is boxed to [B, A]: the independent implementation opens it as A
    raw = bipf.decode(posts.entry_content(b.store, fb, dlv)[0])
    assert pub.loads(app_open(raw, a.identity.seed)) == ["DLV", appmsg.msg_ref(
        a.store.mid(fa, seq))]
    _copy(b.store, a.store, fb)
    ia.refresh()
    mid = a.store.mid(fa, seq)
    assert ia.receipts(mid, fa) == {"DLV": [fb], "ACK": [fb]}
    mine = posts.read(a.store, fa, seq, ia.keys)
    assert views.ticks(ia, mine, fa) == {"delivered": [fb], "read": [fb]}
    # no receipts for our own posts, nor for posts already here before the first scan
    assert ia.due() == []


def test_two_processes_owing_one_receipt_write_it_once(homes, tmp_path):
    """A running bridge and a `tssb read` (two connections to one home's store) both owe
    B's DLV for A's message: the second waits for the first's write and sends none."""
    import threading
    a, b = homes("a"), homes("b")
    fa, fb = a.identity.public, b.identity.public
    ib = _ready(b)
    other = Context.open(str(tmp_path / "b"))              # the other process on B's home
    try:
        io = inbox.Inbox(other.store, other.identity)
        _dm(a, [fb], "did you get this?")
        _copy(a.store, b.store, fa)
        ib.refresh()
        io.refresh()
        assert len(ib.due()) == len(io.due()) == 1
        inside, done, got = threading.Event(), threading.Event(), []

        def write_b(content):
            inside.set()                   # the other one settles now, or waits for us
            done.wait(0.5)
            return ownfeed.post(b, content)

        def other_settles():
            inside.wait(10)
            got.append(io.settle(lambda c: ownfeed.post(other, c)))
            done.set()
        t = threading.Thread(target=other_settles)
        t.start()
        mine = ib.settle(write_b)
        t.join(20)
        assert len(mine) + len(got[0]) == 1, (mine, got)
        kinds = [posts.read(b.store, fb, s).kind for s in range(1, b.store.front(fb)[0] + 1)]
        assert kinds == ["private"]
    finally:
        other.close()


def test_receipts_from_and_to_the_app(homes):
    """The app's DLV/ACK (sealed by the independent implementation) on our post; our
    DLV on the app's post, opened by the app's side."""
    a = homes("a")
    fa = a.identity.public
    ia = _ready(a)
    app_seed = b"\x0a" * 32
    app = crypto.publickey(app_seed)
    seq, _ = _dm(a, [app], "to the app")
    mid = a.store.mid(fa, seq)
    au = entry.Author(app, lambda m: crypto.sign(app_seed, m))
    a.store.add_feed(app)

    def app_posts(plain, to):
        s, pkt, m, chunks = au.next(bipf.encode(app_seal(appmsg.encode(plain), to)))
        a.store.append(app, s, pkt, m)
        for i, ch in enumerate(chunks):
            a.store.put_chunk(app, s, i, ch)
        return m
    # the app's feed: a DLV and an ACK for our post, boxed to [the app, us]; a private
    # TAV to us; and a DLV of that post to itself (the app does that): no receipt of ours
    app_posts(["DLV", appmsg.msg_ref(mid)], [app, fa])
    app_posts(["ACK", appmsg.msg_ref(mid)], [app, fa])
    tav_mid = app_posts(["TAV", [], "hi from the app", None, 1778385096,
                         [appmsg.ref(fa), appmsg.ref(app)]], [fa, app])
    app_posts(["DLV", appmsg.msg_ref(tav_mid)], [app, app])
    new = [p for p in ia.refresh() if p.fid == app]
    assert [p.tag for p in new] == ["DLV", "ACK", "TAV"]   # the last one is not ours
    assert ia.receipts(mid, fa) == {"DLV": [app], "ACK": [app]}
    assert ia.receipts(tav_mid, app) == {"DLV": [], "ACK": []}
    (dlv,) = ia.settle(lambda c: ownfeed.post(a, c))
    raw = bipf.decode(posts.entry_content(a.store, fa, dlv)[0])
    assert pub.loads(app_open(raw, app_seed)) == ["DLV", appmsg.msg_ref(tav_mid)]


def test_receipts_switched_off_are_never_sent(homes):
    a, b = homes("a"), homes("b")
    ib = _ready(b)
    inbox.set_enabled(b.store, appmsg.DLV, False)
    inbox.set_enabled(b.store, appmsg.ACK, False)
    _dm(a, [b.identity.public], "quiet please")
    _copy(a.store, b.store, a.identity.public)
    (p,) = ib.refresh()
    write = lambda c: ownfeed.post(b, c)     # noqa: E731
    assert ib.settle(write) == [] and ib.mark_read([p], write) == []
    inbox.set_enabled(b.store, appmsg.DLV, True)
    assert ib.settle(write) == []     # what arrived while off gets none later either
    assert not b.store.has_feed(b.identity.public)        # nothing written


def test_the_history_of_a_home_gets_no_delivered_receipts(homes):
    a, b = homes("a"), homes("b")
    _dm(a, [b.identity.public], "old news")
    _copy(a.store, b.store, a.identity.public)
    ib = inbox.Inbox(b.store, b.identity)
    assert [p.text for p in ib.refresh()] == ["old news"]
    assert ib.due() == []
    _dm(a, [b.identity.public], "fresh")
    _copy(a.store, b.store, a.identity.public)
    ib.refresh()
    assert len(ib.due()) == 1


def test_a_box_still_arriving_holds_up_nothing_after_it(homes):
    a, b = homes("a"), homes("b")
    fa = a.identity.public
    ib = _ready(b)
    s1, _ = _dm(a, [b.identity.public], "the first, long: " + "x" * 300)
    s2, _ = _dm(a, [b.identity.public], "the second")
    b.store.add_feed(fa)
    for s in (s1, s2):        # both entries, but the first one's chain only in part
        b.store.append(fa, s, a.store.entry(fa, s), a.store.mid(fa, s))
    b.store.put_chunk(fa, s1, 0, a.store.chunk(fa, s1, 0))
    for c in range(a.store.chunk_count(fa, s2)):
        b.store.put_chunk(fa, s2, c, a.store.chunk(fa, s2, c))
    assert [p.text for p in ib.refresh()] == ["the second"]
    assert ib.counts()["partial"] == 1
    for c in range(1, a.store.chunk_count(fa, s1)):
        b.store.put_chunk(fa, s1, c, a.store.chunk(fa, s1, c))
    assert [p.text[:9] for p in ib.refresh()] == ["the first"]
    assert "partial" not in ib.counts() and len(ib.due()) == 2
