# A banned feed (a host's blocked author): never replicated, never back in the GOSET.
from tinyssb.bus import Bus
from tinyssb.node import Node
from tinyssb.store import MemStore
from support import FAST, Rand, identity, make_node


def _authored(who, n):
    node = make_node(identity(who), rand_seed=who)
    for i in range(n):
        node.post(b"post %d from %d" % (i, who))
    return node


def test_a_banned_feed_is_never_learned_or_fetched():
    a, spam = _authored(1, 3), _authored(2, 3)
    fa, fs = a.author.fid, spam.author.fid
    r = Rand(3)
    b = Node(MemStore(), timing=FAST, rand=r.below, banned=[fs])
    bus = Bus([a, spam, b])
    bus.run(120000, 100, stop=lambda: b.store.has_feed(fa) and b.store.front(fa)[0] == 3)
    assert b.store.front(fa)[0] == 3
    assert fs not in b.goset and fs not in b.replicas and not b.store.has_feed(fs)
    assert b.goset.add(fs) is False


def test_ban_drops_a_feed_held_and_unban_takes_it_again():
    a, c = _authored(1, 2), _authored(5, 2)
    b = make_node(rand_seed=4)
    bus = Bus([a, c, b])
    fa, fc = a.author.fid, c.author.fid
    bus.run(120000, 100, stop=lambda: all(
        b.store.has_feed(f) and b.store.front(f)[0] == 2 for f in (fa, fc)))
    assert fc in b.goset and fc in b.replicas
    b.ban(fc)
    assert fc not in b.goset and fc not in b.replicas
    assert fc in b.goset.banned
    c.post(b"more from c")
    bus.run(bus.now + 20000, 100)
    assert fc not in b.goset and b.store.front(fc)[0] == 2     # nothing more fetched
    b.unban(fc)
    assert b.goset.add(fc) is True
