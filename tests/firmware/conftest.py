"""Firmware tests: the fake `machine` and `lora` modules live in fakes/ (CPython side).

firmware/ and boards/ are added to sys.path when the editable install predates them.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FAKES = os.path.join(HERE, "fakes")
for p in (os.path.join(ROOT, "firmware"), os.path.join(ROOT, "boards")):
    try:
        __import__("tssbfw" if p.endswith("firmware") else "tssb_boards")
    except ImportError:
        sys.path.insert(0, p)
if FAKES not in sys.path:
    sys.path.append(FAKES)
