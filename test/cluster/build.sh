#!/usr/bin/env bash
# Builds the binaries of the test cluster from the Go module proxy into a cache outside the
# repository, and prints the directory that holds them:
#   etcd, kube-apiserver, kube-scheduler, kube-controller-manager (Kubernetes $K8S_VERSION)
#   kwok (fake nodes: marks pods Running and serves exec/logs for them), patched by kwok-exec.patch,
#     and kwok-stages.yaml, the stages that drive its fake nodes and pods
# Idempotent: a binary already built for these versions is kept. A cold build takes tens of
# minutes on two cores; later runs return at once.
set -euo pipefail

K8S_VERSION=v1.35.4
ETCD_VERSION=v3.5.35
KWOK_VERSION=v0.8.0
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${BERTH_CLUSTER_CACHE:-/var/cache/berth/cluster}
BIN="$CACHE/bin-$K8S_VERSION-etcd$ETCD_VERSION-kwok$KWOK_VERSION"
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0
export GOCACHE="$CACHE/gocache"

log() { printf '[cluster-build] %s\n' "$*" >&2; }
mkdir -p "$BIN"

# Staging modules of k8s.io/kubernetes: its go.mod points them at ./staging, which `go build`
# cannot follow from a dependency, so the wrapper replaces each with its published v0 release.
STAGING="api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider
cluster-bootstrap code-generator component-base component-helpers controller-manager cri-api
cri-client csi-translation-lib dynamic-resource-allocation endpointslice externaljwt kms
kube-aggregator kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics
mount-utils pod-security-admission sample-apiserver sample-cli-plugin sample-controller"

build_kubernetes() {
  local src="$CACHE/src/kubernetes-$K8S_VERSION" staging_version="v0.${K8S_VERSION#v1.}"
  mkdir -p "$src"
  {
    echo "module berth.dev/test-cluster"
    echo "go 1.25.0"
    echo "require k8s.io/kubernetes $K8S_VERSION"
    for module in $STAGING; do echo "replace k8s.io/$module => k8s.io/$module $staging_version"; done
  } >"$src/go.mod"
  local minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  local ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  done
  for cmd in kube-apiserver kube-scheduler kube-controller-manager; do
    [ -x "$BIN/$cmd" ] && continue
    log "building $cmd $K8S_VERSION"
    (cd "$src" && go build -ldflags "$ldflags" -o "$BIN/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd" && mv "$BIN/$cmd.tmp" "$BIN/$cmd")
  done
}

build_etcd() {
  [ -x "$BIN/etcd" ] && return
  local src="$CACHE/src/etcd-$ETCD_VERSION"
  mkdir -p "$src"
  printf 'module berth.dev/test-etcd\ngo 1.25.0\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" >"$src/go.mod"
  log "building etcd $ETCD_VERSION"
  (cd "$src" && go build -ldflags "-s -w" -o "$BIN/etcd.tmp" go.etcd.io/etcd/server/v3 && mv "$BIN/etcd.tmp" "$BIN/etcd")
}

# kwok is built from a copy of its module source with kwok-exec.patch applied: unpatched, `kubectl
# exec` loses the command's exit code and never closes its stdin. The stamp records the patch the
# binary was built with, so that a changed patch rebuilds it.
build_kwok() {
  local patch="$HERE/kwok-exec.patch" stamp
  stamp="$KWOK_VERSION $(sha256sum <"$patch" | cut -d' ' -f1)"
  [ -x "$BIN/kwok" ] && [ "$(cat "$BIN/kwok.stamp" 2>/dev/null)" = "$stamp" ] && return
  log "building kwok $KWOK_VERSION with $(basename "$patch")"
  GOFLAGS= go mod download "sigs.k8s.io/kwok@$KWOK_VERSION"
  # A private copy, because test runs that start together may all find the stamp outdated.
  mkdir -p "$CACHE/src"
  local src
  src=$(mktemp -d "$CACHE/src/kwok-$KWOK_VERSION.XXXXXX")
  cp -r "$(go env GOMODCACHE)/sigs.k8s.io/kwok@$KWOK_VERSION/." "$src"
  chmod -R u+w "$src"
  patch --quiet -d "$src" -p1 <"$patch"
  (cd "$src" && go build -ldflags "-s -w" -o "$src/kwok" ./cmd/kwok)
  # kwok has no built-in stages: these are the "fast" ones its own deployments load.
  local file
  for file in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
    pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    echo "---"; cat "$src/kustomize/stage/$file"
  done >"$src/kwok-stages.yaml"
  mv "$src/kwok-stages.yaml" "$src/kwok" "$BIN/"
  echo "$stamp" >"$BIN/kwok.stamp"
  rm -rf "$src"
}

build_etcd
build_kwok
build_kubernetes
echo "$BIN"
