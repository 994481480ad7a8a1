#!/usr/bin/env bash
# Installs the pinned schemathesis into a virtualenv outside the repository, once.
# Prints the path of its `st` program. BERTH_FUZZ_VENV overrides the location.
set -euo pipefail
SCHEMATHESIS_VERSION=4.32.5
VENV=${BERTH_FUZZ_VENV:-/var/cache/berth/fuzz-venv}
STAMP="$VENV/.schemathesis-$SCHEMATHESIS_VERSION"

if [[ ! -f $STAMP ]]; then
  rm -rf "$VENV"
  mkdir -p "$(dirname "$VENV")"
  python3 -m venv "$VENV" >&2
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION" >&2
  touch "$STAMP"
fi
echo "$VENV/bin/st"
