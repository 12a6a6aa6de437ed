"""Secure host-to-host sessions: SSB secret handshake, box stream, stream multiplexer.

  session = await connect(host, port, ctx)          # client; ctx = tssb.context.Context
  ch = await session.open_stream("setu")            # a tssb.channel Channel
  await session.close()

  server = await start_server(ctx, host, port)      # dispatches streams to SERVICES

Modules: shs (handshake, sans-IO), boxstream (framing, sans-IO), mux (streams with
credit back-pressure), policy (allow-list, rate and session limits, timeouts), net
(asyncio client and server).
"""
from tssb.session.errors import ProtocolError, StreamRefused
from tssb.session.net import (DEFAULT_PORT, SERVICES, Session, SessionServer, connect,
                              start_server)
from tssb.session.policy import PeerPolicy

__all__ = ["ProtocolError", "StreamRefused", "DEFAULT_PORT", "SERVICES", "Session",
           "SessionServer", "connect", "start_server", "PeerPolicy"]
