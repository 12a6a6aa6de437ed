"""SETU: byzantine fault-tolerant set union (draft-summermatter-set-union-01), GNUnet-compatible
hashing plus the fixed `tssb2` profile. See docs/setu.md.

Modules: profiles (IDs, hashes, mapping), ibf, strata, messages (wire), policy (mode, bounds),
setstate (incremental set), machine (sans-IO state machine), driver (asyncio over a Channel),
service (`tssb serve` stream "setu"), tinyssb_elements (store adapter).
"""
from .errors import SetuError  # noqa: F401
