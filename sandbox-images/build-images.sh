#!/usr/bin/env bash
# Builds the sandbox container images for clusters, with the tags the Helm chart expects:
# <prefix>/sandbox-<image>:<version>, by default berth/sandbox-python:0.1.0 and so on.
#
#   sandbox-images/build-images.sh [python] [node] [go] [browser]    (default: all four)
#
# ENGINE      docker (default), podman or buildah, with global options if needed
#             (e.g. "podman --root /srv/containers"); all three take the same build flags
# VERSION     the tag; default: the version in the repository's package.json, else 0.1.0
# PREFIX      the repository prefix; default berth (e.g. registry.example.com/berth)
# BUILD_ARGS  more arguments for every build, e.g. "--build-arg NPM_REGISTRY=https://npm.example.com"
#
# base (<prefix>/sandbox-base:<version>) is built first and the others FROM it; the build
# context is this directory. linux/amd64 only: versions.env pins amd64 toolchains.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
read -r -a engine <<<"${ENGINE:-docker}"
read -r -a extra <<<"${BUILD_ARGS:-}"
prefix=${PREFIX:-berth}
# Top-level keys of package.json sit at two spaces; nested "version"s sit deeper.
version=${VERSION:-$(sed -n 's/^  "version": *"\([^"]*\)".*/\1/p' "$here/../package.json" 2>/dev/null | head -n 1)}
version=${version:-0.1.0}
. "$here/versions.env"

images=("$@")
[ ${#images[@]} -gt 0 ] || images=(python node go browser)
for image in "${images[@]}"; do
  case "$image" in
    python | node | go | browser) ;;
    *) echo "build-images: unknown image $image (expected python, node, go or browser)" >&2; exit 2 ;;
  esac
done

# build IMAGE [BUILD FLAGS...]
build() {
  local tag="$prefix/sandbox-$1:$version"
  echo "build-images: $tag" >&2
  "${engine[@]}" build --platform linux/amd64 -f "$here/$1/Dockerfile" -t "$tag" "${extra[@]}" "${@:2}" "$here"
}

build base --build-arg "DEBIAN_SUITE=$DEBIAN_SUITE"
for image in "${images[@]}"; do
  build "$image" --build-arg "BASE=$prefix/sandbox-base:$version"
done
