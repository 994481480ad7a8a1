#!/usr/bin/env bash
# Builds the binaries of the test cluster's real node from the Go module proxy into a cache
# outside the repository, and prints the directory that holds them:
#   kubelet and kube-proxy (the same Kubernetes version and wrapper module as test/cluster/build.sh)
#   containerd, ctr, containerd-shim-runc-v2 (containerd $CONTAINERD_VERSION)
#   containerd-shim-runsc-v1 (gVisor's shim, at the version of runsc that install-runsc.sh pins)
#   pause (test/node/pause: the static program the pods' pause image runs)
#   kube-network-policies (the NetworkPolicy enforcer of Kubernetes SIG Network, see netpol.ts)
# Idempotent: a binary already built for these versions is kept. Cold, containerd and the shim
# take a few minutes on two cores and the kubelet about one more on the cluster's warm Go cache.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CONTAINERD_VERSION=v2.1.4
NETPOL_VERSION=v0.7.0
K8S_VERSION=$(sed -n 's/^K8S_VERSION=//p' "$ROOT/test/cluster/build.sh")
GVISOR_VERSION=$(sed -n 's/^GVISOR_VERSION=//p' "$ROOT/sandbox-images/local/install-runsc.sh")
CLUSTER_CACHE=${BERTH_CLUSTER_CACHE:-/var/cache/berth/cluster}
CACHE=${BERTH_NODE_CACHE:-/var/cache/berth/node}
BIN="$CACHE/bin-k8s$K8S_VERSION-containerd$CONTAINERD_VERSION-gvisor${GVISOR_VERSION##*-}"
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0
# One build cache with the control plane's: the kubelet shares most of its packages.
export GOCACHE="$CLUSTER_CACHE/gocache"

log() { printf '[node-build] %s\n' "$*" >&2; }
mkdir -p "$BIN"

