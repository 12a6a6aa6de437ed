"""Build the .mpy bundle (core + firmware + boards) for ESP32 boards.

Usage: python tools/build_mpy.py [OUT_DIR] [--arch xtensawin]
Writes OUT_DIR (default build/mpy) laid out as it goes onto the device (see
tssb.flash.bundle) and prints one JSON line with the sizes. `tssb deploy` builds the same
bundle itself; this script is for inspecting it or copying it by hand.
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "host"))

from tssb.flash import bundle  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description="compile the tinySSB .mpy bundle")
    ap.add_argument("out", nargs="?", default=os.path.join(os.path.dirname(HERE), "build", "mpy"))
    ap.add_argument("--arch", default=bundle.ARCH, help="mpy-cross -march (default %(default)s)")
    a = ap.parse_args(argv)
    try:
        info = bundle.build(a.out, a.arch)
    except bundle.BundleError as e:
        print("build_mpy: %s" % e, file=sys.stderr)
        return 1
    print(json.dumps({"out": a.out, "arch": a.arch, "modules": len(info["files"]) - 2,
                      "mpy_bytes": info["mpy_bytes"], "py_bytes": info["py_bytes"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
