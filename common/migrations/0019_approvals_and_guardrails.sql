-- Approvals: a tool call that an agent's approval policy names waits here for a person's
-- decision. The row is written in the transaction of the loop's step that asks for the call,
-- so a runner that dies while the call waits leaves the request for the runner that takes the
-- task over; one row per (task, tool call).
CREATE TABLE approvals (
  id text PRIMARY KEY,
  organization_id text NOT NULL,
  mode text NOT NULL,
  session_id text NOT NULL,
  agent_id text NOT NULL,
  task_id text NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
  tool_call_id text NOT NULL,
  tool text NOT NULL,
  -- The call's input with the agent's secret values masked: what a reviewer sees.
  preview jsonb NOT NULL,
  -- Which rule of the policy asked for the approval (its index).
  rule integer NOT NULL,
  -- cancelled: the run ended (paused, terminated, failed) while the call waited.
  state text NOT NULL CHECK (state IN ('pending', 'approved', 'denied', 'expired', 'cancelled')),
  reason text,
  decided_by text,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  decided_at timestamptz,
  -- When the runner started the approved call: a runner taking the task over after this reports
  -- the call interrupted rather than running it twice.
  call_started_at timestamptz,
  UNIQUE (task_id, tool_call_id),
  CHECK ((state = 'pending') = (decided_at IS NULL))
);
CREATE INDEX approvals_pending ON approvals (organization_id, mode, id) WHERE state = 'pending';
CREATE INDEX approvals_agent ON approvals (agent_id, id);

-- What an agent's guardrails found during a run, in order: { rule, action, where, kind, count }.
ALTER TABLE tasks ADD COLUMN guardrail_hits jsonb NOT NULL DEFAULT '[]';
