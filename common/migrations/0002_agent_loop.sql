-- Tasks of the agent loop. One active task per agent: a second run while one is queued or
-- running violates the partial unique index and is answered 409.
CREATE TABLE tasks (
  id text PRIMARY KEY,
  organization_id text NOT NULL,
  mode text NOT NULL,
  session_id text NOT NULL,
  agent_id text NOT NULL,
  input text NOT NULL,
  state text NOT NULL CHECK (state IN ('queued', 'running', 'completed', 'failed', 'cancelled')),
  -- Claims: a runner holds a task while its lease is fresh; `attempt` fences out a runner
  -- that lost its claim (every write of a runner names the attempt it claimed).
  attempt integer NOT NULL DEFAULT 0,
  claimed_by text,
  lease_expires_at timestamptz,
  -- The loop's checkpoint: the conversation so far, so that a runner taking over continues it.
  conversation jsonb NOT NULL DEFAULT '[]',
  steps integer NOT NULL DEFAULT 0,
  input_tokens bigint NOT NULL DEFAULT 0,
  output_tokens bigint NOT NULL DEFAULT 0,
  output text,
  error jsonb,
  created_at timestamptz NOT NULL DEFAULT now(),
  started_at timestamptz,
  finished_at timestamptz
);
CREATE UNIQUE INDEX tasks_one_active_per_agent ON tasks (agent_id) WHERE state IN ('queued', 'running');
CREATE INDEX tasks_claimable ON tasks (created_at) WHERE state IN ('queued', 'running');
CREATE INDEX tasks_agent ON tasks (agent_id, created_at);

CREATE FUNCTION notify_task() RETURNS trigger AS $$
BEGIN
  PERFORM pg_notify('berth_tasks', NEW.id);
  RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER tasks_notify AFTER INSERT ON tasks FOR EACH ROW EXECUTE FUNCTION notify_task();

-- What an agent's stream shows (thinking, tool_call, tool_result, output, error), in order;
-- the sequence number is the SSE event id that Last-Event-ID replays from.
CREATE TABLE stream_events (
  seq bigserial PRIMARY KEY,
  agent_id text NOT NULL,
  task_id text,
  type text NOT NULL,
  data jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX stream_events_agent ON stream_events (agent_id, seq);

CREATE FUNCTION notify_stream_event() RETURNS trigger AS $$
BEGIN
  PERFORM pg_notify('berth_stream', json_build_object('agentId', NEW.agent_id, 'seq', NEW.seq::text)::text);
  RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER stream_events_notify AFTER INSERT ON stream_events FOR EACH ROW EXECUTE FUNCTION notify_stream_event();

-- Append-only usage ledger. Amounts are in nanocents (1e-9 cent), so that many small
-- charges sum exactly; reports round the sum, never each row. A dedupe key makes a charge
-- written twice (a retried step, a runner taking over) count once.
CREATE TABLE usage_ledger (
  id bigserial PRIMARY KEY,
  organization_id text NOT NULL,
  session_id text NOT NULL,
  user_id text NOT NULL,
  agent_id text,
  task_id text,
  kind text NOT NULL CHECK (kind IN ('model', 'compute', 'storage')),
  provider text NOT NULL,
  model text,
  input_tokens bigint NOT NULL DEFAULT 0,
  output_tokens bigint NOT NULL DEFAULT 0,
  quantity numeric NOT NULL DEFAULT 0,
  amount_nanocents bigint NOT NULL CHECK (amount_nanocents >= 0),
  currency text NOT NULL,
  billing_mode text NOT NULL,
  occurred_at timestamptz NOT NULL DEFAULT now(),
  dedupe_key text NOT NULL UNIQUE
);
CREATE INDEX usage_ledger_session ON usage_ledger (session_id, occurred_at);
CREATE INDEX usage_ledger_organization ON usage_ledger (organization_id, occurred_at);
CREATE INDEX usage_ledger_task ON usage_ledger (task_id);
