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
