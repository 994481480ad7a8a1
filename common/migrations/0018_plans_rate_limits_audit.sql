-- Plans and budgets of organizations, the data plane's rate limit per API key, and the audit
-- log of management actions.

-- An organization's plan; null follows the install's default plan (configuration).
ALTER TABLE organizations ADD COLUMN plan text CHECK (plan IN ('free', 'pro', 'enterprise'));
-- Organizations from before plans were never limited: they keep that, on the enterprise plan.
UPDATE organizations SET plan = 'enterprise';
-- Budgets: the limits a new session of the organization gets for those it does not give itself.
ALTER TABLE organizations ADD COLUMN session_defaults jsonb NOT NULL DEFAULT '{}';

-- One row per API key: the whole seconds (Unix epoch) in which it was admitted during the
-- last window, ascending, with how many requests each admitted. A request counts for the
-- window's length in seconds from the start of the second it arrived in. Every API server
-- replica reads and writes the same row, under its row lock, so the limit holds across them.
-- Unlogged: a request's write skips the WAL and its flush at commit (most of the limiter's
-- cost); a crash of PostgreSQL, or a failover to a standby, empties the windows, which then
-- start again from nothing.
CREATE UNLOGGED TABLE rate_limit_windows (
  key_id text PRIMARY KEY REFERENCES api_keys (id) ON DELETE CASCADE,
  seconds bigint[] NOT NULL,
  counts integer[] NOT NULL,
  updated_at timestamptz NOT NULL
);

-- Takes one request of a key's window, in one statement (one round trip): finds the plan of
-- the organization and its limit, drops the seconds that left the window, admits the request
-- when fewer than the limit remain and counts it. A refused request is not counted.
--   used       requests counted in the window, this one included when admitted
--   reset_ms   until the oldest counted second leaves the window (0: none counted)
--   retry_ms   until a request would be admitted (0 when admitted)
CREATE FUNCTION rate_limit_take(
  p_key text,
  p_organization text,
  p_now timestamptz,
  p_limits jsonb,
  p_default_plan text,
  p_window_seconds integer
) RETURNS TABLE (plan text, lim integer, allowed boolean, used integer, reset_ms bigint, retry_ms bigint) AS $$
DECLARE
  now_ms bigint := floor(extract(epoch FROM p_now) * 1000);
  now_s bigint := floor(extract(epoch FROM p_now));
  kept_seconds bigint[] := '{}';
  kept_counts integer[] := '{}';
  old_seconds bigint[];
  old_counts integer[];
  total integer := 0;
  remaining integer;
  n integer;
  i integer;
BEGIN
  SELECT coalesce(o.plan, p_default_plan) INTO plan FROM organizations o WHERE o.id = p_organization;
  plan := coalesce(plan, p_default_plan);
  lim := (p_limits ->> plan)::integer;

  INSERT INTO rate_limit_windows (key_id, seconds, counts, updated_at) VALUES (p_key, '{}', '{}', p_now)
    ON CONFLICT (key_id) DO NOTHING;
  SELECT w.seconds, w.counts INTO old_seconds, old_counts FROM rate_limit_windows w WHERE w.key_id = p_key FOR UPDATE;

  n := coalesce(array_length(old_seconds, 1), 0);
  FOR i IN 1 .. n LOOP
    IF old_seconds[i] > now_s - p_window_seconds THEN
      kept_seconds := kept_seconds || old_seconds[i];
      kept_counts := kept_counts || old_counts[i];
      total := total + old_counts[i];
    END IF;
  END LOOP;

  allowed := total < lim;
  IF allowed THEN
    n := coalesce(array_length(kept_seconds, 1), 0);
    IF n > 0 AND kept_seconds[n] = now_s THEN
      kept_counts[n] := kept_counts[n] + 1;
    ELSE
      kept_seconds := kept_seconds || now_s;
      kept_counts := kept_counts || 1;
    END IF;
    total := total + 1;
    retry_ms := 0;
  ELSE
    -- The first second whose leaving brings the count under the limit.
    remaining := total;
    retry_ms := 0;
    FOR i IN 1 .. coalesce(array_length(kept_seconds, 1), 0) LOOP
      remaining := remaining - kept_counts[i];
      IF remaining < lim THEN
        retry_ms := (kept_seconds[i] + p_window_seconds) * 1000 - now_ms;
        EXIT;
      END IF;
    END LOOP;
  END IF;

  UPDATE rate_limit_windows w SET seconds = kept_seconds, counts = kept_counts, updated_at = p_now WHERE w.key_id = p_key;
  used := total;
  reset_ms := CASE WHEN coalesce(array_length(kept_seconds, 1), 0) = 0 THEN 0
                   ELSE (kept_seconds[1] + p_window_seconds) * 1000 - now_ms END;
  RETURN NEXT;
END;
$$ LANGUAGE plpgsql;

-- Management actions: who (a user, or the command line), what, when, on what.
CREATE TABLE audit_log (
  id text PRIMARY KEY,
  -- The order of recording: entries of one instant (one transaction, a test's clock) keep it.
  seq bigserial NOT NULL UNIQUE,
  organization_id text NOT NULL REFERENCES organizations (id),
  actor_type text NOT NULL CHECK (actor_type IN ('user', 'system')),
  actor_id text NOT NULL,
  action text NOT NULL,
  target_type text NOT NULL,
  target_id text NOT NULL,
  details jsonb NOT NULL DEFAULT '{}',
  at timestamptz NOT NULL
);
CREATE INDEX audit_log_organization ON audit_log (organization_id, seq);

-- The event log of an organization (GET /api/events): its events of one mode, newest first.
CREATE INDEX events_organization ON events (organization_id, mode, seq);
