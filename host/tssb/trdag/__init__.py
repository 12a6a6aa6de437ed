"""trDAG: set replication trees for one application DAG (a tangle) between two hosts.

  message   DAG messages in tinySSB feeds (BIPF payload in chain20 entries) and the
            self-validating element that carries one between hosts
  dagstore  the DAG index (memory or SQLite) and admission: a message enters only when
            every message it references is known
  forest    the replication forest: depth ranges, binary decomposition, descent
  wire      frames of the sync protocol
  session   the sans-IO sync state machine (basic walk, multi-level variant, naive)
  driver    the asyncio driver over a tssb.channel Channel
  service   `serve(channel, ctx, peer)` for the session server ("trdag" stream)
"""
from tssb.trdag.errors import TrdagError  # noqa: F401
