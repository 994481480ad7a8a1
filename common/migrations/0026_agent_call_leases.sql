-- Calls in flight on agents with an idle policy (ADR 45): each exec, stream, terminal, process,
-- file or port call holds a row while it runs (renewed while it lasts; a process that died leaves
-- a row that lapses at held_until). The Agent reconciler reads them beside agent_activity: an agent
-- with a call in flight is not idle, and an idle pause is called off, right before its checkpoint,
-- when a call took a lease meanwhile.

CREATE TABLE agent_call_leases (
  id text PRIMARY KEY,
  agent_id text NOT NULL,
  held_until timestamptz NOT NULL
);
CREATE INDEX agent_call_leases_agent ON agent_call_leases (agent_id);
