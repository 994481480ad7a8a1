#!/usr/bin/env bash
# Installs what the local provider needs on this host: mmdebstrap, curl and unzip (to build
# sandbox root filesystems), zstd (snapshot archives), e2fsprogs (workspace filesystems),
# python3 (the helper that answers a sandbox's OOM) and tmux (the CLI's terminal tests) from
# Debian's packages, gVisor's runsc (built by install-runsc.sh), promtool, which the tests run on
# /metrics, and Debian's chromium, in which the browser tests run the chat widget.
# Idempotent: a second run finds everything in place and returns at once.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

if [ "$(id -u)" != 0 ]; then
  echo "install-host: the local provider runs gVisor sandboxes as root; run this as root" >&2
  exit 1
fi

missing=()
command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
command -v curl >/dev/null || missing+=(curl)
command -v unzip >/dev/null || missing+=(unzip)
command -v openssl >/dev/null || missing+=(openssl) # certificates of the test control plane
command -v zstd >/dev/null || missing+=(zstd)       # snapshot archives
{ command -v mkfs.ext4 && command -v debugfs; } >/dev/null || missing+=(e2fsprogs) # each sandbox's /workspace filesystem
command -v go >/dev/null || missing+=(golang-go)
command -v python3 >/dev/null || missing+=(python3) # memory-events.py, which answers a sandbox's OOM
test -x /usr/bin/chromium || missing+=(chromium)    # the browser tests (test/browser), driven by playwright-core
[ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins) # the test node's pod network (test/node)
command -v ip >/dev/null || missing+=(iproute2)        # the test node's link and address (test/node)
command -v tmux >/dev/null || missing+=(tmux)          # a real terminal for the CLI's exec and shell tests
command -v nft >/dev/null || missing+=(nftables)       # the test node's NetworkPolicy table, checked and removed (test/node/netpol.ts)
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-host: apt-get install ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq "${missing[@]}" >/dev/null ||
    { apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null; }
fi

# promtool alone, out of Debian's prometheus package: installing the package would also install
# (and, under systemd, start) a Prometheus server on port 9090.
if ! command -v promtool >/dev/null; then
  echo "install-host: promtool from Debian's prometheus package" >&2
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  chmod 755 "$scratch" # apt's download user writes there
  (cd "$scratch" && { apt-get download -qq prometheus 2>/dev/null || { apt-get update -qq && apt-get download -qq prometheus; }; })
  dpkg-deb -x "$scratch"/prometheus_*.deb "$scratch/root"
  install -m 0755 "$scratch/root/usr/bin/promtool" /usr/local/bin/promtool
fi

"$here/install-runsc.sh"
