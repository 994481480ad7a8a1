-- Agent definitions: reusable agent configurations with a version history. Every update writes
-- a new version; `current_version` says which one agents are created from, so a rollback only
-- moves the pointer and keeps the versions after it. Deleting archives (archived_at): the
-- definition and its versions stay readable, and its name is free for a new definition.
CREATE TABLE agent_definitions (
  id text PRIMARY KEY,
  organization_id text NOT NULL,
  mode text NOT NULL CHECK (mode IN ('live', 'test')),
  name text NOT NULL,
  current_version integer NOT NULL,
  archived_at timestamptz,
  created_at timestamptz NOT NULL,
  -- the last update, rollback or archiving
  updated_at timestamptz NOT NULL
);
-- Agents name a definition by its name or id, so a name is one definition among the live ones.
CREATE UNIQUE INDEX agent_definitions_name ON agent_definitions (organization_id, mode, name) WHERE archived_at IS NULL;
CREATE INDEX agent_definitions_organization ON agent_definitions (organization_id, mode, created_at DESC);

CREATE TABLE agent_definition_versions (
  definition_id text NOT NULL REFERENCES agent_definitions (id),
  version integer NOT NULL CHECK (version > 0),
  -- description, compute, model, systemPrompt, tools, browser, timeout and config (model settings)
  config jsonb NOT NULL,
  changelog text NOT NULL,
  -- the API key that wrote the version
  created_by text NOT NULL,
  created_at timestamptz NOT NULL,
  PRIMARY KEY (definition_id, version)
);
