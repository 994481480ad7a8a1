-- One notification per statement and agent, rather than one per event: the loop writes a
-- step's events in one statement, and each notification has every SSE subscriber of the agent
-- read the table. The payload's seq is the newest event the statement wrote.
DROP TRIGGER stream_events_notify ON stream_events;
DROP FUNCTION notify_stream_event();

CREATE FUNCTION notify_stream_events() RETURNS trigger AS $$
BEGIN
  PERFORM pg_notify('berth_stream', json_build_object('agentId', agent_id, 'seq', max(seq)::text)::text)
  FROM inserted GROUP BY agent_id;
  RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER stream_events_notify AFTER INSERT ON stream_events
  REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION notify_stream_events();
