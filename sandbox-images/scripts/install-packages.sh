#!/bin/sh
# install-packages.sh LIST...
#
# Installs the Debian packages named in package lists (one a line, # starts a comment),
# without their recommends, and leaves no apt lists or downloads behind. Runs inside the
# image being built: as a Dockerfile step, or chrooted into the local root filesystem by
# local/build-rootfs.sh, so both builds install a list the same way.
set -eu

packages=$(sed 's/#.*//' "$@" | xargs)
[ -n "$packages" ] || exit 0

export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# Unquoted on purpose: one argument per package.
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $packages
apt-get clean
rm -rf /var/lib/apt/lists/*
