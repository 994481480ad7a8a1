-- Billing: the environment of every charge (the usage routes filter on it), the compute meter's
-- progress per sandbox lifetime, and the storage meter's progress per archive.

ALTER TABLE usage_ledger ADD COLUMN environment text NOT NULL DEFAULT 'production'
  CHECK (environment IN ('production', 'staging', 'development'));
CREATE INDEX usage_ledger_user ON usage_ledger (organization_id, user_id, occurred_at);

-- One row per sandbox lifetime (an agent's sandbox from `startedAt` until it was released):
-- how much of it has been charged. The charge and the row's update share a transaction, so a
-- restart neither charges a minute twice nor loses one.
CREATE TABLE compute_meter (
  agent_id text NOT NULL,
  started_at timestamptz NOT NULL,
  organization_id text NOT NULL,
  session_id text NOT NULL,
  metered_ms bigint NOT NULL DEFAULT 0,
  closed boolean NOT NULL DEFAULT false,
  PRIMARY KEY (agent_id, started_at)
);
CREATE INDEX compute_meter_open ON compute_meter (closed) WHERE NOT closed;

ALTER TABLE snapshot_storage ADD COLUMN user_id text;
ALTER TABLE snapshot_storage ADD COLUMN environment text NOT NULL DEFAULT 'production';
-- Milliseconds of the archive's storage time already charged.
ALTER TABLE snapshot_storage ADD COLUMN metered_ms bigint NOT NULL DEFAULT 0;
