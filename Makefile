# tinySSB toolkit. `make demo` and `make test` set themselves up from nothing.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
MPY    := $(VENV)/bin/micropython
STAMP  := $(VENV)/.installed-stamp
OUT    ?= out

.PHONY: setup browser test test-py test-mpy check-mpy demo bench spark firmware flash clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

test: setup browser test-py test-mpy check-mpy

# Debian's Chromium (and its driver) for the browser tests and tools/bench_web.py; the
# Python side (playwright) drives this system browser. Installed when missing and we are
# root; elsewhere one line says what to install and those tests skip (they fail in CI).
browser:
	@if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "== installing chromium chromium-driver (apt-get)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
	else \
	  echo "browser tests will skip: install Chromium (Debian/Ubuntu: sudo apt-get install chromium chromium-driver) or set TSSB_CHROMIUM to a Chromium binary"; \
	fi

# Every suite under CPython (core, host, firmware, sessions, setu, ...). One pytest run per
# folder: suites are independent and may reuse module names (test_vectors.py, test_sync.py).
test-py: setup
	@set -e; for d in tests/*/; do \
	  if ls $$d/test_*.py >/dev/null 2>&1; then \
	    echo "== $$d"; $(PY) -m pytest $$d; \
	  fi; \
	done

# The protocol core's suite again, under the MicroPython unix port (viper enabled).
test-mpy: setup
	$(MPY) tools/mptest.py tests/core

# Every module of shared/, firmware/ and boards/ compiles for the ESP32 (Xtensa, viper included).
check-mpy: setup
	$(PY) tools/mpycheck.py

demo: setup
	$(PY) -m tssb demo --out $(OUT)/demo

bench: setup browser
	$(PY) tools/bench.py
	$(MPY) tools/bench_mpy.py
	$(MPY) tools/bench_codedsym.py
	$(MPY) tools/bench_crypto.py

spark: setup
	$(PY) -m tssb_spark report --input $(OUT)/demo/logs --output $(OUT)/spark

clean:
	rm -rf $(VENV) $(OUT) build *.egg-info
