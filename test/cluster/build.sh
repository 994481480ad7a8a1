#!/usr/bin/env bash
# Builds the binaries of the test cluster from the Go module proxy into a cache outside the
# repository, and prints the directory that holds them:
#   etcd, kube-apiserver, kube-scheduler, kube-controller-manager (Kubernetes $K8S_VERSION)
#   kwok (fake nodes: marks pods Running and serves exec/logs for them), patched by kwok-exec.patch,
#     and kwok-stages.yaml, the stages that drive its fake nodes and pods
# Idempotent: a binary already built for these versions is kept. A cold build compiles for about
# ten minutes on two cores (ADR 57), after the modules' download; later runs return at once.
set -euo pipefail

K8S_VERSION=v1.36.3
ETCD_VERSION=v3.5.35
# kwok requires the Kubernetes libraries of the same minor version as K8S_VERSION: both are built in
# one wrapper module, so each package of those libraries is compiled once (on a cold cache this
# halves the build; two versions of them took about as long again).
KWOK_VERSION=v0.8.0
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${BERTH_CLUSTER_CACHE:-/var/cache/berth/cluster}
BIN="$CACHE/bin-$K8S_VERSION-etcd$ETCD_VERSION-kwok$KWOK_VERSION"
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0
export GOCACHE="$CACHE/gocache"

log() { printf '[cluster-build] %s\n' "$*" >&2; }
mkdir -p "$BIN"

# The wrapper module, in $CACHE/src/kubernetes-$K8S_VERSION (test/node/build.sh builds the kubelet
# and kube-proxy in it too). Staging modules of k8s.io/kubernetes: its go.mod points them at
# ./staging, which `go build` cannot follow from a dependency, so the wrapper replaces each with its
# published v0 release; the list is read from that go.mod. kwok is a copy of its module source with
# kwok-exec.patch applied (unpatched, `kubectl exec` loses the command's exit code and never closes
# its stdin), in a directory named by the patch's hash, so that a changed patch makes a new copy.
write_wrapper() {
  local src=$1 kwok_dir=$2 staging_version="v0.${K8S_VERSION#v1.}" k8s_mod staging
  k8s_mod=$(GOFLAGS= go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')
  staging=$(sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p' "$k8s_mod")
  [ -n "$staging" ] || { log "no staging modules found in $k8s_mod"; return 1; }
  if [ ! -d "$src/$kwok_dir" ]; then
    GOFLAGS= go mod download "sigs.k8s.io/kwok@$KWOK_VERSION"
    # Copied beside, then renamed into place: builds that start together each make their own.
    local copy
    copy=$(mktemp -d "$src/.kwok.XXXXXX")
    cp -r "$(go env GOMODCACHE)/sigs.k8s.io/kwok@$KWOK_VERSION/." "$copy"
    chmod -R u+w "$copy"
    patch --quiet -d "$copy" -p1 <"$HERE/kwok-exec.patch"
    mv -T "$copy" "$src/$kwok_dir" 2>/dev/null || rm -rf "$copy"
  fi
  local module
  module=$(mktemp "$src/.go.mod.XXXXXX")
  {
    echo "module berth.dev/test-cluster"
    echo "go 1.26.0"
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo "require sigs.k8s.io/kwok $KWOK_VERSION"
    echo "replace sigs.k8s.io/kwok => ./$kwok_dir"
    for module_path in $staging; do echo "replace $module_path => $module_path $staging_version"; done
  } >"$module"
  mv "$module" "$src/go.mod"
}

# kube-apiserver, kube-scheduler, kube-controller-manager and kwok: one `go build` of those that are
# missing, so their shared packages compile once and the links run side by side.
build_kubernetes() {
  local src="$CACHE/src/kubernetes-$K8S_VERSION" patch_hash
  patch_hash=$(sha256sum <"$HERE/kwok-exec.patch" | cut -c1-16)
  local kwok_stamp="$KWOK_VERSION $patch_hash" kwok_dir="kwok-$KWOK_VERSION-$patch_hash"
  local targets=() names=() cmd
  for cmd in kube-apiserver kube-scheduler kube-controller-manager; do
    [ -x "$BIN/$cmd" ] && continue
    targets+=("k8s.io/kubernetes/cmd/$cmd"); names+=("$cmd")
  done
  if ! [ -x "$BIN/kwok" ] || [ "$(cat "$BIN/kwok.stamp" 2>/dev/null)" != "$kwok_stamp" ]; then
    targets+=("sigs.k8s.io/kwok/cmd/kwok"); names+=(kwok)
  fi
  # test/node/build.sh builds in the wrapper even when every binary here is built already.
  if [ ${#targets[@]} -gt 0 ] || ! [ -f "$src/go.mod" ] || ! [ -d "$src/$kwok_dir" ]; then
    mkdir -p "$src"
    write_wrapper "$src" "$kwok_dir"
  fi
  [ ${#targets[@]} -eq 0 ] && return
  local minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  local ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  done
  log "building ${names[*]} (Kubernetes $K8S_VERSION, kwok $KWOK_VERSION with kwok-exec.patch)"
  local out
  out=$(mktemp -d "$BIN/.build.XXXXXX")
  (cd "$src" && go build -ldflags "$ldflags" -o "$out/" "${targets[@]}")
  # kwok has no built-in stages: these are the "fast" ones its own deployments load.
  local file
  for file in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
    pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    echo "---"; cat "$src/$kwok_dir/kustomize/stage/$file"
  done >"$out/kwok-stages.yaml"
  for cmd in "${names[@]}"; do mv "$out/$cmd" "$BIN/$cmd"; done
  mv "$out/kwok-stages.yaml" "$BIN/kwok-stages.yaml"
  [[ " ${names[*]} " == *" kwok "* ]] && echo "$kwok_stamp" >"$BIN/kwok.stamp"
  rm -rf "$out"
}

build_etcd() {
  [ -x "$BIN/etcd" ] && return
  local src="$CACHE/src/etcd-$ETCD_VERSION"
  mkdir -p "$src"
  printf 'module berth.dev/test-etcd\ngo 1.25.0\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" >"$src/go.mod"
  log "building etcd $ETCD_VERSION"
  (cd "$src" && go build -ldflags "-s -w" -o "$BIN/etcd.tmp" go.etcd.io/etcd/server/v3 && mv "$BIN/etcd.tmp" "$BIN/etcd")
}

build_etcd
build_kubernetes
echo "$BIN"
