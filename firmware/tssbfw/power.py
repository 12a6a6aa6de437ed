"""Board power rails that must be on before the radio answers.

  vext    Heltec boards: one GPIO (active low) feeding the OLED and the LoRa antenna boost
  axp192  T-Beam v1.x: the radio is fed from the AXP192 PMU's LDO2 (ecosystem.md 1.4);
          register 0x12 bit 2 enables LDO2, register 0x28 bits 7..4 set its voltage
          (1.8-3.3 V in 100 mV steps), per the AXP192 datasheet.
"""
AXP192_POWER_CTRL = 0x12
AXP192_LDO2_BIT = 0x04
AXP192_LDO23_VOLT = 0x28
LDO_MIN_MV = 1800
LDO_MAX_MV = 3300


def ldo2_code(mv):
    """The 4-bit LDO2 voltage code for `mv` millivolts (ValueError when out of range)."""
    if not LDO_MIN_MV <= mv <= LDO_MAX_MV or (mv - LDO_MIN_MV) % 100:
        raise ValueError("LDO2 voltage out of range")
    return (mv - LDO_MIN_MV) // 100


def power_up(board, machine_mod=None):
    """Switch on the board's radio power rail (no-op when the board has none).

    Returns:
        a short description of what was done (for the boot log).
    Raises:
        OSError: the PMU does not answer on I2C.
    """
    pw = board.get("power")
    if not pw:
        return "none"
    if machine_mod is None:
        import machine as machine_mod
    if pw["kind"] == "vext":
        pin = machine_mod.Pin(pw["pin"], machine_mod.Pin.OUT)
        pin.value(0 if pw.get("active_low") else 1)
        return "vext on"
    if pw["kind"] == "axp192":
        i2c = machine_mod.SoftI2C(scl=machine_mod.Pin(pw["scl"]), sda=machine_mod.Pin(pw["sda"]))
        addr = pw["addr"]
        volt = bytearray(i2c.readfrom_mem(addr, AXP192_LDO23_VOLT, 1))
        volt[0] = (volt[0] & 0x0F) | (ldo2_code(pw["ldo2_mv"]) << 4)
        i2c.writeto_mem(addr, AXP192_LDO23_VOLT, volt)
        ctrl = bytearray(i2c.readfrom_mem(addr, AXP192_POWER_CTRL, 1))
        ctrl[0] |= AXP192_LDO2_BIT
        i2c.writeto_mem(addr, AXP192_POWER_CTRL, ctrl)
        return "axp192 ldo2 %d mV" % pw["ldo2_mv"]
    raise ValueError("unknown power kind %r" % pw["kind"])
