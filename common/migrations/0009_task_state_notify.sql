-- The Agent reconciler derives an agent's Running condition from its task (ADR 18). Every change
-- of a task's state or claim names the agent to look at again on `berth_task_states`; lease
-- renewals and checkpoints, which change neither, stay quiet.
CREATE FUNCTION notify_task_state() RETURNS trigger AS $$
BEGIN
  PERFORM pg_notify('berth_task_states', NEW.agent_id);
  RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER tasks_state_notify_insert AFTER INSERT ON tasks FOR EACH ROW EXECUTE FUNCTION notify_task_state();
CREATE TRIGGER tasks_state_notify_update AFTER UPDATE OF state, attempt ON tasks FOR EACH ROW
  WHEN (OLD.state IS DISTINCT FROM NEW.state OR OLD.attempt IS DISTINCT FROM NEW.attempt)
  EXECUTE FUNCTION notify_task_state();
