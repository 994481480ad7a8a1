-- Secrets, encrypted (AES-256-GCM, see common/src/secrets.ts): a nonce and the ciphertext with
-- its tag per value, and the id of the key it was written with, for rotation. `scope` is a
-- session id, or '' for the organization.
CREATE TABLE secrets (
  organization_id text NOT NULL,
  mode text NOT NULL,
  scope text NOT NULL,
  name text NOT NULL,
  key_id text NOT NULL,
  nonce bytea NOT NULL,
  ciphertext bytea NOT NULL,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  PRIMARY KEY (organization_id, mode, scope, name)
);
CREATE INDEX secrets_key ON secrets (key_id);
