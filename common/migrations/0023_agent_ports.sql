-- Ports of an agent's sandbox exposed through the API server's proxy (ADR 40). Off by default: a
-- port is reachable only while it has a row here, and only by keys of the agent's organization and mode.
CREATE TABLE agent_ports (
  agent_id text NOT NULL,
  port integer NOT NULL CHECK (port BETWEEN 1 AND 65535),
  organization_id text NOT NULL,
  mode text NOT NULL CHECK (mode IN ('live', 'test')),
  created_at timestamptz NOT NULL,
  PRIMARY KEY (agent_id, port)
);
