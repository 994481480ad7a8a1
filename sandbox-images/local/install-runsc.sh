#!/usr/bin/env bash
# Installs gVisor's runsc into $PREFIX/bin (default /usr/local/bin), built from source through
# the Go module proxy at a pinned version, with the build cache outside the repository.
#
# Why not Debian's runsc: bookworm ships a 2022 build whose statx rejects AT_NO_AUTOMOUNT,
# so `ls` from coreutils 9 fails with "Invalid argument" in every sandbox (ADR 0002).
set -euo pipefail

GVISOR_VERSION=v0.0.0-20260905035102-160fafc42237
PREFIX=${PREFIX:-/usr/local}
CACHE=${BERTH_BUILD_CACHE:-/var/cache/berth/build}
target="$PREFIX/bin/runsc"

# The version is read whole before it is searched: with pipefail, `runsc --version | grep -q`
# fails with SIGPIPE whenever grep stops reading first.
installed=$([ -x "$target" ] && "$target" --version 2>/dev/null || true)
if [[ "$installed" == *"$GVISOR_VERSION"* ]]; then
  exit 0
fi
command -v go >/dev/null || { echo "install-runsc: go is needed to build runsc" >&2; exit 1; }
echo "install-runsc: building runsc $GVISOR_VERSION (a minute or two on a cold cache)" >&2
mkdir -p "$CACHE/bin"
GOBIN="$CACHE/bin" GOFLAGS=-mod=mod CGO_ENABLED=0 GOTOOLCHAIN=local \
  go install -ldflags "-X gvisor.dev/gvisor/runsc/version.version=$GVISOR_VERSION" \
  "gvisor.dev/gvisor/runsc@$GVISOR_VERSION"
install -m 0755 "$CACHE/bin/runsc" "$target"
installed=$("$target" --version)
echo "${installed%%$'\n'*}" >&2
