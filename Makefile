# Berth: the two commands are `make run` and `make test`; each sets up what it needs first.
SHELL := /bin/bash
BERTH := node apiserver/dist/cli/main.js
ARGS ?=

.PHONY: help setup host deps build images browser-image cluster-binaries node-binaries test-node lint-guest check-deps run test test-unit bench-smoke test-integration test-browser test-chart test-cluster test-fuzz bench e2e-kind generate chart-package sdk-types clean

help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-18s %s\n", $$1, $$2}'

setup: host build images ## everything below: host packages, gVisor, npm packages, build, sandbox images

host: ## mmdebstrap, gVisor's runsc, promtool and Debian's chromium on this host (root)
	@sandbox-images/local/install-host.sh

# npm writes node_modules/.package-lock.json on every install: reinstall when the lockfile is newer.
node_modules/.package-lock.json: package-lock.json package.json crds/package.json common/package.json providers/package.json operator/package.json apiserver/package.json sdk/package.json widget/package.json dashboard/package.json
	npm ci --no-fund --no-audit

deps: node_modules/.package-lock.json ## npm packages

build: deps ## compile the TypeScript (tsc -b)
	npm run --silent build

images: host build ## build the local sandbox images (python, node, go) if missing; browser builds on first use
	@$(BERTH) images build python node go

browser-image: host build ## build the browser sandbox image (Chromium) if missing; make test builds it ahead, make run on first use
	@$(BERTH) images build browser

cluster-binaries: ## build the test control plane (etcd, kube-apiserver, ..., KWOK) from the Go module proxy, cached
	@test/cluster/build.sh >/dev/null

node-binaries: cluster-binaries ## build the test node (kubelet, kube-proxy, containerd, gVisor's containerd shim, pause) from the Go module proxy, cached
	@test/node/build.sh >/dev/null

sdk-types: deps ## regenerate the SDK's types (sdk/src/generated/openapi.ts) from the API's OpenAPI document
	npx tsx --conditions source test/sdk-types.ts

generate: deps ## regenerate the CRDs and the chart's CRD templates from the zod schemas
	npx tsc -b && npm run --silent generate

run: setup ## run Berth on this machine: API, operator and gVisor sandboxes in one process (ARGS="--port 9000")
	$(BERTH) up $(ARGS)

lint-guest: deps ## pyflakes for the programs that run inside sandboxes (sandbox-images/guest), in a cached venv; the unit tests run it
	@test -x node_modules/.cache/berth-guest-lint/bin/python3 || python3 -m venv node_modules/.cache/berth-guest-lint
	@node_modules/.cache/berth-guest-lint/bin/python3 -m pyflakes --version >/dev/null 2>&1 || node_modules/.cache/berth-guest-lint/bin/pip install -q pyflakes==4.1.0
	node_modules/.cache/berth-guest-lint/bin/python3 -m pyflakes sandbox-images/guest/*.py

check-deps: deps ## every workspace package declares what it imports, and nothing it does not
	npx tsx test/check-deps.ts

# Each tier writes its counts (and the browser tier its screenshots) to .test-results/; the last line totals them ("total: N passed, N failed").
# The set-up steps run side by side: the Go builds (runsc, the test cluster and node) keep both
# cores busy while npm, apt and the image builds (the browser one too, used by the integration
# tier) mostly wait on the network and the disk (docs/testing.md has the times).
test: ## every test tier: unit, integration, browser, chart, cluster, node, fuzz, bench smoke
	@$(MAKE) --no-print-directory -j4 setup browser-image cluster-binaries node-binaries check-deps lint-guest
	rm -rf .test-results && mkdir -p .test-results
	npx vitest run --reporter=default --reporter=json --outputFile.json=.test-results/vitest.json
	$(MAKE) --no-print-directory chart-package
	BERTH_TEST_RESULTS=.test-results $(MAKE) --no-print-directory test-fuzz
	BERTH_TEST_RESULTS=.test-results $(MAKE) --no-print-directory bench-smoke
	npx tsx test/summary.ts .test-results

test-unit: deps lint-guest ## unit tests only
	npx vitest run --project unit

test-integration: setup ## integration tests: real PostgreSQL, runsc, berth processes
	npx vitest run --project integration

test-browser: setup ## the chat widget in Debian's headless Chromium (playwright-core, axe-core) against a real berth up
	npx vitest run --project browser

test-chart: build cluster-binaries ## the Helm chart through the real helm: lint, rendered objects, and a server-side dry run against the test control plane
	npx vitest run --project chart

test-cluster: build cluster-binaries ## cluster tier: a real control plane with berth apiserver and operator
	npx vitest run --project cluster

test-node: setup node-binaries ## node tier: the control plane with a real node (kubelet, containerd, gVisor pods) (root)
	npx vitest run --project node

test-fuzz: setup ## schemathesis against a real berth up, with the test and the live key (a few minutes)
	npx tsx test/fuzz/run.ts --st "$$(test/fuzz/install.sh)"

bench: setup cluster-binaries node-binaries ## latency and scale benchmarks against floors measured in the same run
	npx tsx test/bench/machine.ts
	npx tsx test/bench/local-sandbox.ts
	npx tsx test/bench/agent-loop.ts
	npx tsx test/bench/cluster-scale.ts
	npx tsx test/bench/node.ts
	npx tsx test/bench/pause-resume.ts
	npx tsx test/bench/memory.ts
	npx tsx test/bench/trigger-fire.ts
	npx tsx test/bench/rate-limit.ts
	npx tsx test/bench/channel-reply.ts
	npx tsx test/bench/fleet.ts
	npx tsx test/bench/management-auth.ts
	npx tsx test/bench/guardrails.ts
	npx tsx test/bench/exec-stream.ts
	npx tsx test/bench/files.ts
	npx tsx test/bench/dashboard.ts
	npx tsx test/bench/e2b.ts
	npx tsx test/bench/sdk.ts
	npx tsx test/bench/warm.ts
	npx tsx test/bench/fork.ts
	npx tsx test/bench/egress.ts

bench-smoke: setup cluster-binaries node-binaries ## every bench at a tiny size: each must finish and print its table (part of make test)
	test/bench/smoke.sh

e2e-kind: ## end to end on a kind cluster with real containers (needs Docker and kind)
	test/e2e/kind.sh

chart-package: ## helm package charts/berth into dist/charts (push it with helm push dist/charts/berth-<version>.tgz oci://<registry>/<path>)
	npx tsx test/chart/package.ts dist/charts

clean: ## remove build output (not data directories or images)
	npm run --silent clean
	rm -rf */dist */*.tsbuildinfo
