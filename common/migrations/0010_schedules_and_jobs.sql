-- Jobs: one run of an agent definition for a user, started by a schedule or a trigger. The
-- operator's job executor takes queued jobs (SKIP LOCKED), gets or creates the user's session,
-- creates the agent, starts its run and follows the task to its end. A job is scoped like every
-- other row: the organization and the mode (live or test) of the key that owns its source.
CREATE TABLE jobs (
  id text PRIMARY KEY,
  organization_id text NOT NULL,
  mode text NOT NULL CHECK (mode IN ('live', 'test')),
  source text NOT NULL CHECK (source IN ('schedule', 'trigger')),
  source_id text NOT NULL,
  user_id text NOT NULL,
  -- the agent definition (an adef_ id, resolved when the job is enqueued) and its input
  definition_id text NOT NULL,
  input jsonb NOT NULL,
  state text NOT NULL CHECK (state IN ('queued', 'running', 'completed', 'failed', 'cancelled')),
  -- Written as the job advances; agent_id and task_id are chosen before the agent and the task
  -- are created, so an executor that takes over after a crash adopts them instead of making more.
  session_id text,
  agent_id text,
  task_id text,
  error jsonb,
  -- the task's cost in cents of `currency`, once it ended
  cost_cents bigint,
  currency text,
  -- An executor holds a job while it advances it; a claim that ran out is taken over.
  claimed_by text,
  claim_expires_at timestamptz,
  created_at timestamptz NOT NULL,
  started_at timestamptz,
  finished_at timestamptz
);
CREATE INDEX jobs_open ON jobs (created_at) WHERE state IN ('queued', 'running');
CREATE INDEX jobs_source ON jobs (source, source_id, created_at DESC);

CREATE FUNCTION notify_job() RETURNS trigger AS $$
BEGIN
  PERFORM pg_notify('berth_jobs', NEW.id);
  RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER jobs_notify AFTER INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION notify_job();

-- One row per matching time of a schedule that came due: the claim that makes a time run once,
-- however many reconciles or operators see it due. `missed` times (older than the grace window
-- when an operator saw them) have no job.
CREATE TABLE schedule_executions (
  id text PRIMARY KEY,
  schedule_id text NOT NULL,
  organization_id text NOT NULL,
  mode text NOT NULL CHECK (mode IN ('live', 'test')),
  scheduled_for timestamptz NOT NULL,
  outcome text NOT NULL CHECK (outcome IN ('fired', 'missed')),
  job_id text REFERENCES jobs (id),
  created_at timestamptz NOT NULL,
  UNIQUE (schedule_id, scheduled_for)
);
CREATE INDEX schedule_executions_history ON schedule_executions (schedule_id, scheduled_for DESC);
