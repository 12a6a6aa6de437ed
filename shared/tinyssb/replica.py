"""Replica: what a node knows about one feed and what it accepts next.

A replica arms exactly one DMX, the one of entry max_seq + 1 (deployed nodes keep no
out-of-order buffer), and for each entry whose side chain is incomplete, the hash of the
next missing chunk. Everything received is checked against these before it reaches the
store; a reason is raised for anything else.

A replica of a feed the store does not hold yet is provisional (persist=False): it arms
entry 1 but writes nothing until that entry verifies, so feed IDs anyone can announce
(GOSET novelties) never become rows in a store.
"""
from tinyssb import entry
from tinyssb.dmx import entry_dmx
from tinyssb.errors import WireError

MAX_CHAIN_CHUNKS = 1000  # side chains longer than this (100 KB) are not fetched


class Chain:
    """An incomplete side chain: chunks held so far and the hash of the next one."""
    __slots__ = ("n", "cnr", "expect")

    def __init__(self, n, cnr, expect):
        self.n = n
        self.cnr = cnr
        self.expect = expect


class Replica:
    def __init__(self, store, fid, verify, max_chain=MAX_CHAIN_CHUNKS, persist=True):
        self.store = store
        self.fid = bytes(fid)
        self.verify = verify
        self.max_chain = max_chain
        self.chains = {}  # seq -> Chain
        self.stored = persist or store.has_feed(self.fid)
        if not self.stored:
            self.max_seq, self.prev = 0, self.fid[:entry.HASH_LEN]
            self.next_dmx = entry_dmx(self.fid, 1, self.prev)
            return
        store.add_feed(self.fid)
        self.max_seq, self.prev = store.front(self.fid)
        self.next_dmx = entry_dmx(self.fid, self.max_seq + 1, self.prev)
        for seq in range(1, self.max_seq + 1):
            self._open_chain(seq, store.entry(self.fid, seq))

    def _open_chain(self, seq, pkt):
        if pkt[7] != entry.CHAIN20:
            return None
        try:
            info = entry.chain_info(pkt)
        except WireError:
            return None  # a signed entry with a broken length: kept, chain not fetched
        if info.n_chunks == 0 or info.n_chunks > self.max_chain:
            return None
        have = self.store.chunk_count(self.fid, seq)
        if have >= info.n_chunks:
            return None
        expect = info.hptr if have == 0 else bytes(self.store.chunk(self.fid, seq, have - 1)[100:])
        if expect == entry.ZERO_HASH:
            return None  # chain ends early: nothing more can be fetched
        c = Chain(info.n_chunks, have, expect)
        self.chains[seq] = c
        return c

    def add_entry(self, pkt):
        """Check and store the next entry; return (seq, Chain or None).

        Raises:
            WireError: bad_length, bad_dmx, bad_signature.
        """
        seq = self.max_seq + 1
        mid = entry.check(pkt, self.fid, seq, self.prev, self.verify)
        if not self.stored:
            self.store.add_feed(self.fid)
            self.stored = True
        self.store.append(self.fid, seq, pkt, mid)
        self.max_seq = seq
        self.prev = mid
        self.next_dmx = entry_dmx(self.fid, seq + 1, mid)
        return seq, self._open_chain(seq, pkt)

    def add_chunk(self, seq, chunk):
        """Store the next chunk of entry seq; return the Chain if more are missing.

        Raises:
            WireError: unexpected_chunk, bad_chunk_hash.
        """
        c = self.chains.get(seq)
        if c is None:
            raise WireError("unexpected_chunk")
        if len(chunk) != entry.PKT_LEN or entry.chunk_hash(chunk) != c.expect:
            raise WireError("bad_chunk_hash")
        self.store.put_chunk(self.fid, seq, c.cnr, chunk)
        c.cnr += 1
        c.expect = bytes(chunk[100:])
        if c.cnr >= c.n or c.expect == entry.ZERO_HASH:
            del self.chains[seq]
            return None
        return c

    def open_chains(self):
        """[(seq, cnr)] of incomplete side chains, oldest first."""
        return sorted((s, c.cnr) for s, c in self.chains.items())

    def chunk_for(self, seq, cnr):
        """Chunk cnr of entry seq if held (for answering CHNK)."""
        return self.store.chunk(self.fid, seq, cnr)

    def append_local(self, pkt, mid, chunks):
        """Append an entry this node authored (already signed, with its whole chain)."""
        if not self.stored:
            self.store.add_feed(self.fid)
            self.stored = True
        seq = self.max_seq + 1
        self.store.append(self.fid, seq, pkt, mid)
        for i, c in enumerate(chunks):
            self.store.put_chunk(self.fid, seq, i, c)
        self.max_seq = seq
        self.prev = mid
        self.next_dmx = entry_dmx(self.fid, seq + 1, mid)
        return seq
