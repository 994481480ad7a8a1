-- Jobs for workflow steps and fleet items (ADR 26): two more sources, a session given by the
-- source (a fleet runs its items in one session), a timeout per job, a cancel of a job that is
-- running, and a notification when a job ends, so the source's driver wakes at once.
ALTER TABLE jobs DROP CONSTRAINT jobs_source_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_source_check CHECK (source IN ('schedule', 'trigger', 'workflow', 'fleet'));

-- How long the job may take from its start (queued → running) to its task's end; past it the
-- executor fails the job with `timeout` and ends its agent. NULL: only the agent's own timeout.
ALTER TABLE jobs ADD COLUMN timeout_ms bigint CHECK (timeout_ms > 0);
-- Set by `cancelJobsOf` on a running job: the executor ends its agent (the task is cancelled by
-- its runner) and writes the job `cancelled`. Queued jobs are cancelled at once.
ALTER TABLE jobs ADD COLUMN cancel_requested_at timestamptz;

-- `source:sourceId:jobId` on `berth_job_ended` when a job reaches a final state, in the
-- transaction that writes it.
CREATE FUNCTION notify_job_ended() RETURNS trigger AS $$
BEGIN
  PERFORM pg_notify('berth_job_ended', NEW.source || ':' || NEW.source_id || ':' || NEW.id);
  RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER jobs_ended_notify AFTER UPDATE OF state ON jobs FOR EACH ROW
  WHEN (OLD.state IS DISTINCT FROM NEW.state AND NEW.state IN ('completed', 'failed', 'cancelled'))
  EXECUTE FUNCTION notify_job_ended();

-- Workflows (ADR 26): a named graph of steps, each running an agent definition; `version`
-- counts updates. Deleting archives: the workflow stays readable, with its runs, and cannot run.
CREATE TABLE workflows (
  id text PRIMARY KEY,
  organization_id text NOT NULL,
  mode text NOT NULL CHECK (mode IN ('live', 'test')),
  name text NOT NULL,
  description text,
  version integer NOT NULL DEFAULT 1,
  steps jsonb NOT NULL,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  archived_at timestamptz
);
CREATE UNIQUE INDEX workflows_name ON workflows (organization_id, mode, name) WHERE archived_at IS NULL;
CREATE INDEX workflows_list ON workflows (organization_id, mode, id DESC);

-- One run of a workflow: the steps of the version it ran (a later update does not change it),
-- its input, and its end. Only the operator's workflow driver ends a run, except a cancel.
CREATE TABLE workflow_runs (
  id text PRIMARY KEY,
  workflow_id text NOT NULL REFERENCES workflows (id),
  workflow_version integer NOT NULL,
  organization_id text NOT NULL,
  mode text NOT NULL CHECK (mode IN ('live', 'test')),
  user_id text NOT NULL,
  input jsonb NOT NULL,
  steps jsonb NOT NULL,
  status text NOT NULL CHECK (status IN ('running', 'completed', 'failed', 'partial', 'cancelled')),
  output text,
  error jsonb,
  -- the sum of its steps' jobs' costs, written when the run ended
  cost_cents bigint,
  currency text,
  created_at timestamptz NOT NULL,
  finished_at timestamptz
);
CREATE INDEX workflow_runs_of ON workflow_runs (workflow_id, id DESC);
CREATE INDEX workflow_runs_open ON workflow_runs (id) WHERE status = 'running';

-- One attempt of one step of a run: the claim that makes the attempt start once (its job is
-- queued in the transaction that inserts it), then the attempt's outcome copied from its job.
CREATE TABLE workflow_step_runs (
  run_id text NOT NULL REFERENCES workflow_runs (id),
  step text NOT NULL,
  attempt integer NOT NULL CHECK (attempt >= 1),
  job_id text NOT NULL REFERENCES jobs (id),
  state text NOT NULL CHECK (state IN ('running', 'completed', 'failed', 'cancelled')),
  output text,
  error jsonb,
  cost_cents bigint,
  created_at timestamptz NOT NULL,
  finished_at timestamptz,
  PRIMARY KEY (run_id, step, attempt)
);

-- What a run's SSE stream shows, in order; the seq is the event id Last-Event-ID resumes from.
CREATE TABLE workflow_run_events (
  seq bigserial PRIMARY KEY,
  run_id text NOT NULL,
  type text NOT NULL,
  data jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX workflow_run_events_of ON workflow_run_events (run_id, seq);

CREATE FUNCTION notify_workflow_run_event() RETURNS trigger AS $$
BEGIN
  PERFORM pg_notify('berth_workflow_stream', run_id) FROM inserted GROUP BY run_id;
  RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER workflow_run_events_notify AFTER INSERT ON workflow_run_events
  REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION notify_workflow_run_event();

-- A new run wakes the driver at once.
CREATE FUNCTION notify_workflow_run() RETURNS trigger AS $$
BEGIN
  PERFORM pg_notify('berth_workflow_runs', NEW.id);
  RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER workflow_runs_notify AFTER INSERT ON workflow_runs FOR EACH ROW EXECUTE FUNCTION notify_workflow_run();
