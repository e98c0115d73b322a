#!/usr/bin/env bash
# The README's test command: installs everything the tests need (venv, packages, a browser), then runs
# ruff and the whole test suite. Extra arguments go to pytest (e.g. `-m slow` for the long fuzz runs).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -r requirements-dev.txt

# A browser for the Playwright tests: a system Chromium if present, else Debian's package (as root),
# else Playwright's own download (works on a normal machine with internet).
if [ -z "${CHROMIUM_PATH:-}" ] && ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = "0" ]; then
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    .venv/bin/python -m playwright install chromium || echo "No browser could be installed: browser tests will be skipped."
  fi
fi

.venv/bin/ruff check .
.venv/bin/python -m pytest "$@"
