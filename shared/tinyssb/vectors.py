"""WANT and CHNK vectors: what a node asks its neighbours for.

    WANT = WANT_DMX || BIPF[offs, s_0, ..., s_k]      s_i: next seq wanted for feed (offs+i) mod N
    CHNK = CHNK_DMX || BIPF[[fidx, seq, cnr], ...]    cnr: first missing chunk of entry seq

No padding, and s_i is the *next wanted* sequence number (max_seq + 1), as every deployed
node does; the seed text pads to 120 bytes and reads the numbers as "have up to". All
numbers are non-negative, so they are decoded unsigned (ESP32/Android write 200 as 0a c8).

Budgets follow the ESP32 builder: stop adding once the encoded elements exceed
VECTOR_BUDGET bytes (the packet then stays below 120).
"""
from tinyssb import bipf
from tinyssb.errors import WireError

VECTOR_BUDGET = 100      # ESP32 repo.cpp: "> 100 bytes" stops the vector
MAX_CHAINS_PER_FEED = 4  # ESP32: at most 4 open side chains per feed in one CHNK
WANT_CREDIT = 5          # entries sent in answer to one WANT (ESP32, Android)
CHNK_CREDIT = 5          # chunks sent in answer to one CHNK (ESP32, Android)
MAX_SEQ = 0xFFFFFFFF     # SEQ is a u32 in NAM
DMX_LEN = 7


def encode_want(dmx, offs, seqs):
    pkt = dmx + bipf.encode([offs] + list(seqs))
    if len(pkt) > 120:
        raise ValueError("WANT longer than 120 bytes")
    return pkt


def decode_want(pkt):
    """Return (offs, [seq, ...]).

    Raises:
        WireError: bad_want when the payload is not a non-empty list of integers.
    """
    v = bipf.decode(memoryview(pkt)[DMX_LEN:], True)
    if type(v) is not list or not v:
        raise WireError("bad_want")
    for x in v:
        if type(x) is not int:
            raise WireError("bad_want")
    return v[0], v[1:]


def encode_chnk(dmx, triplets):
    pkt = dmx + bipf.encode([list(t) for t in triplets])
    if len(pkt) > 120:
        raise ValueError("CHNK longer than 120 bytes")
    return pkt


def decode_chnk(pkt):
    """Return [(fidx, seq, cnr), ...].

    Raises:
        WireError: bad_chnk when the payload is not a list of integer triplets.
    """
    v = bipf.decode(memoryview(pkt)[DMX_LEN:], True)
    if type(v) is not list:
        raise WireError("bad_chnk")
    out = []
    for t in v:
        if type(t) is not list or len(t) != 3:
            raise WireError("bad_chnk")
        for x in t:
            if type(x) is not int:
                raise WireError("bad_chnk")
        out.append((t[0], t[1], t[2]))
    return out


def plan_want(n, offs, next_seq):
    """Choose the feeds of the next WANT.

    Args:
        n: number of feeds (GOSET size); offs: start index; next_seq(i): next wanted seq
        of feed i.
    Returns:
        (seqs, new_offs). The next vector starts right after the last feed included, so a
        truncated vector is continued without gaps (the ESP32 skips one feed there; the
        difference is local: the wire format is the same).
    """
    if n == 0:
        return [], 0
    offs %= n
    seqs = []
    used = 1  # the empty list's tag, as the ESP32 counts
    for i in range(n):
        s = next_seq((offs + i) % n)
        seqs.append(s)
        used += bipf.int_length(s)
        if used > VECTOR_BUDGET:
            break
    k = len(seqs)
    return seqs, (offs + (1 if k == n else k)) % n


def triplet_length(t):
    return 1 + bipf.int_length(t[0]) + bipf.int_length(t[1]) + bipf.int_length(t[2])


def plan_chnk(n, start, open_chains):
    """Choose the triplets of the next CHNK.

    Args:
        n: number of feeds; start: first feed index to consider (the ESP32 starts at a
        random one each time); open_chains(i): list of (seq, cnr) still missing for feed i.
    Returns:
        list of (fidx, seq, cnr).
    """
    out = []
    used = 1
    for j in range(n):
        i = (start + j) % n
        for seq, cnr in open_chains(i)[:MAX_CHAINS_PER_FEED]:
            t = (i, seq, cnr)
            out.append(t)
            used += triplet_length(t)
            if used > VECTOR_BUDGET:
                return out
    return out


def round_robin(requests, fetch, credit):
    """Answer requests one item per request per pass, until credit runs out.

    Args:
        requests: list of (key, first) pairs; fetch(key, k) returns the packet for
        position k of that request, or None when there is nothing more.
        credit: most packets to return.
    Returns:
        list of packets, at most `credit` long.
    """
    out = []
    cursor = [r[1] for r in requests]
    live = list(range(len(requests)))
    while live and len(out) < credit:
        nxt = []
        for j in live:
            if len(out) >= credit:
                break
            p = fetch(requests[j][0], cursor[j])
            if p is None:
                continue
            out.append(p)
            cursor[j] += 1
            nxt.append(j)
        live = nxt
    return out
