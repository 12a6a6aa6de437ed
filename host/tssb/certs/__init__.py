"""Merkle feed certificates (issue 9; spec ../shared/specs/feed-merkle-certificates.txt).

Logarithmic proofs that an entry belongs to a feed's signed history, and fork proofs.

Modules:
  flattree      flat-tree (Dat/Hypercore) numbering of the tree nodes: pure functions
  hashing       SHA-256/20 leaf, node and bridge hashes; the bytes a record signs
  keys          signature schemes (Ed25519; a keyed hash for fast tests)
  records       the hashes published and signed with each entry (the extension stream)
  recordstore   records in memory or in SQLite next to the host store
  certlog       a certified feed: certify / ingest records, make certificates
  certificate   certificate format, builder and verifier (bridging, compact, anchored)
  forks         consistency of two certificates, fork proofs
  service       the "certs" stream of host sessions (fetch certificates and records)
"""
from tssb.certs.certificate import Certificate, Verified, verify
from tssb.certs.certlog import CertLog
from tssb.certs.errors import CertError
from tssb.certs.forks import ForkProof, compare, verify_proof
from tssb.certs.recordstore import MemRecords, SqliteRecords

__all__ = ["Certificate", "Verified", "verify", "CertLog", "CertError", "ForkProof",
           "compare", "verify_proof", "MemRecords", "SqliteRecords"]
