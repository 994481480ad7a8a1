#!/usr/bin/env bash
# `make e2e-kind`: Berth on a real cluster with real containers, for machines with Docker and kind.
# Creates a kind cluster, builds and loads the Berth and sandbox images, installs the chart
# with the bundled PostgreSQL, and runs the end-to-end suite (test/e2e) against the API server
# through a port-forward. The cluster has no gVisor, so sandboxes run with the node's runtime
# (BERTH_RUNTIME_CLASS=none); everything else is as in production.
#
#   E2E_KEEP=1 keeps the cluster afterwards; KIND_CLUSTER names it (default berth-e2e).
set -euo pipefail
cd "$(dirname "$0")/../.."

CLUSTER=${KIND_CLUSTER:-berth-e2e}
NAMESPACE=berth-e2e
VERSION=$(node -p "require('./package.json').version || '0.1.0'")
for tool in docker kind kubectl helm; do
  command -v "$tool" >/dev/null || { echo "e2e-kind needs $tool on PATH" >&2; exit 1; }
done

cleanup() {
  [ -n "${FORWARD_PID:-}" ] && kill "$FORWARD_PID" 2>/dev/null || true
  [ "${E2E_KEEP:-}" = 1 ] || kind delete cluster --name "$CLUSTER"
}
trap cleanup EXIT

kind get clusters | grep -qx "$CLUSTER" || kind create cluster --name "$CLUSTER" --wait 120s

docker build -f apiserver/Dockerfile -t "berth/berth:$VERSION" .
bash sandbox-images/build-images.sh "$VERSION"
for image in berth/berth "berth/sandbox-python" "berth/sandbox-node" "berth/sandbox-go"; do
  kind load docker-image --name "$CLUSTER" "$image:$VERSION"
done

kubectl create namespace "$NAMESPACE" --dry-run=client -o yaml | kubectl apply -f -
helm upgrade --install berth charts/berth -n "$NAMESPACE" \
  --set postgresql.bundled.enabled=true \
  --set sandbox.runtimeClassName=none \
  --set image.tag="$VERSION" \
  --wait --timeout 5m

KEY=$(kubectl exec -n "$NAMESPACE" deploy/berth-apiserver -- berth keys create --mode live --label e2e | sed -n 's/^key: //p')
kubectl port-forward -n "$NAMESPACE" svc/berth-apiserver 18080:8080 >/dev/null &
FORWARD_PID=$!
for _ in $(seq 50); do curl -sf http://127.0.0.1:18080/healthz >/dev/null && break; sleep 0.2; done

BERTH_E2E_URL=http://127.0.0.1:18080 BERTH_E2E_KEY="$KEY" BERTH_E2E_NAMESPACE="$NAMESPACE" \
  npx vitest run --config test/e2e/vitest.config.ts
