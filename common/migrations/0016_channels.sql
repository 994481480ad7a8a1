-- Channels: an agent definition answering people on a web page (chat_embed), in Slack, by email
-- or on the phone. Credentials (Slack signing secret and bot token, the email provider's key,
-- the phone provider's auth token, the email webhook's signing secret) are sealed together as one
-- JSON object (AES-256-GCM under BERTH_SECRETS_KEY, bound to the channel, ADR 12). Deleting sets
-- deleted_at: every public route of the channel stops answering at once; its conversations stay.
CREATE TABLE channels (
  id text PRIMARY KEY,
  organization_id text NOT NULL,
  mode text NOT NULL CHECK (mode IN ('live', 'test')),
  type text NOT NULL CHECK (type IN ('chat_embed', 'slack', 'email', 'phone')),
  name text,
  definition_id text NOT NULL REFERENCES agent_definitions (id),
  -- the type's settings that are not credentials (theme, workspace, address, phoneNumber, ...)
  settings jsonb NOT NULL,
  allowed_origins text[] NOT NULL DEFAULT '{}',
  credentials_key_id text,
  credentials_nonce bytea,
  credentials_ciphertext bytea,
  -- the last characters of each credential, to show on reads
  credential_hints jsonb NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  deleted_at timestamptz
);
CREATE INDEX channels_organization ON channels (organization_id, mode, created_at DESC) WHERE deleted_at IS NULL;

-- One conversation per visitor of a channel: the widget's visitor id, a Slack thread, an email
-- sender, a phone call. `reply_to` keeps what the outbound adapter needs to answer there.
CREATE TABLE channel_conversations (
  id text PRIMARY KEY,
  channel_id text NOT NULL REFERENCES channels (id),
  visitor_id text NOT NULL,
  reply_to jsonb NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL,
  UNIQUE (channel_id, visitor_id)
);

CREATE TABLE channel_messages (
  seq bigserial UNIQUE,
  id text PRIMARY KEY,
  conversation_id text NOT NULL REFERENCES channel_conversations (id),
  role text NOT NULL CHECK (role IN ('user', 'assistant')),
  content text NOT NULL,
  -- the job that answers a user message; on the reply, the job that wrote it
  job_id text REFERENCES jobs (id),
  -- the provider's id of an inbound message (Slack event_id, email Message-ID): a retried
  -- delivery of the same message is not answered twice
  external_id text,
  created_at timestamptz NOT NULL,
  -- A reply that goes out through a provider (Slack, email) is sent by the operator's channel
  -- reply sender: pending until sent, or failed after its retries; claimed by one sender at a time.
  delivery_state text CHECK (delivery_state IN ('pending', 'sent', 'failed')),
  delivery_attempts integer NOT NULL DEFAULT 0,
  delivery_next_at timestamptz,
  delivery_error text,
  delivery_claimed_by text,
  delivery_claim_expires_at timestamptz
);
CREATE INDEX channel_messages_conversation ON channel_messages (conversation_id, seq);
CREATE INDEX channel_messages_delivery_due ON channel_messages (delivery_next_at) WHERE delivery_state = 'pending';
CREATE UNIQUE INDEX channel_messages_external ON channel_messages (conversation_id, external_id) WHERE external_id IS NOT NULL;

-- Streams of a conversation read on from the last message they sent when this fires.
CREATE FUNCTION notify_channel_message() RETURNS trigger AS $$
BEGIN
  PERFORM pg_notify('berth_channel_messages', NEW.conversation_id);
  RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER channel_messages_notify AFTER INSERT ON channel_messages FOR EACH ROW EXECUTE FUNCTION notify_channel_message();

-- Public-route limits: requests counted per key (channel, visitor, IP) in fixed windows, shared by
-- every API replica. Old windows are pruned as new ones are counted.
CREATE TABLE channel_rate_windows (
  bucket text NOT NULL,
  window_start timestamptz NOT NULL,
  count integer NOT NULL,
  PRIMARY KEY (bucket, window_start)
);

-- A reply is a job of the channel's definition; the job carries the conversation before the
-- new message, which the run starts from (the agent sees the history).
ALTER TABLE jobs DROP CONSTRAINT jobs_source_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_source_check CHECK (source IN ('schedule', 'trigger', 'workflow', 'fleet', 'channel'));
ALTER TABLE jobs ADD COLUMN history jsonb;
