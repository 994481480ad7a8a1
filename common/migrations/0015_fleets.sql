-- Fleets: one agent definition over many items, a bounded number at a time. The Fleet resource
-- (spec and status) lives in the resource store; what can be large or must be claimed lives here.

-- One row per fleet: what its reconciler has done once (the start and the end it announced), so
-- that events and stream events are written once however often it reconciles.
CREATE TABLE fleets (
  id text PRIMARY KEY,
  organization_id text NOT NULL,
  mode text NOT NULL CHECK (mode IN ('live', 'test')),
  created_at timestamptz NOT NULL,
  started_at timestamptz,
  ended_at timestamptz,
  -- why it ended: every item ended, the cost cap or a session limit stopped it, or it was cancelled
  outcome text CHECK (outcome IN ('completed', 'cost_limit', 'session_limit', 'cancelled'))
);

-- The items. An item runs as one job (source 'fleet'); the job id written into its row, in the
-- transaction that inserts the job, is the claim: an item with a job is never given another.
CREATE TABLE fleet_items (
  id text PRIMARY KEY,
  fleet_id text NOT NULL REFERENCES fleets (id) ON DELETE CASCADE,
  index integer NOT NULL,
  -- as given: a string or a JSON object
  input jsonb NOT NULL,
  state text NOT NULL CHECK (state IN ('pending', 'running', 'completed', 'failed', 'cancelled')),
  job_id text UNIQUE REFERENCES jobs (id),
  output text,
  error jsonb,
  cost_cents bigint,
  currency text,
  started_at timestamptz,
  finished_at timestamptz,
  UNIQUE (fleet_id, index),
  CHECK ((state = 'pending') = (job_id IS NULL) OR state = 'cancelled')
);
CREATE INDEX fleet_items_open ON fleet_items (fleet_id, index) WHERE state IN ('pending', 'running');
