# SHA-512 (FIPS 180-4) known answers for the pure implementation; runs under pytest and
# under MicroPython (tools/mptest.py): plain functions and asserts only.
import sys

from tinyssb import sha512
from tinyssb.sha512 import SHA512

MICROPYTHON = sys.implementation.name == "micropython"


def _hex(b):
    return "".join("%02x" % x for x in b)


# FIPS 180-2 appendix C / NIST example values.
FIPS = (
    (b"abc",
     "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a"
     "2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f"),
    (b"",
     "cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce"
     "47d0d13c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e"),
    (b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
     "204a8fc6dda82f0a0ced7beb8e08a41657c16ef468b228a8279be331a703c335"
     "96fd15c13b1b07f9aa1d3bea57789ca031ad85c7a71dd70354ec631238ca3445"),
    # 896-bit message: two blocks after padding.
    (b"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno"
     b"ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
     "8e959b75dae313da8cf4f72814fc143f8f7779c6eb9f7fa17299aeadb6889018"
     "501d289e4900f7e4331b99dec4b5433ac7d329eeb6dd26545e96e55b874be909"),
)

# Padding edges (FIPS 180-4 5.1.2: 0x80 + 128-bit length needs 17 bytes, so 111 bytes
# still fit one block and 112 need a second). Message of length n is
# bytes((7*i + n) & 0xff for i in range(n)); digests from OpenSSL's SHA-512.
EDGES = (
    (1, "7b54b66836c1fbdd13d2441d9e1434dc62ca677fb68f5fe66a464baadecdbd00"
        "576f8d6b5ac3bcc80844b7d50b1cc6603444bbe7cfcf8fc0aa1ee3c636d9e339"),
    (111, "df79e18538ec82120d0eb59f92ade93fc786e47b5c622121a065503708882f78"
          "01fa4b115197504b74feb420ee58fb85718ab98a5bf461bf7f8897472c26be4d"),
    (112, "d7377bc7047400daa33483946a6e2ec47609bc5f64b8309effd8d38b764b6ef2"
          "50086511cc4cc9b4e5806613ecdf2a7b86ffcf0b9c88a571b869b32dfeca4b0a"),
    (113, "69a127d193a5bd3239535d093dc71c32c34df13d2b1982a7f46035a1f8a98430"
          "8cd559257dbde17c8ddd8299bee7018b832e45c47ec7135055176579797c40bd"),
    (127, "82b7fc0e1e5d1bb8e56e25cef83ba1205d3b3b44c9efacb33b11b13ffc47d150"
          "2beb4b9cc885239d9a03a255757c582ee9aaa270c742f8bfd959228443704bf5"),
    (128, "eb5119a4c3e176a3e0cb2bf8a6237bdc1e474f9f501f27c84284d2289b1ade3a"
          "5a1913236a2b771e0f435f2a9b17792eb23eb92248a199f991228ff65de55d09"),
    (129, "06e68bf71185b1fda1d64bc8dc221aeaa9040b40d202d6030f840940ff2e5300"
          "56550e68bd5d7a68d6fcf910077cd5b6c0befa877a436ddae766dd278592d2b6"),
    (239, "511f3b02317c383e27eb7064cc6e1d721d2c0ffd7efb5cb70647f0655ea93288"
          "052d566892f4a1b14342adf14f96740e7433346b58d521d84fa8bcfae11ca9f8"),
    (240, "774d6a1206485a1c2342cfddc586d2b0af9e78f4ed95b69ff18bf6fa3ecbe59f"
          "d7ae11bdc5afd460f44fd84b5af08016e8986b0474d1515148ef9d8068e8dede"),
    (256, "ca6e7d0c2e4ae8774b65b1353a44154f9858ff2c6eb8c50c645eb37b39e37ad9"
          "8184883dddacf1557a791307ad592e31e9d824c2c3e2da33b0f5e5a90d779316"),
)


def _edge_msg(n):
    return bytes((7 * i + n) & 0xFF for i in range(n))


def test_fips_vectors_pure():
    for msg, want in FIPS:
        assert SHA512(msg).hexdigest() == want, msg


def test_padding_edge_lengths_pure():
    for n, want in EDGES:
        assert _hex(SHA512(_edge_msg(n)).digest()) == want, n


def test_module_helpers_agree_with_pure():
    # new()/sha512() pick hashlib where it has sha512; either way the answers are FIPS's.
    for msg, want in FIPS:
        assert _hex(sha512.sha512(msg)) == want
        assert sha512.new(msg).hexdigest() == want


def test_incremental_updates_match_one_shot():
    msg = _edge_msg(256)
    want = SHA512(msg).digest()
    for step in (1, 7, 111, 112, 127, 128, 129):
        h = SHA512()
        for off in range(0, len(msg), step):
            h.update(msg[off:off + step])
        assert h.digest() == want, step


def test_accepts_bytearray_and_memoryview():
    msg = _edge_msg(129)
    want = SHA512(msg).digest()
    assert SHA512(bytearray(msg)).digest() == want
    assert SHA512(memoryview(msg)).digest() == want


def test_copy_is_independent_and_digest_repeatable():
    h = SHA512(b"ab")
    c = h.copy()
    c.update(b"c")
    assert c.hexdigest() == FIPS[0][1]
    assert h.digest() == SHA512(b"ab").digest()
    assert h.digest() == h.digest()
    h.update(b"c")
    assert h.hexdigest() == FIPS[0][1]


def test_rejects_text():
    try:
        SHA512().update("abc")
    except TypeError:
        return
    raise AssertionError("str accepted")


def test_million_a():
    # FIPS 180-2 C.3. About 7800 blocks: skipped on MicroPython to keep its suite fast.
    if MICROPYTHON:
        return
    h = SHA512()
    chunk = b"a" * 1000
    for _ in range(1000):
        h.update(chunk)
    assert h.hexdigest() == (
        "e718483d0ce769644e2e42c7bc15b4638e1f98b13b2044285632a803afa973eb"
        "de0ff244877ea60a4cb0432ce577c31beb009c5c2c49aa2e4eadb217ad8cc09b")


def test_viper_compression_matches_plain():
    # Every 64-bit addition carries through 32-bit halves: all-ones states and blocks
    # carry in every position.
    if not sha512.VIPER:
        return
    states = [bytes(64), b"\xff" * 64, bytes(sha512._H0)]
    blocks = [bytes(128), b"\xff" * 128, bytes(range(128)), b"\x80" + bytes(127)]
    seed = b"sha512 viper"
    for i in range(4):
        seed = sha512.sha512(seed)
        states.append(seed)
        blocks.append(sha512.sha512(seed + b"a") + sha512.sha512(seed + b"b"))
    for st in states:
        for blk in blocks:
            a = bytearray(st)
            b = bytearray(st)
            sha512._compress_plain(a, blk, [0] * 80)
            sha512._compress_viper(b, blk, sha512._scratch_viper())
            assert a == b, (st, blk)
