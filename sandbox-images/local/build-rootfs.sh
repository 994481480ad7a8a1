#!/usr/bin/env bash
# Builds the root filesystem of a local sandbox image into OUT_DIR/rootfs.
#
#   build-rootfs.sh <python|node|go|browser> <out-dir>
#   build-rootfs.sh --inputs <image>    the files that build reads, relative to sandbox-images/
#
# The same images as the Dockerfiles (../README.md), from the same package lists
# (../packages), pinned toolchains (../versions.env) and install scripts (../scripts):
#   base     Debian with packages/base.txt, Node.js and npm, the sandbox user and /workspace
#   python, node, go, browser
#            base plus packages/<image>.txt, and Go (go) or the berth-browser launcher (browser)
#
# base is a tarball, base-<hash of its inputs>.tar, kept beside the output directory
# (BERTH_ROOTFS_CACHE overrides where): the first image pays for mmdebstrap, the next ones
# only unpack it and add their own layer.
#
# Needs root, mmdebstrap, curl and unzip; Debian packages come from deb.debian.org, Node.js
# from the npm registry and Go from the Go module proxy (see scripts/install-toolchain.sh).
# The Berth local provider calls this on first use of an image, `make images` ahead of time.
# The provider names the image directory by a hash of the files `--inputs` lists, so editing
# any of them makes Berth build a new image beside the old one.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(dirname "$here")
# Where the image keeps its package lists, versions and install scripts (as the Dockerfiles do).
share=/usr/local/share/berth
usage='usage: build-rootfs.sh <python|node|go|browser> <out-dir> | --inputs <image>'

inputs() {
  printf '%s\n' local/build-rootfs.sh versions.env packages/base.txt \
    scripts/add-user.sh scripts/install-packages.sh scripts/install-toolchain.sh
  case "$1" in
    base) ;;
    browser) printf '%s\n' packages/browser.txt browser/berth-browser ;;
    *) printf '%s\n' "packages/$1.txt" ;;
  esac
}

check_image() {
  case "$1" in
    python | node | go | browser) ;;
    *) echo "unknown image: $1 (expected python, node, go or browser)" >&2; exit 2 ;;
  esac
}

if [ "${1:-}" = --inputs ]; then
  check_image "${2:?$usage}"
  inputs "$2"
  exit 0
fi

image=${1:?$usage}
out=${2:?$usage}
check_image "$image"
rootfs="$out/rootfs"
cache=${BERTH_ROOTFS_CACHE:-$(dirname "$out")}

step() { printf '[build-rootfs %s] %s\n' "$image" "$*" >&2; }
packages_of() { sed 's/#.*//' "$@" | xargs; }

inputs_hash() {
  local file
  for file in $(inputs "$1"); do
    printf '%s\0' "$file"
    cat "$top/$file"
    printf '\0'
  done | sha256sum | cut -c1-12
}

# in_root DIR COMMAND...: COMMAND chrooted into DIR with /proc and /dev, in a mount namespace
# of its own, so that nothing stays mounted on the host when it ends, even if the build dies.
in_root() {
  unshare --mount --fork -- sh -c 'mount -t proc proc "$0/proc" && mount --rbind /dev "$0/dev" && exec chroot "$0" "$@"' "$@"
}

build_base() {
  local tarball=$1 base="$work/base"
  step "base: debian $DEBIAN_SUITE with packages/base.txt (mmdebstrap)"
  mmdebstrap --quiet --variant=essential --include="$(packages_of "$top/packages/base.txt" | tr ' ' ,)" \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    "$DEBIAN_SUITE" "$base" >&2
  install -d "$base$share/packages" "$base$share/scripts"
  install -m 0644 "$top/versions.env" "$base$share/"
  install -m 0644 "$top/packages/base.txt" "$base$share/packages/"
  install -m 0755 "$top"/scripts/*.sh "$base$share/scripts/"
  in_root "$base" sh "$share/scripts/add-user.sh"
  echo sandbox >"$base/etc/hostname"
  step "base: node $NODE_VERSION and npm $NPM_VERSION"
  sh "$top/scripts/install-toolchain.sh" node "$base"
  # Written aside and renamed: a concurrent or crashed build never leaves half a tarball.
  tar -C "$base" --numeric-owner -cf "$tarball.tmp-$$" .
  mv "$tarball.tmp-$$" "$tarball"
  rm -rf "$base"
}

[ "$(id -u)" = 0 ] || { echo "build-rootfs: run as root (mmdebstrap, chroot and file ownership need it)" >&2; exit 1; }
for tool in mmdebstrap curl unzip; do
  command -v "$tool" >/dev/null || { echo "build-rootfs: $tool is missing: apt-get install -y $tool" >&2; exit 1; }
done
[ ! -e "$rootfs" ] || { echo "build-rootfs: $rootfs already exists" >&2; exit 1; }
. "$top/versions.env"
mkdir -p "$cache" "$out"
base_tarball="$cache/base-$(inputs_hash base).tar"
work=$(mktemp -d)
trap 'rm -rf "$work" "$base_tarball.tmp-$$"' EXIT

# One builder of a given base at a time; the others wait for its tarball.
exec 9>"$base_tarball.lock"
flock 9
[ -f "$base_tarball" ] || build_base "$base_tarball"
exec 9>&-

step "unpacking $(basename "$base_tarball")"
mkdir "$rootfs"
# Numeric owners: the sandbox user must stay uid 1000 whatever the host calls that uid.
tar -C "$rootfs" --numeric-owner -xf "$base_tarball"
install -m 0644 "$top/packages/$image.txt" "$rootfs$share/packages/"

packages=$(packages_of "$top/packages/$image.txt")
if [ -n "$packages" ]; then
  step "packages/$image.txt: $packages"
  # Maintainer scripts must not start services in the build's chroot (Debian's images ship the same).
  printf '#!/bin/sh\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d"
  chmod 0755 "$rootfs/usr/sbin/policy-rc.d"
  in_root "$rootfs" sh "$share/scripts/install-packages.sh" "$share/packages/$image.txt" >&2
  rm "$rootfs/usr/sbin/policy-rc.d"
fi

case "$image" in
  go)
    step "go $GO_VERSION"
    sh "$top/scripts/install-toolchain.sh" go "$rootfs"
    ;;
  browser)
    install -m 0755 "$top/browser/berth-browser" "$rootfs/usr/local/bin/berth-browser"
    ;;
esac

step "done: $(du -sh "$rootfs" | cut -f1)"
