"""Pure decision functions: operation mode (draft 7.1.1), byzantine bounds (8.1.2) and the
full-synchronisation plausibility check (8.1.6)."""
import math

from . import constants as C
from .ibf import max_buckets_per_message

FULL_LOCAL_FIRST = "full_local_first"
FULL_REMOTE_FIRST = "full_remote_first"
DIFFERENTIAL = "differential"


def decide_operation_mode(avg_es, lss, rss, lsd, rsd, rtt=C.RTT_BANDWIDTH_TRADEOFF):
    """Cheapest mode by the draft's cost model (Figure 34), with our message sizes.

    Args:
        avg_es: average element size in bytes; lss/rss: local/remote set sizes;
        lsd/rsd: estimated local-only / remote-only differences; rtt: bytes per round trip.
    Returns:
        FULL_LOCAL_FIRST, FULL_REMOTE_FIRST or DIFFERENTIAL.
    """
    if rss == 0:
        return FULL_LOCAL_FIRST
    if lss == 0:
        return FULL_REMOTE_FIRST
    semh = C.FULL_ELEMENT_MSG_HEADER
    total = rsd + lsd
    local_send = rsd + lss
    cost_local = (avg_es * local_send + local_send * semh + 2 * C.DONE_MSG_SIZE
                  + C.RTT_MIN_FULL * rtt)
    remote_send = lsd + rss
    cost_remote = (avg_es * remote_send + remote_send * semh + 2 * C.DONE_MSG_SIZE
                   + (C.RTT_MIN_FULL + 0.5) * rtt + C.REQUEST_FULL_MSG_SIZE)
    buckets = max(C.IBF_MIN_SIZE, total * C.IBF_FACTOR)
    # Counter bits: the draft's estimate, clamped to the 1..64 we can send.
    bits = min(2 * math.log2(max(lss / buckets, 1.0)), math.log2(max(lss, 2)))
    bits = min(64, max(1, int(math.ceil(bits))))
    per_msg = max_buckets_per_message(bits, C.IBF_MSG_HEADER)
    ibf_msgs = math.ceil(buckets / per_msg)
    ibf_bytes = (C.IBF_MSG_HEADER * ibf_msgs + buckets * (C.KEY_SIZE + C.KEYHASH_SIZE)
                 + buckets * bits / 8)
    diff_cost = ((avg_es + C.ELEMENT_MSG_HEADER) * total + C.DONE_MSG_SIZE
                 + (C.KEY_SIZE + C.INQUIRY_MSG_HEADER) * total
                 + (C.HASH_SIZE + C.DEMAND_MSG_HEADER) * total
                 + (C.HASH_SIZE + C.OFFER_MSG_HEADER) * total
                 + ibf_bytes * C.RETRY_OVERHEAD + C.DIFFERENTIAL_RTT_MEAN * rtt)
    if min(cost_local, cost_remote) < diff_cost:
        return FULL_LOCAL_FIRST if cost_remote > cost_local else FULL_REMOTE_FIRST
    return DIFFERENTIAL


def check_byzantine_bounds(rec, rsd, lec, lsd, lower, upper):
    """Draft Figure 38: True when the sizes and estimated differences are within bounds."""
    if rec + rsd > upper or lec + lsd > upper:
        return False
    return rec >= lower


PLAUSIBILITY_Z = 13.0   # normal tail beyond 13 sigma is below 2^-80 (SECURITY_LEVEL)


def full_sync_plausible(receiving, rs, lis, rd, rf):
    """Draft Figure 40, one-sided and with a noise allowance.

    Args:
        receiving: True in FULL_RECEIVING, False in FULL_SENDING.
        rs: number of fresh elements the peer is bound to deliver (at least 1);
        lis: local set size before the transfer; rd/rf: duplicates/fresh received so far.
    Returns:
        False when the stream is implausible.

    The draft's `IF 0 <= rs THEN rs = 1` is read as `rs <= 0`. Its value
    (rd - rf*lis/rs) * log2(1 - rs/(lis+rs)) has mean 0 for an honest sender in random order,
    but its spread grows like 1.44*sqrt(fresh elements), so a fixed -80 cut aborts honest
    transfers of a few thousand fresh elements. We accept down to -(80 + 13 standard
    deviations); only the negative side (more duplicates than the claimed difference allows)
    aborts, as more fresh elements than estimated is what an honest under-estimate gives.
    Honest senders stream their set in hash order, which is random relative to ours.
    """
    if not receiving:
        return rd == 0
    rs = max(rs, 1)
    if lis == 0:
        return True
    q = rs / (lis + rs)
    lg = math.log2(1.0 - q) if q < 1 else -64.0
    exponent = rd - rf * lis / rs
    value = exponent * lg
    sd = math.sqrt((rd + rf) * (1.0 - q) / q)
    return value >= -(C.SECURITY_LEVEL + PLAUSIBILITY_Z * abs(lg) * sd)
