# Helpers shared by the core tests (CPython and MicroPython alike).
from tinyssb.bus import Bus, same_stores
from tinyssb.node import Node
from tinyssb.store import MemStore


def identity(i):
    """A deterministic key pair for test author i."""
    from tinyssb import crypto
    seed = bytes([i & 0xFF]) * 31 + bytes([(i >> 8) & 0xFF])
    return seed, crypto.publickey(seed)


class Rand:
    """Small deterministic generator (same sequence on every interpreter)."""

    def __init__(self, seed):
        self.x = seed & 0xFFFFFFFF or 1

    def next(self):
        x = self.x
        x ^= (x << 13) & 0xFFFFFFFF
        x ^= x >> 17
        x ^= (x << 5) & 0xFFFFFFFF
        self.x = x
        return x

    def below(self, n):
        return self.next() % n if n > 1 else 0

    def bytes(self, n):
        return bytes(self.next() & 0xFF for _ in range(n))

    def key(self):
        """A 32-byte key. Unlike bytes(32), keys from this are not linear in the
        generator's 32-bit state (xorshift is linear over GF(2): its outputs span at most
        32 dimensions, and XOR-based set algebra would see dependent keys)."""
        from hashlib import sha256
        return sha256(self.bytes(8)).digest()


FAST = {"claim": (100, 2000, 0), "goset": (200, 500, 100),
        "want": (300, 400, 100), "chnk": (400, 400, 100)}


def make_node(identity_=None, rand_seed=1, store=None, timing=FAST):
    r = Rand(rand_seed)
    return Node(store or MemStore(), identity=identity_, timing=timing, rand=r.below)


def converge(nodes, until=600000, step=100, links=None):
    bus = Bus(nodes, links=links)
    t = bus.run(until, step, stop=lambda: same_stores(nodes))
    return bus, t
