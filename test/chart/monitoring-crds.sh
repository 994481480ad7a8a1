#!/usr/bin/env bash
# Prints the path of the ServiceMonitor CRD of the Prometheus Operator, so that the chart tier can
# install it into its test cluster and have the API server validate the chart's ServiceMonitor
# against the real schema. The CRD ships in the operator's Go module, fetched once from the Go
# module proxy into a cache outside the repository; later runs return at once.
set -euo pipefail

VERSION=v0.85.0
MODULE=github.com/prometheus-operator/prometheus-operator
CACHE=${BERTH_CHART_CACHE:-/var/cache/berth/chart}
CRD="$CACHE/prometheus-operator-$VERSION/monitoring.coreos.com_servicemonitors.yaml"

if [ ! -s "$CRD" ]; then
  mkdir -p "$CACHE"
  dir=$(GOFLAGS=-mod=mod GOMODCACHE="$CACHE/gomod" GOTOOLCHAIN=local go mod download -json "$MODULE@$VERSION" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -n "$dir" ] || { echo "go mod download $MODULE@$VERSION gave no directory" >&2; exit 1; }
  # Copied next to the module and renamed into place, so that concurrent runs never read half a file.
  mkdir -p "$(dirname "$CRD")"
  cp "$dir/example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml" "$CRD.tmp.$$"
  mv "$CRD.tmp.$$" "$CRD"
fi
echo "$CRD"