# kubelet and kube-proxy: the same wrapper module, version and flags.
build_kube_command() {
  local cmd=$1
  [ -x "$BIN/$cmd" ] && return
  # test/cluster/build.sh writes the wrapper module (staging modules replaced by their releases).
  bash "$ROOT/test/cluster/build.sh" >/dev/null
  local src="$CLUSTER_CACHE/src/kubernetes-$K8S_VERSION" minor=${K8S_VERSION#v1.}
  minor=${minor%%.*}
  local ldflags="-s -w" pkg
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  done
  log "building $cmd $K8S_VERSION"
  (cd "$src" && go build -ldflags "$ldflags" -o "$BIN/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd" && mv "$BIN/$cmd.tmp" "$BIN/$cmd")
}

# `go install` refuses containerd's module (it has exclude directives): a wrapper module builds it.
build_containerd() {
  local cmd missing=()
  for cmd in containerd ctr containerd-shim-runc-v2; do [ -x "$BIN/$cmd" ] || missing+=("$cmd"); done
  [ ${#missing[@]} -eq 0 ] && return
  local src="$CACHE/src/containerd-$CONTAINERD_VERSION"
  mkdir -p "$src"
  printf 'module berth.dev/test-node\ngo 1.25.0\nrequire github.com/containerd/containerd/v2 %s\n' "$CONTAINERD_VERSION" >"$src/go.mod"
  for cmd in "${missing[@]}"; do
    log "building $cmd $CONTAINERD_VERSION"
    (cd "$src" && go build -tags "no_btrfs no_devmapper no_zfs no_aufs" \
      -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=${CONTAINERD_VERSION#v}" \
      -o "$BIN/$cmd.tmp" "github.com/containerd/containerd/v2/cmd/$cmd" && mv "$BIN/$cmd.tmp" "$BIN/$cmd")
  done
}

# gVisor's shim: the module's main package is gvisor.dev/gvisor/shim. It is built from a copy of
# the module with runsc-shim-oom.patch applied: unpatched, the shim fails to start where root
# lacks CAP_SYS_RESOURCE, as here, because it insists on lowering its own OOM score. The stamp
# records the patch, so that a changed patch rebuilds it.
build_runsc_shim() {
  local patch="$HERE/runsc-shim-oom.patch" stamp
  stamp="$GVISOR_VERSION $(sha256sum <"$patch" | cut -d' ' -f1)"
  [ -x "$BIN/containerd-shim-runsc-v1" ] && [ "$(cat "$BIN/containerd-shim-runsc-v1.stamp" 2>/dev/null)" = "$stamp" ] && return
  log "building containerd-shim-runsc-v1 $GVISOR_VERSION with $(basename "$patch")"
  local module src
  module=$(GOFLAGS= go mod download -json "gvisor.dev/gvisor@$GVISOR_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  # A private copy, because runs that start together may all find the stamp outdated.
  mkdir -p "$CACHE/src"
  src=$(mktemp -d "$CACHE/src/runsc-shim-$GVISOR_VERSION.XXXXXX")
  cp -r "$module" "$src/gvisor"
  chmod -R u+w "$src/gvisor"
  patch --quiet -d "$src/gvisor" -p1 <"$patch"
  printf 'module berth.dev/test-node-shim\ngo 1.25.0\nrequire gvisor.dev/gvisor %s\nreplace gvisor.dev/gvisor => ./gvisor\n' "$GVISOR_VERSION" >"$src/go.mod"
  (cd "$src" && go build -ldflags "-s -w" -o "$src/shim" gvisor.dev/gvisor/shim)
  mv "$src/shim" "$BIN/containerd-shim-runsc-v1"
  echo "$stamp" >"$BIN/containerd-shim-runsc-v1.stamp"
  rm -rf "$src"
}

build_pause() {
  local stamp
  stamp=$(sha256sum <"$HERE/pause/main.go" | cut -d' ' -f1)
  [ -x "$BIN/pause" ] && [ "$(cat "$BIN/pause.stamp" 2>/dev/null)" = "$stamp" ] && return
  log "building pause"
  (cd "$HERE/pause" && GOFLAGS= go build -ldflags "-s -w" -o "$BIN/pause.tmp" main.go && mv "$BIN/pause.tmp" "$BIN/pause")
  echo "$stamp" >"$BIN/pause.stamp"
}

# The NetworkPolicy enforcer, built from a copy of its module with kube-network-policies.patch:
# a --kubeconfig flag (it runs on the host, not in a pod), and packets queued to it through
# x_tables' NFQUEUE target, because this kernel has no nftables queue expression (CONFIG_NFT_QUEUE).
# The checksum database lists neither this version nor its nftables pseudo-version: the module
# proxy serves both, and go.sum of the release pins the rest.
build_netpol() {
  local patch="$HERE/kube-network-policies.patch" stamp
  stamp="$NETPOL_VERSION $(sha256sum <"$patch" | cut -d' ' -f1)"
  [ -x "$BIN/kube-network-policies" ] && [ "$(cat "$BIN/kube-network-policies.stamp" 2>/dev/null)" = "$stamp" ] && return
  log "building kube-network-policies $NETPOL_VERSION with $(basename "$patch")"
  local module src
  module=$(GOFLAGS= GOSUMDB=off go mod download -json "sigs.k8s.io/kube-network-policies@$NETPOL_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  mkdir -p "$CACHE/src"
  src=$(mktemp -d "$CACHE/src/kube-network-policies-$NETPOL_VERSION.XXXXXX")
  cp -r "$module" "$src/knp"
  chmod -R u+w "$src/knp"
  patch --quiet -d "$src/knp" -p1 <"$patch"
  (cd "$src/knp" && GOFLAGS=-mod=mod GOSUMDB=off go build -ldflags "-s -w" -o "$src/kube-network-policies" ./cmd)
  mv "$src/kube-network-policies" "$BIN/kube-network-policies"
  echo "$stamp" >"$BIN/kube-network-policies.stamp"
  rm -rf "$src"
}

build_pause
build_netpol
build_runsc_shim
build_containerd
build_kube_command kubelet
build_kube_command kube-proxy
echo "$BIN"
