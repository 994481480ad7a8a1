-- BYOI provider configurations: a provider listed here runs on the organization's own
-- infrastructure or account (its credentials in the named secret); one not listed runs managed.
CREATE TABLE provider_configs (
  organization_id text NOT NULL,
  mode text NOT NULL,
  provider text NOT NULL,
  credential_ref text NOT NULL,
  config jsonb,
  enabled boolean NOT NULL,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  PRIMARY KEY (organization_id, mode, provider)
);
