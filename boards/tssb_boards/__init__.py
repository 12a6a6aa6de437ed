"""Board definitions for tinySSB firmware and host tools (MicroPython and CPython).

One module per board, each defining `BOARD`, a plain dict (data, no code), so the
firmware reads its pins from here and the host reads flash offsets, chips and USB hints:

  name, title            registry key and human name
  mcu                    'esp32' or 'esp32s3' (esptool --chip)
  flash_offset           where a MicroPython image is written (board.json deploy_options)
  micropython_board      MicroPython board to build or download an image for
  spi                    {'id', 'sck', 'mosi', 'miso', 'baudrate'}
  radios                 {chip: {pins...}} for each radio the board ships with;
                         'default_radio' names the usual one
                         sx126x pins: cs, busy, dio1, reset, dio2_rf_sw, tcxo_mv
                         sx127x pins: cs, dio0, dio1, reset
  power                  None, {'kind': 'vext', 'pin', 'active_low'} or
                         {'kind': 'axp192', 'sda', 'scl', 'addr', 'ldo2_mv'}
  led, oled              LED pin (None if absent); OLED {'sda','scl','rst','addr'} or None
  usb                    list of (vid, pid, what) hints for port auto-detection; the
                         bridge chips are shared by many boards, so hints rank ports,
                         they do not identify a board
  sources                where the pins come from

A board spec string may pick a radio: 'tbeam:sx1262'.
"""
from tssb_boards import heltec_v2, heltec_v3, lora32_v21, t3s3, tbeam

BOARDS = {}
for _m in (heltec_v3, heltec_v2, tbeam, lora32_v21, t3s3):
    BOARDS[_m.BOARD["name"]] = _m.BOARD

CHIP_FAMILIES = {"sx1261": "sx126x", "sx1262": "sx126x", "sx1276": "sx127x",
                 "sx1277": "sx127x", "sx1278": "sx127x", "sx1279": "sx127x"}


def names():
    """Registered board names, sorted."""
    return sorted(BOARDS)


def get(spec):
    """The board for `spec` ('name' or 'name:radio') with its radio resolved.

    Returns:
        a new dict: the board's fields plus 'radio' (chip name) and 'lora' (its pins).
    Raises:
        ValueError: unknown board or radio.
    """
    name, _, chip = spec.partition(":")
    b = BOARDS.get(name)
    if b is None:
        raise ValueError("unknown board %r (one of %s)" % (name, ", ".join(names())))
    chip = chip or b["default_radio"]
    if chip not in b["radios"]:
        raise ValueError("board %s has no radio %r (one of %s)"
                         % (name, chip, ", ".join(sorted(b["radios"]))))
    out = dict(b)
    out["radio"] = chip
    out["lora"] = b["radios"][chip]
    return out


def family(chip):
    """'sx126x' or 'sx127x' for a chip name (raises ValueError when unknown)."""
    f = CHIP_FAMILIES.get(chip)
    if f is None:
        raise ValueError("unknown radio chip %r" % chip)
    return f


def by_usb(vid, pid):
    """Names of boards whose USB hints match (vid, pid), sorted."""
    return sorted(n for n, b in BOARDS.items()
                  if any(h[0] == vid and h[1] == pid for h in b["usb"]))
