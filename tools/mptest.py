# Runs a pytest-style test directory under MicroPython (which has no pytest or unittest).
#
# Usage: micropython tools/mptest.py tests/core [name-filter]
# Every test_*.py module is imported and each callable named test_* is called with no
# arguments; an exception is a failure. The core suite is written to this contract so the
# same files run under CPython's pytest and on the MicroPython unix port.
import sys
import os

try:
    import gc
except ImportError:
    gc = None


def main(argv):
    tdir = argv[1] if len(argv) > 1 else "tests/core"
    filt = argv[2] if len(argv) > 2 else ""
    sys.path.insert(0, "shared")
    sys.path.insert(0, tdir)
    passed = failed = 0
    names = sorted(n for n in os.listdir(tdir) if n.startswith("test_") and n.endswith(".py"))
    for fname in names:
        modname = fname[:-3]
        try:
            mod = __import__(modname)
        except Exception as e:
            failed += 1
            print("FAIL import", modname, repr(e))
            sys.print_exception(e)
            continue
        for attr in sorted(dir(mod)):
            if not attr.startswith("test_") or (filt and filt not in attr):
                continue
            fn = getattr(mod, attr)
            if not callable(fn):
                continue
            try:
                fn()
                passed += 1
            except Exception as e:
                failed += 1
                print("FAIL", modname + "." + attr, repr(e))
                sys.print_exception(e)
            if gc:
                gc.collect()
    print("mptest: %d passed, %d failed" % (passed, failed))
    return 1 if failed or not passed else 0


sys.exit(main(sys.argv))
