-- Webhook triggers: a public URL that starts a job of an agent definition for one end-user when
-- a request signed with the trigger's secret arrives. The secret is sealed like every secret
-- (AES-256-GCM under BERTH_SECRETS_KEY, bound to its organization, mode and trigger, ADR 12);
-- only its first characters are kept in the clear, to show on reads. Deleting sets deleted_at:
-- the URL stops accepting at once, and the fires and their jobs stay readable.
CREATE TABLE triggers (
  id text PRIMARY KEY,
  organization_id text NOT NULL,
  mode text NOT NULL CHECK (mode IN ('live', 'test')),
  name text,
  user_id text NOT NULL,
  definition_id text NOT NULL REFERENCES agent_definitions (id),
  type text NOT NULL CHECK (type IN ('webhook')),
  secret_key_id text NOT NULL,
  secret_nonce bytea NOT NULL,
  secret_ciphertext bytea NOT NULL,
  secret_prefix text NOT NULL,
  created_at timestamptz NOT NULL,
  deleted_at timestamptz
);
CREATE INDEX triggers_organization ON triggers (organization_id, mode, created_at DESC) WHERE deleted_at IS NULL;

-- One row per accepted fire, written in the transaction that enqueues its job. A request that
-- also signed a timestamp keeps its signature here: the unique index refuses the same signed
-- request a second time (a replay), and the timestamp's tolerance window refuses it later.
CREATE TABLE trigger_fires (
  job_id text PRIMARY KEY REFERENCES jobs (id),
  trigger_id text NOT NULL REFERENCES triggers (id),
  received_at timestamptz NOT NULL,
  -- x-trigger-timestamp of a timestamped request
  signed_at timestamptz,
  signature bytea,
  CHECK ((signed_at IS NULL) = (signature IS NULL))
);
CREATE UNIQUE INDEX trigger_fires_replay ON trigger_fires (trigger_id, signature) WHERE signature IS NOT NULL;
CREATE INDEX trigger_fires_trigger ON trigger_fires (trigger_id, received_at DESC);
