"""`tssb mute FEED`: hide an author's posts from chats (kept and relayed); see tssb.cli.block."""
from tssb.cli.block import make_register
from tssb.store import MUTE

register = make_register(MUTE)
