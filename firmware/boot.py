# tinySSB node boot: keep this minimal (a crash here needs a re-flash to recover).
# Packages deployed as .mpy live in /lib, which MicroPython searches by default.
import gc

gc.collect()
