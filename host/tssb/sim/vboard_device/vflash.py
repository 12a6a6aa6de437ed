"""The virtual board's flash: a file on the host as a block device under LittleFS2, the
filesystem MicroPython's ESP32 port formats its data partition with (4 KB blocks).

The file keeps the board's flash between runs, as the chip does across power cycles.
Erases are counted (`FileBlocks.erases`), as each costs the real chip 45-400 ms.
"""
import os

BLOCK = 4096


class FileBlocks:
    """MicroPython's extended block device protocol over an open file."""

    def __init__(self, f, blocks):
        self.f = f
        self.blocks = blocks
        self.erases = 0

    def readblocks(self, block, buf, offset=0):
        self.f.seek(block * BLOCK + offset)
        self.f.readinto(buf)

    def writeblocks(self, block, buf, offset=None):
        self.f.seek(block * BLOCK + (offset or 0))
        self.f.write(buf)
        self.f.flush()

    def ioctl(self, op, arg):
        if op == 4:             # block count
            return self.blocks
        if op == 5:             # block size
            return BLOCK
        if op == 6:             # erase a block
            self.erases += 1
        return 0


def volume(path, blocks):
    """The LittleFS2 volume in the image file at `path` (formatted when blank)."""
    dev = FileBlocks(open(path, "r+b"), blocks)
    try:
        return os.VfsLfs2(dev)
    except OSError:             # a new (blank) flash: format it, as the ESP32 port does
        os.VfsLfs2.mkfs(dev)
        return os.VfsLfs2(dev)
