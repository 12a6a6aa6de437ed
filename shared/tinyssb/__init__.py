"""tinySSB protocol core: pure Python for CPython and MicroPython (sans-IO).

Modules:
  bipf       BIPF encode/decode (tinySSB integer forms)
  hotloops   XOR of keys and CRC32 (viper on boards, plain elsewhere)
  frames     link framing: packet || CRC32 (LoRa, UDP)
  dmx        DMX values for GOSET, WANT, CHNK and log entries
  ed25519    pure-Python Ed25519 (boards); crypto picks PyNaCl when present
  entry      120-byte log entries, side chains (chain20), MIDs
  aggregate  (count, XOR) aggregates
  goset      GOSET claim/novelty protocol
  vectors    WANT and CHNK vectors
  replica    per-feed replica state: next DMX, expected chunk hashes
  store      store interface and the in-memory store
  node       the sans-IO Node: on_packet(bytes, now) / tick(now) -> packets
"""

VERSION = "0.1.0"
