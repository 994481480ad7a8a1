#!/usr/bin/env bash
# Every bench at a tiny size, so that none rots unseen: each must finish and print its table
# (its lines against the floor measured in the same run); the numbers of so few runs mean nothing and are not checked.
set -uo pipefail
cd "$(dirname "$0")/../.."
export BENCH_RUNS=2 BENCH_GAP_MS=10 BENCH_WAKE_RUNS=1 BENCH_FORKS=2 BENCH_LOOP_STEPS=2 BENCH_LOOP_RUNS=1 BENCH_PAUSE_RUNS=2 BENCH_CLUSTER_SIZES=5 BENCH_IDLE_AGENTS=3 BENCH_BURST=3 BENCH_FLEET_ITEMS=5 BENCH_FLEET_FLOOR=3 BENCH_FLEET_CONCURRENCY=2
passed=0 failed=0
for bench in machine local-sandbox agent-loop pause-resume cluster-scale node memory trigger-fire fleet rate-limit management-auth channel-reply guardrails exec-stream dashboard e2b sdk warm fork files egress; do
  started=$SECONDS
  # A bench that hangs fails here, with its output, rather than holding the whole run.
  if output=$(timeout --kill-after=10 600 npx tsx "test/bench/$bench.ts" 2>&1) && grep -q 'floor' <<<"$output"; then
    echo "bench-smoke: $bench printed its table in $((SECONDS - started)) s"
    passed=$((passed + 1))
  else
    echo "bench-smoke: $bench FAILED after $((SECONDS - started)) s:" >&2
    tail -n 40 <<<"$output" >&2
    failed=$((failed + 1))
  fi
done
if [[ -n "${BERTH_TEST_RESULTS:-}" ]]; then
  echo "{\"passed\": $passed, \"failed\": $failed}" >"$BERTH_TEST_RESULTS/bench.json"
fi
echo "bench-smoke: $passed passed, $failed failed"
((failed == 0))
