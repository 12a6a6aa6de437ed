"""tssb: the tinySSB host toolkit (CPython)."""

VERSION = "0.1.0"
