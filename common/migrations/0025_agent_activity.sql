-- When each agent with an idle policy (`lifecycle.idle`, ADR 45) last had traffic: exec, run,
-- stream, terminal, background-process, file and port calls write it; the Agent reconciler reads
-- it to pause the agent once `pauseAfter` has passed since. One row an agent, written in place.

CREATE TABLE agent_activity (
  agent_id text PRIMARY KEY,
  last_activity_at timestamptz NOT NULL
);
