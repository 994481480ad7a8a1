#!/usr/bin/env bash
# Installs the pinned Python SDK (PyPI e2b) into a virtualenv outside the repository, once.
# Prints the path of its python. BERTH_E2B_PY_VENV overrides the location.
set -euo pipefail
E2B_PY_VERSION=2.63.0
VENV=${BERTH_E2B_PY_VENV:-/var/cache/berth/e2b-py-venv}
STAMP="$VENV/.e2b-$E2B_PY_VERSION"

if [[ ! -f $STAMP ]]; then
  rm -rf "$VENV"
  mkdir -p "$(dirname "$VENV")"
  python3 -m venv "$VENV" >&2
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "e2b==$E2B_PY_VERSION" >&2
  touch "$STAMP"
fi
echo "$VENV/bin/python3"
