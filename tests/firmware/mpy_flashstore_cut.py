"""Flash store recovery on MicroPython's own file layer: cut the log at every byte offset
of its last two records, reopen, check exactly the complete records survive and appends
continue. Run from the repository root: micropython tests/firmware/mpy_flashstore_cut.py DIR
Prints `CUT ok N` and exits 0, or prints the first failure and exits 1.
"""
import sys

sys.path[:0] = ["shared", "firmware"]
import os

from tssbfw.flashstore import ENTRY_REC, FlashStore

FID = bytes(range(32))


def pkt(q):
    return bytes([(q * 5 + i) % 256 for i in range(120)])


def main(work):
    try:
        os.mkdir(work)
    except OSError:
        pass
    base = work + "/base"
    s = FlashStore(base)
    s.add_feed(FID)
    for q in range(1, 5):
        s.append(FID, q, pkt(q), bytes([q]) * 20)
    logp = base + "/" + FID.hex() + "/log"
    with open(logp, "rb") as f:
        full = f.read()
    checked = 0
    for cut in range(len(full) - 2 * ENTRY_REC, len(full) + 1):
        root = work + "/c%d" % cut
        os.mkdir(root)
        os.mkdir(root + "/" + FID.hex())
        with open(root + "/" + FID.hex() + "/log", "wb") as f:
            f.write(full[:cut])
        st = FlashStore(root)
        keep = cut // ENTRY_REC
        if st.front(FID)[0] != keep:
            print("FAIL cut", cut, st.front(FID)[0], keep)
            return 1
        for q in range(1, keep + 1):
            if st.entry(FID, q) != pkt(q):
                print("FAIL entry", cut, q)
                return 1
        st.append(FID, keep + 1, pkt(keep + 1), b"\x01" * 20)
        again = FlashStore(root)
        if again.front(FID)[0] != keep + 1 or again.recovered:
            print("FAIL reopen", cut)
            return 1
        checked += 1
    print("CUT ok", checked)
    return 0


sys.exit(main(sys.argv[1]))
