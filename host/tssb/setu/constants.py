"""Named protocol constants, each with its source.

"draft" = draft-summermatter-set-union-01, "GNUnet" = gnunet-service-setu.c / ibf.c as read
in ../shared/reference/set-reconciliation.md section 1.
"""

# Message types (draft section 10, GANA).
MSG_REQUEST_FULL = 559
MSG_DEMAND = 560
MSG_INQUIRY = 561
MSG_OFFER = 562
MSG_OPERATION_REQUEST = 563
MSG_SE = 564
MSG_IBF = 565
MSG_ELEMENTS = 566
MSG_IBF_LAST = 567
MSG_DONE = 568
MSG_SEC = 569
MSG_FULL_DONE = 570
MSG_FULL_ELEMENT = 571
MSG_SEND_FULL = 710

MSG_NAMES = {
    MSG_REQUEST_FULL: "REQUEST_FULL", MSG_DEMAND: "DEMAND", MSG_INQUIRY: "INQUIRY",
    MSG_OFFER: "OFFER", MSG_OPERATION_REQUEST: "OPERATION_REQUEST", MSG_SE: "SE",
    MSG_IBF: "IBF", MSG_ELEMENTS: "ELEMENT", MSG_IBF_LAST: "IBF_LAST", MSG_DONE: "DONE",
    MSG_SEC: "SEC", MSG_FULL_DONE: "FULL_DONE", MSG_FULL_ELEMENT: "FULL_ELEMENT",
    MSG_SEND_FULL: "SEND_FULL", 7400: "RL_REQUEST", 7401: "RL",
}

MAX_MESSAGE_SIZE = 65535        # 16-bit MSG SIZE field (draft 6.x); GNUnet's IBF slices overflow it
HEADER_SIZE = 4                 # MSG SIZE (u16 BE) + MSG TYPE (u16 BE)
HASH_SIZE = 64                  # SHA-512 element hash (draft 6.5)
KEY_SIZE = 8                    # IBF key / IDSUM (draft 3.6)
KEYHASH_SIZE = 4                # HASHSUM (draft 3.6)
IBF_BUCKET_SIZE = 20            # GNUnet ibf.h: 8 + 4 + 8 bytes per bucket in its (unpacked) layout

IBF_HASH_NUM = 3                # k, draft 7.1.3 / section 9
IBF_FACTOR = 2                  # draft 7.1.2 / section 9
IBF_MIN_SIZE = 37               # draft 7.1.2; GNUnet IBF_MIN_SIZE
MAX_IBF_SIZE = 1 << 20          # draft section 9 MAX_IBF_SIZE; GNUnet MAX_IBF_SIZE
SE_STRATA_COUNT = 32            # draft section 9
SE_IBF_SIZE = 79                # draft 6.12 ("always 79 buckets"); GNUnet ibf_prime_sizes
SE_COUNTER_BITS = 8             # GNUnet strata estimator writes 8-bit counters
AVG_BYTE_SIZE_SE = 4221         # draft section 9 / GNUnet: SE-count rule base (7.3)
VALID_SE_COUNTS = (1, 2, 4, 8)  # draft section 9
MAX_ROLE_SWAPS = 30             # draft 8.1.5: "MUST impose a maximum of 30"
SECURITY_LEVEL = 80             # draft 8.1.6 (2^80)
DIFFERENTIAL_RTT_MEAN = 3.65145  # draft 7.1.1 / section 9
RTT_MIN_FULL = 2                # draft 7.1.1
RETRY_OVERHEAD = 1.2            # draft 7.1.1: "+20% to cover IBF retries"

# Fixed message sizes used by the 7.1.1 cost model (our wire layouts, messages.py).
ELEMENT_MSG_HEADER = 10         # header + etype + padding + esize
FULL_ELEMENT_MSG_HEADER = 12    # + ae type
DONE_MSG_SIZE = HEADER_SIZE + HASH_SIZE
REQUEST_FULL_MSG_SIZE = 16
IBF_MSG_HEADER = 16
INQUIRY_MSG_HEADER = 8
OFFER_MSG_HEADER = HEADER_SIZE
DEMAND_MSG_HEADER = HEADER_SIZE

MAX_ELEMENT_SIZE = MAX_MESSAGE_SIZE - FULL_ELEMENT_MSG_HEADER
MAX_APP_DATA = 1024             # our limit for OPERATION_REQUEST application data
RTT_BANDWIDTH_TRADEOFF = 0.25   # bytes charged per round trip in 7.1.1 (our default; configurable)

# Profiles (agreed in the OPERATION_REQUEST application data).
PROFILE_GNUNET = 0              # GNUnet-compatible hashing, mapping and decode order
PROFILE_TSSB2 = 1               # non-linear check hash, linear decoder, foldable IBFs
PROFILE_RATELESS = 2            # rateless coded symbols instead of estimator + IBF (rateless.py)
PROFILE_NAMES = {PROFILE_GNUNET: "gnunet", PROFILE_TSSB2: "tssb2", PROFILE_RATELESS: "rateless"}

# The rateless profile's two message types, outside GNUnet's SETU range (559-571, 710).
# RL_REQUEST opens the operation in place of the OPERATION_REQUEST (rateless.py: version,
# a 4-byte application tag, the element count, then the first RL message's flags and
# sections); RL carries every later flight. A GNUnet peer never speaks our sessions and
# never receives either; an OPERATION_REQUEST proposing the profile is refused.
MSG_RL_REQUEST = 7400
MSG_RL = 7401
