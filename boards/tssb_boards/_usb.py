"""USB-to-serial chips found on the supported boards (vid, pid, what).

Values are the chips' public USB ids; several boards share each one.
"""
CP210X = (0x10C4, 0xEA60, "Silicon Labs CP210x")
CH9102 = (0x1A86, 0x55D4, "WCH CH9102")
CH340 = (0x1A86, 0x7523, "WCH CH340")
ESP32S3_USB = (0x303A, 0x1001, "ESP32-S3 native USB (CDC/JTAG)")
