# Berth: the two commands are `make run` and `make test`; each sets up what it needs first.
SHELL := /bin/bash
BERTH := node apiserver/dist/cli/main.js
ARGS ?=

.PHONY: help setup host deps build images run test test-unit test-integration bench clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-18s %s\n", $$1, $$2}'

setup: host build images ## everything below: host packages, gVisor, npm packages, build, sandbox images

host: ## mmdebstrap and gVisor's runsc on this host (root)
	@sandbox-images/local/install-host.sh

# npm writes node_modules/.package-lock.json on every install: reinstall when the lockfile is newer.
node_modules/.package-lock.json: package-lock.json package.json crds/package.json common/package.json operator/package.json apiserver/package.json
	npm ci --no-fund --no-audit

deps: node_modules/.package-lock.json ## npm packages

build: deps ## compile the TypeScript (tsc -b)
	npm run --silent build

images: build ## build the local sandbox images (base, go) if missing
	@$(BERTH) images build base go

run: setup ## run Berth on this machine: API, operator and gVisor sandboxes in one process (ARGS="--port 9000")
	$(BERTH) up $(ARGS)

test: setup ## every test tier: unit, then integration (real PostgreSQL, runsc, berth processes)
	npx vitest run

test-unit: deps ## unit tests only
	npx vitest run --project unit

test-integration: setup ## integration tests only
	npx vitest run --project integration

bench: setup ## sandbox latency benchmark against runsc floors measured in the same run
	npx tsx test/bench/local-sandbox.ts

clean: ## remove build output (not data directories or images)
	npm run --silent clean
	rm -rf */dist */*.tsbuildinfo
