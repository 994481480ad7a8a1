-- The Agent reconciler reads an agent's spend so far on each reconcile (status.cost, BudgetOK):
-- one index range of its ledger rows, not a scan of the ledger.
CREATE INDEX usage_ledger_agent ON usage_ledger (agent_id);
