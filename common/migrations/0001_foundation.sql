-- Organizations own keys and everything created with them.
CREATE TABLE organizations (
  id text PRIMARY KEY,
  name text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- API keys are stored as SHA-256 of the full key: they are long random strings,
-- so a fast hash is enough, and the full key is never kept.
CREATE TABLE api_keys (
  id text PRIMARY KEY,
  organization_id text NOT NULL REFERENCES organizations (id),
  mode text NOT NULL CHECK (mode IN ('live', 'test')),
  label text NOT NULL DEFAULT '',
  prefix text NOT NULL,
  secret_hash bytea NOT NULL UNIQUE,
  created_by text,
  created_at timestamptz NOT NULL DEFAULT now(),
  last_used_at timestamptz,
  revoked_at timestamptz
);
CREATE INDEX api_keys_organization ON api_keys (organization_id, created_at);

-- The embedded resource store: Session, Agent (and later Snapshot, Schedule, Fleet)
-- with the same metadata a Kubernetes object carries.
CREATE SEQUENCE resource_version_seq;
CREATE TABLE resources (
  kind text NOT NULL,
  name text NOT NULL,
  uid uuid NOT NULL UNIQUE,
  resource_version bigint NOT NULL,
  generation bigint NOT NULL DEFAULT 1,
  labels jsonb NOT NULL DEFAULT '{}',
  owner_references jsonb NOT NULL DEFAULT '[]',
  finalizers text[] NOT NULL DEFAULT '{}',
  spec jsonb NOT NULL,
  status jsonb,
  created_at timestamptz NOT NULL,
  deletion_timestamp timestamptz,
  PRIMARY KEY (kind, name)
);
CREATE INDEX resources_labels ON resources USING gin (labels jsonb_path_ops);
CREATE INDEX resources_owners ON resources USING gin (owner_references jsonb_path_ops);

-- Every write wakes the watchers; the payload names the object, watchers read it themselves.
CREATE FUNCTION notify_resource_change() RETURNS trigger AS $$
DECLARE
  changed resources;
BEGIN
  IF TG_OP = 'DELETE' THEN changed := OLD; ELSE changed := NEW; END IF;
  PERFORM pg_notify('berth_resources', json_build_object(
    'type', CASE TG_OP WHEN 'INSERT' THEN 'ADDED' WHEN 'UPDATE' THEN 'MODIFIED' ELSE 'DELETED' END,
    'kind', changed.kind,
    'name', changed.name,
    'resourceVersion', changed.resource_version::text)::text);
  RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER resources_notify AFTER INSERT OR UPDATE OR DELETE ON resources
  FOR EACH ROW EXECUTE FUNCTION notify_resource_change();

-- One default session per end-user, so that get-or-create by userId is race-free
-- whichever resource store holds the sessions.
CREATE TABLE session_users (
  organization_id text NOT NULL,
  mode text NOT NULL,
  user_id text NOT NULL,
  session_id text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, mode, user_id)
);

-- The event outbox. Ids are derived from what happened, so writing an event twice
-- (a reconcile that runs again after a crash) stores it once.
CREATE TABLE events (
  seq bigserial UNIQUE,
  id text PRIMARY KEY,
  organization_id text NOT NULL,
  mode text NOT NULL,
  type text NOT NULL,
  subject_id text,
  data jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_subject ON events (subject_id, seq);
CREATE INDEX events_type ON events (organization_id, type, seq);

CREATE FUNCTION notify_event() RETURNS trigger AS $$
BEGIN
  PERFORM pg_notify('berth_events', json_build_object(
    'seq', NEW.seq::text, 'id', NEW.id, 'type', NEW.type, 'subjectId', NEW.subject_id)::text);
  RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER events_notify AFTER INSERT ON events
  FOR EACH ROW EXECUTE FUNCTION notify_event();
