"""UDP multicast port: tinySSB packets as `packet || CRC32` datagrams on 239.5.5.8:1558,
as deployed ESP32 nodes and the Python pub use them (tinyssb.frames).
"""
import asyncio
import collections
import socket
import struct

from tinyssb import frames
from tinyssb.errors import WireError

GROUP = "239.5.5.8"
PORT = 1558
# Our own datagrams come back with IP_MULTICAST_LOOP; remember this many recent ones to
# skip them (dropping a peer's identical packet loses nothing: we hold it already).
ECHO_MEMORY = 64


class UdpPort(asyncio.DatagramProtocol):
    def __init__(self, hostnode, group, port):
        self.hostnode = hostnode
        self.name = "udp:%s:%d" % (group, port)
        self.dest = (group, port)
        self.transport = None
        self.recent = collections.OrderedDict()
        self.counts = {"rx": 0, "tx": 0, "echo": 0, "bad": 0, "err": 0}

    def connection_made(self, transport):
        self.transport = transport

    def send(self, pkt):
        try:
            f = frames.add_crc(pkt)
        except WireError:
            return
        self.recent[f] = True
        if len(self.recent) > ECHO_MEMORY:
            self.recent.popitem(last=False)
        if self.transport is not None:
            self.transport.sendto(f, self.dest)
            self.counts["tx"] += 1

    def error_received(self, exc):
        # A send or receive failed (no route, buffer full): count it; the next
        # advertisement goes out on its own schedule.
        self.counts["err"] += 1

    def datagram_received(self, data, addr):
        if data in self.recent:
            self.counts["echo"] += 1
            return
        try:
            pkt = frames.strip_crc(data)
        except WireError:
            self.counts["bad"] += 1
            return
        self.counts["rx"] += 1
        self.hostnode.receive(pkt, self, {"src": "%s:%d" % addr[:2]})


def multicast_socket(group=GROUP, port=PORT, iface="0.0.0.0", loop=True):
    """A UDP socket joined to `group` on `iface` (IPv4 address of the interface)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if hasattr(socket, "SO_REUSEPORT"):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.bind(("", port))
    mreq = socket.inet_aton(group) + socket.inet_aton(iface)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(iface))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1 if loop else 0)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, struct.pack("b", 1))
    s.setblocking(False)
    return s


async def open_multicast(hostnode, group=GROUP, port=PORT, iface="0.0.0.0"):
    """Join the group and attach a UdpPort to the host node. Returns the port."""
    loop = asyncio.get_running_loop()
    sock = multicast_socket(group, port, iface)
    _, proto = await loop.create_datagram_endpoint(
        lambda: UdpPort(hostnode, group, port), sock=sock)
    hostnode.attach(proto)
    return proto
