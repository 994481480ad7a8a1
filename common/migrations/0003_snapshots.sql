-- Snapshot archives kept in storage and for how long: what storage billing (GB-hours) is
-- computed from. A row is written when a snapshot becomes ready and closed when its archive is
-- deleted; the resource itself may be gone by then.
CREATE TABLE snapshot_storage (
  snapshot_id text PRIMARY KEY,
  organization_id text NOT NULL,
  mode text NOT NULL,
  session_id text NOT NULL,
  agent_id text NOT NULL,
  size_bytes bigint NOT NULL,
  stored_from timestamptz NOT NULL,
  deleted_at timestamptz
);
CREATE INDEX snapshot_storage_session ON snapshot_storage (session_id, stored_from);
