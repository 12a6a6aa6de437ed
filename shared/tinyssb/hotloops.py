"""Hot loops of the core: XOR of keys and CRC32.

On MicroPython with a native emitter these are `@micropython.viper` functions; elsewhere
(CPython, or a port without viper) the plain versions below are used. Both give identical
results; tests compare them byte for byte. Viper ints are machine words (32 bits on the
ESP32, 64 on the unix port), so the CRC keeps every intermediate masked to 32 bits.

  xor_into(acc, data)  acc[i] ^= data[i] for i < len(acc); acc is a bytearray, data at
                       least as long
  xor_bytes(a, b)      new bytes a ^ b (equal lengths)
  xor_into_at(acc, off, data)  acc[off + i] ^= data[i] for i < len(data) (coded symbols)
  crc32(data, crc=0)   CRC-32 (IEEE 802.3 / zlib: reflected poly 0xEDB88320), chainable
"""

_POLY = 0xEDB88320


def _make_table():
    t = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        t.append(c)
    return t


_TABLE = _make_table()


def xor_into_plain(acc, data):
    for i in range(len(acc)):
        acc[i] ^= data[i]


def xor_into_at_plain(acc, off, data):
    for i in range(len(data)):
        acc[off + i] ^= data[i]


def crc32_plain(data, crc=0):
    crc ^= 0xFFFFFFFF
    t = _TABLE
    for b in data:
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


try:
    import micropython

    # array('I') gives a ptr32-readable copy of the table for the viper CRC.
    from array import array as _array
    _TABLE32 = _array("I", _TABLE)

    @micropython.viper
    def _xor_viper(acc: ptr8, data: ptr8, n: int):
        i = 0
        while i < n:
            acc[i] = acc[i] ^ data[i]
            i += 1

    @micropython.viper
    def _crc_viper(data: ptr8, n: int, crc: uint, table: ptr32) -> uint:
        c = crc ^ uint(0xFFFFFFFF)
        i = 0
        while i < n:
            c = uint(table[(c ^ uint(data[i])) & 0xFF]) ^ ((c >> 8) & uint(0x00FFFFFF))
            i += 1
        return c ^ uint(0xFFFFFFFF)

    @micropython.viper
    def _xor_at_viper(acc: ptr8, off: int, data: ptr8, n: int):
        i = 0
        while i < n:
            acc[off + i] = acc[off + i] ^ data[i]
            i += 1

    def xor_into(acc, data):
        if len(data) < len(acc):
            raise ValueError("xor operand too short")
        _xor_viper(acc, data, len(acc))

    def xor_into_at(acc, off, data):
        if off < 0 or off + len(data) > len(acc):
            raise ValueError("xor outside the buffer")
        _xor_at_viper(acc, off, data, len(data))

    def crc32(data, crc=0):
        return _crc_viper(data, len(data), crc & 0xFFFFFFFF, _TABLE32) & 0xFFFFFFFF

    VIPER = True
except (ImportError, SyntaxError, NameError):
    # CPython: zlib's C implementation is the same CRC and far faster than Python loops.
    try:
        from zlib import crc32 as _zcrc

        def crc32(data, crc=0):
            return _zcrc(data, crc) & 0xFFFFFFFF
    except ImportError:
        crc32 = crc32_plain

    def xor_into(acc, data):
        if len(data) < len(acc):
            raise ValueError("xor operand too short")
        n = len(acc)
        v = int.from_bytes(acc, "big") ^ int.from_bytes(bytes(data[:n]), "big")
        acc[:] = v.to_bytes(n, "big")

    def xor_into_at(acc, off, data):
        n = len(data)
        if off < 0 or off + n > len(acc):
            raise ValueError("xor outside the buffer")
        v = int.from_bytes(acc[off:off + n], "big") ^ int.from_bytes(data, "big")
        acc[off:off + n] = v.to_bytes(n, "big")

    VIPER = False


def xor_bytes(a, b):
    if len(a) != len(b):
        raise ValueError("xor of unequal lengths")
    acc = bytearray(a)
    xor_into(acc, b)
    return bytes(acc)
