-- Outbound webhooks: registrations, one delivery per (webhook, event) with its retry schedule,
-- and each attempt for the delivery log. Deliveries are made from the events outbox: an event
-- is fanned out into deliveries once (fanned_out), in the transaction that inserts them.

CREATE TABLE webhooks (
  id text PRIMARY KEY,
  organization_id text NOT NULL,
  mode text NOT NULL,
  url text NOT NULL,
  events text[] NOT NULL,
  secret text NOT NULL,
  created_at timestamptz NOT NULL,
  deleted_at timestamptz
);
CREATE INDEX webhooks_organization ON webhooks (organization_id, mode, created_at) WHERE deleted_at IS NULL;

ALTER TABLE events ADD COLUMN fanned_out boolean NOT NULL DEFAULT false;
-- Events from before webhooks existed are not delivered.
UPDATE events SET fanned_out = true;
CREATE INDEX events_to_fan_out ON events (seq) WHERE NOT fanned_out;

CREATE TABLE webhook_deliveries (
  id text PRIMARY KEY,
  webhook_id text NOT NULL REFERENCES webhooks (id),
  -- null for the sample of POST /v1/webhooks/:id/test
  event_id text,
  event_type text NOT NULL,
  payload text NOT NULL,
  state text NOT NULL CHECK (state IN ('pending', 'succeeded', 'failed', 'cancelled')),
  attempts integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz,
  claimed_by text,
  claim_expires_at timestamptz,
  last_status integer,
  last_error text,
  last_attempt_at timestamptz,
  created_at timestamptz NOT NULL,
  UNIQUE (webhook_id, event_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_log ON webhook_deliveries (webhook_id, created_at DESC);

CREATE TABLE webhook_attempts (
  delivery_id text NOT NULL REFERENCES webhook_deliveries (id),
  attempt integer NOT NULL,
  started_at timestamptz NOT NULL,
  duration_ms integer NOT NULL,
  status integer,
  error text,
  PRIMARY KEY (delivery_id, attempt)
);
