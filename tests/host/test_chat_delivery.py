"""Delivery stages (tssb.chat.delivery): what counts as seeing each one, and only that."""
import json

from tssb import ownfeed
from tssb.chat import appmsg, delivery, inbox
from tssb.context import Context


def test_stages_are_only_what_was_observed(tmp_path):
    ctx = Context.open(str(tmp_path / "a"))
    me = ctx.identity.public
    ownfeed.post(ctx, appmsg.tav("one", ts=1))
    ownfeed.post(ctx, appmsg.tav("two", ts=2))
    st = ctx.store
    t = [1000]
    rec = delivery.Recorder(st, me, clock=lambda: t[0])
    assert delivery.stages(st, None, me, 2, since_ms=500) == {"stored": True}
    assert delivery.stages(st, None, me, 3) == {}           # not even stored
    # a neighbour that holds seq 1 asks for 2: it wants our post (after we wrote it)
    rec.saw("air", 1)
    assert delivery.stages(st, None, me, 2, since_ms=500) == {"stored": True,
                                                              "announced": "air"}
    assert "announced" not in delivery.stages(st, None, me, 2, since_ms=5000)   # old news
    assert "announced" not in delivery.stages(st, None, me, 2)     # no time: not claimed
    # the board's event line: it stored seq 2; the neighbour then holds it
    rec.board_line(json.dumps({"event": "append", "feed": me.hex(), "seq": 2}))
    for junk in ("{", "[]", json.dumps({"event": "append", "feed": "00", "seq": 9}),
                 json.dumps({"event": "append", "feed": me.hex(), "seq": "x"})):
        rec.board_line(junk)
    t[0] = 2000
    rec.saw("air", 2)
    got = delivery.stages(st, None, me, 2, since_ms=500)
    assert got == {"stored": True, "board": "board", "announced": "air", "fetched": "air"}
    assert delivery.holders(st, me) == {"board": (2, 1000), "air": (2, 2000)}
    rec.saw("air", 1)                 # an older front never lowers what was seen
    assert delivery.holders(st, me)["air"][0] == 2
    ctx.close()


def test_watch_reports_each_stage_once_and_names_what_is_missing(tmp_path):
    a, b = Context.open(str(tmp_path / "a")), Context.open(str(tmp_path / "b"))
    me, fb = a.identity.public, b.identity.public
    content, _ = appmsg.private_tav(me, [fb], "hello")
    seq = ownfeed.post(a, content)
    ia = inbox.Inbox(a.store, a.identity)
    w = delivery.Watch(a.store, ia, me, seq, 0, [fb], clock=lambda: 7)
    assert w.poll() == [("stored", True, 7)] and w.poll() == []
    assert w.missing() == [("board", None), ("announced", None), ("fetched", None),
                           ("delivered", fb), ("read", fb)]
    # B's DLV arrives in our store
    ib = inbox.Inbox(b.store, b.identity)
    ib.send_receipt(appmsg.DLV, me, a.store.mid(me, seq), lambda c: ownfeed.post(b, c))
    a.store.add_feed(fb)
    a.store.append(fb, 1, b.store.entry(fb, 1), b.store.mid(fb, 1))
    for c in range(b.store.chunk_count(fb, 1)):
        a.store.put_chunk(fb, 1, c, b.store.chunk(fb, 1, c))
    assert w.poll() == [("delivered", fb, 7)]
    assert not w.done() and ("read", fb) in w.missing()
    a.close()
    b.close()
