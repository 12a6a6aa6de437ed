"""DMX (demultiplexing) values: the first 7 bytes of every tinySSB packet.

Three kinds, as deployed (docs/interop.md):
  constant   SHA256(ascii)[0:7], no prefix        GOSET
  keyed      SHA256("tinyssb-v0" || tag || GOSET state)[0:7]   WANT ("want"), CHNK ("blob")
  log entry  SHA256(NAM)[0:7], NAM = "tinyssb-v0" || FID || SEQ (u32 big-endian) || PREV
The network key of the deployed nodes is the empty string, so it adds nothing here.
"""
from hashlib import sha256

DMX_LEN = 7
PFX = b"tinyssb-v0"
GOSET_STR = b"tinySSB-0.1 GOset 1"
WANT_TAG = b"want"
CHNK_TAG = b"blob"  # "historic": the deployed nodes use "blob" for chunk requests

GOSET_DMX = sha256(GOSET_STR).digest()[:DMX_LEN]


def keyed(data):
    return sha256(PFX + data).digest()[:DMX_LEN]


def want_dmx(goset_state):
    return keyed(WANT_TAG + goset_state)


def chnk_dmx(goset_state):
    return keyed(CHNK_TAG + goset_state)


def nam(fid, seq, prev):
    """The 66-byte name of log entry `seq` of feed `fid` whose predecessor's MID is `prev`."""
    return PFX + fid + seq.to_bytes(4, "big") + prev


def entry_dmx(fid, seq, prev):
    return sha256(nam(fid, seq, prev)).digest()[:DMX_LEN]
