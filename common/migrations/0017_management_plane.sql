-- The management plane: people who sign in (users), their roles in organizations (members),
-- and the server-side records of their signed-in browsers (sign-in sessions).

-- A person, as an identity provider names them: one row per (issuer, subject). Embedded
-- installs without an identity provider use the issuer `berth:embedded`.
CREATE TABLE users (
  id text PRIMARY KEY,
  issuer text NOT NULL,
  subject text NOT NULL,
  email text,
  name text,
  created_at timestamptz NOT NULL DEFAULT now(),
  last_sign_in_at timestamptz,
  UNIQUE (issuer, subject)
);

-- A user's role in an organization. A row with accepted_at NULL is a pending invite: it grants
-- nothing, and after 7 days it has expired (it is then replaced by a new invite, never accepted).
CREATE TABLE organization_members (
  id text PRIMARY KEY,
  organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  user_id text NOT NULL REFERENCES users (id),
  role text NOT NULL CHECK (role IN ('owner', 'admin', 'member', 'viewer')),
  invited_at timestamptz NOT NULL,
  accepted_at timestamptz,
  invited_by text REFERENCES users (id),
  UNIQUE (organization_id, user_id),
  -- The owner is a member who accepted: ownership is never pending.
  CHECK (role <> 'owner' OR accepted_at IS NOT NULL)
);
-- At most one owner per organization; the code keeps "at least one" (the owner cannot leave
-- without a transfer, which swaps the two roles in one transaction).
CREATE UNIQUE INDEX organization_members_one_owner ON organization_members (organization_id) WHERE role = 'owner';
CREATE INDEX organization_members_user ON organization_members (user_id);

-- A signed-in browser. The cookie carries a random token; only its SHA-256 is kept, so a copy of
-- the table signs nobody in. Revoking (sign-out, or an operator) ends it at the next request.
CREATE TABLE sign_in_sessions (
  id text PRIMARY KEY,
  token_hash bytea NOT NULL UNIQUE,
  user_id text NOT NULL REFERENCES users (id),
  -- The organization the browser acts in; NULL until the user belongs to one.
  organization_id text REFERENCES organizations (id) ON DELETE SET NULL,
  csrf_token text NOT NULL,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  revoked_at timestamptz
);
CREATE INDEX sign_in_sessions_user ON sign_in_sessions (user_id);

-- One-time sign-in links of embedded mode (`berth up` on first start, `berth admin login`).
CREATE TABLE sign_in_links (
  token_hash bytea PRIMARY KEY,
  user_id text NOT NULL REFERENCES users (id),
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  used_at timestamptz
);
