-- When each agent with an idle policy (`lifecycle.idle`, ADR 45) last had traffic: exec, run,
-- stream, terminal, background-process, file and port calls write it; the Agent reconciler reads
-- it to pause the agent once `pauseAfter` has passed since. One row an agent, written in place.

CREATE TABLE agent_activity (
  agent_id text PRIMARY KEY,
  last_activity_at timestamptz NOT NULL
);

-- The sandboxes of warm pools (WarmPool resources, ADR 45): started by the pool's reconciler
-- (`starting`, then `ready`), claimed by agent creation (`claimed`: one row update with SKIP
-- LOCKED, so two creations never take the same sandbox). Claimed rows stay as the pool's record
-- of claims until the pool is deleted.
-- The pool's shape is copied into each row, so that a claim is one statement over this table.
CREATE TABLE warm_sandboxes (
  id text PRIMARY KEY,
  pool text NOT NULL,
  organization_id text NOT NULL,
  mode text NOT NULL CHECK (mode IN ('live', 'test')),
  provider text NOT NULL,
  compute text NOT NULL,
  browser boolean NOT NULL,
  definition text,
  state text NOT NULL CHECK (state IN ('starting', 'ready', 'claimed')),
  agent_id text,
  created_at timestamptz NOT NULL,
  ready_at timestamptz,
  claimed_at timestamptz
);
CREATE INDEX warm_sandboxes_pool ON warm_sandboxes (pool);
CREATE INDEX warm_sandboxes_ready ON warm_sandboxes (organization_id, mode, provider, compute, browser, created_at) WHERE state = 'ready';
CREATE INDEX warm_sandboxes_agent ON warm_sandboxes (agent_id) WHERE agent_id IS NOT NULL;
