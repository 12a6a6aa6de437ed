"""Host bridge and gateway: the host's tinySSB node over the SQLite store, reachable over
USB serial (a board, framed with tinyssb.link), WebSocket (one binary message per packet)
and UDP multicast 239.5.5.8:1558 (packet + CRC32).

  hostnode   HostNode: tinyssb.node.Node over tssb.store.Store, driven by asyncio, fanning
             its packets out to every attached port
  ports      serial port auto-detection by USB VID/PID
  serial_link  SerialLink: pyserial without resetting the board, reconnects after unplug
  websocket  WebSocket server and client ports
  udp        UDP multicast port
"""
