"""Getting firmware onto boards: the .mpy bundle, serial port choice, esptool and
mpremote command lines and their failures (used by `tssb flash` and `tssb deploy`)."""


class FlashError(Exception):
    """Flashing or deploying failed: the text says what to do (the CLI shows it as is)."""
