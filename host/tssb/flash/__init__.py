"""Getting firmware onto boards: the .mpy bundle, serial port choice, esptool and
mpremote command lines and their failures (used by `tssb flash` and `tssb deploy`)."""
