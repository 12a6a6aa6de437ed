"""A certified feed: the extension stream of records kept alongside a feed's entries.

`CertLog` ties one feed (FID) to a record backend (recordstore.py). The author extends it
from the feed store as entries are appended (`certify`); a replica takes the author's
records (`ingest`), each checked against the entries it already holds, so it can serve
certificates for that feed too. Certificates come out of `certificate`.
"""
from tssb.certs import certificate as certmod
from tssb.certs import flattree
from tssb.certs.errors import CertError
from tssb.certs.hashing import HASH_LEN, h
from tssb.certs.keys import ED25519
from tssb.certs.records import Record, compute_hashes

_PFX = b"tinyssb-v0"


def entry_mid(fid, seq, prev, pkt):
    """MID of a tinySSB entry: SHA256(NAM || PKT)[0:20] (reference/tinyssb-wire.md 3.2)."""
    return h(_PFX + bytes(fid) + seq.to_bytes(4, "big") + bytes(prev) + bytes(pkt))


class CertLog:
    """The certificate records of one feed.

    Args:
        records: backend (recordstore.MemRecords or SqliteRecords).
        fid: the 32-byte feed id (the key that signs the records).
        scheme: signature scheme (keys.ED25519; keys.KeyedHash in fast tests).
    """

    def __init__(self, records, fid, scheme=ED25519):
        if len(fid) != 32:
            raise ValueError("fid must be 32 bytes")
        self.records = records
        self.fid = bytes(fid)
        self.scheme = scheme

    def front(self):
        """Highest certified entry (0 if none)."""
        return self.records.front(self.fid)

    def record(self, seq):
        """Record of entry seq. Raises: CertError no_record."""
        rec = self.records.get(self.fid, seq)
        if rec is None:
            raise CertError("no_record", "entry %d of feed %s is not certified"
                            % (seq, self.fid.hex()[:16]))
        return rec

    def node(self, i):
        """Value of tree node i (flat index): hash<depth> of the entry ending its span."""
        d = ((i ^ (i + 1)).bit_length()) - 1       # flattree.depth, inlined (hot)
        last = (((i >> (d + 1)) + 1) << d) - 1     # flattree.leaf_span(i)[1]
        return self.record(last + 1).hashes[d]

    def mid(self, seq):
        """MID of entry seq, or the genesis PREV (FID[0:20]) for seq 0."""
        return self.fid[:HASH_LEN] if seq == 0 else self.record(seq).hashes[0]

    def _make(self, seq, mid, sign):
        hashes, bridge = compute_hashes(seq, mid, self.node)
        rec = Record(seq, hashes, bridge, None)
        rec.sig = sign(rec.message(self.fid))
        return rec

    def append(self, seq, mid, seed):
        """Certify entry seq (must be front + 1) with the feed's secret seed.

        Returns:
            Record.
        """
        if seq != self.front() + 1:
            raise CertError("out_of_order", "entry %d after %d" % (seq, self.front()))
        rec = self._make(seq, mid, lambda m: self.scheme.sign(seed, m))
        self.records.put(self.fid, rec)
        return rec

    def certify(self, store, seed, batch=1024, progress=None):
        """Certify every entry of the feed store not yet certified.

        Args:
            store: feed store (tinyssb.store interface) holding this feed.
            seed: the feed's 32-byte secret seed (only the author can certify).
            batch: records written per transaction.
            progress: optional function(done, total).
        Returns:
            number of entries certified.
        Raises:
            CertError: wrong_key (seed is not this feed's key), missing_entry.
        """
        if self.scheme.public(seed) != self.fid:
            raise CertError("wrong_key", "the seed does not belong to this feed")
        start = self.front()
        top = store.front(self.fid)[0] if store.has_feed(self.fid) else 0
        pending = []
        prev = self.mid(start)
        cache = {}
        # node() must see records of this batch before they are written
        base_node = self.node

        def node(i):
            last = flattree.leaf_span(i)[1] + 1
            rec = cache.get(last)
            return rec.hashes[flattree.depth(i)] if rec else base_node(i)
        for seq in range(start + 1, top + 1):
            pkt = store.entry(self.fid, seq)
            if pkt is None:
                raise CertError("missing_entry", seq)
            mid = entry_mid(self.fid, seq, prev, pkt)
            hashes, bridge = compute_hashes(seq, mid, node)
            rec = Record(seq, hashes, bridge, None)
            rec.sig = self.scheme.sign(seed, rec.message(self.fid))
            pending.append(rec)
            cache[seq] = rec
            prev = mid
            if len(pending) >= batch or seq == top:
                self.records.put_many(self.fid, pending)
                pending = []
                cache.clear()
                if progress:
                    progress(seq - start, top - start)
        return max(0, top - start)

    def ingest(self, record, pkt):
        """Take the author's record for the next entry, checking it completely.

        Args:
            record: Record (front + 1). pkt: the 120-byte entry it certifies.
        Raises:
            CertError: out_of_order, bad_record (hashes differ from the ones computed
                from the entry and earlier records), bad_signature.
        """
        seq = record.seq
        if seq != self.front() + 1:
            raise CertError("out_of_order", "record %d after %d" % (seq, self.front()))
        mid = entry_mid(self.fid, seq, self.mid(seq - 1), pkt)
        hashes, bridge = compute_hashes(seq, mid, self.node)
        if hashes != list(record.hashes) or bridge != record.bridge:
            raise CertError("bad_record", "hashes of entry %d do not match" % seq)
        if not self.scheme.verify(self.fid, record.message(self.fid), record.sig):
            raise CertError("bad_signature", "record %d" % seq)
        self.records.put(self.fid, record)

    def default_anchor(self, seq):
        """The compact anchor (next power of two) if certified that far, else seq itself."""
        p = certmod.next_pow2(seq)
        return p if p <= self.front() else seq

    def certificate(self, store, seq, anchor=None):
        """Certificate for entry seq relative to `anchor` (default: default_anchor).

        Args:
            store: feed store holding the entry.
        Returns:
            certificate.Certificate.
        Raises:
            CertError: bad_range, no_record, missing_entry.
        """
        if anchor is None:
            anchor = self.default_anchor(seq)
        certmod.layout(seq, anchor)
        if anchor > self.front():
            raise CertError("no_record", "anchor %d beyond certified front %d"
                            % (anchor, self.front()))
        pkt = store.entry(self.fid, seq)
        if pkt is None:
            raise CertError("missing_entry", seq)
        return certmod.build(self.fid, seq, anchor, pkt, self.mid(seq - 1), self.node,
                             self.record)
