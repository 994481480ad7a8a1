-- Knowledge: collections of documents per organization, their sources (text, uploaded files,
-- URLs fetched by the server) and the sources' chunks, searched with PostgreSQL full-text
-- search. A collection with a session_id is that session's default collection (`knowledge: true`).

CREATE TABLE knowledge_collections (
  id text PRIMARY KEY,
  organization_id text NOT NULL,
  mode text NOT NULL CHECK (mode IN ('live', 'test')),
  name text NOT NULL,
  description text,
  session_id text,
  created_at timestamptz NOT NULL,
  UNIQUE (organization_id, mode, name)
);
-- At most one default collection a session.
CREATE UNIQUE INDEX knowledge_collections_session ON knowledge_collections (session_id) WHERE session_id IS NOT NULL;

CREATE TABLE knowledge_sources (
  id text PRIMARY KEY,
  collection_id text NOT NULL REFERENCES knowledge_collections (id) ON DELETE CASCADE,
  type text NOT NULL CHECK (type IN ('text', 'file', 'url')),
  name text NOT NULL,
  url text,
  state text NOT NULL CHECK (state IN ('synced', 'failed')),
  error text,
  chunk_count integer NOT NULL DEFAULT 0,
  -- the bytes of text the source's chunks hold
  bytes bigint NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL,
  synced_at timestamptz
);
CREATE INDEX knowledge_sources_collection ON knowledge_sources (collection_id, id);

CREATE TABLE knowledge_chunks (
  id bigserial PRIMARY KEY,
  source_id text NOT NULL REFERENCES knowledge_sources (id) ON DELETE CASCADE,
  collection_id text NOT NULL REFERENCES knowledge_collections (id) ON DELETE CASCADE,
  ordinal integer NOT NULL,
  content text NOT NULL,
  search tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED,
  -- with BERTH_EMBEDDINGS: the chunk's embedding and the model that made it (a plain array: the
  -- embedded PostgreSQL has no pgvector; similarity is computed over a collection's rows)
  embedding real[],
  embedding_model text,
  UNIQUE (source_id, ordinal)
);
CREATE INDEX knowledge_chunks_search ON knowledge_chunks USING gin (search);
CREATE INDEX knowledge_chunks_collection ON knowledge_chunks (collection_id);

-- Metadata extraction: what a completed run's output yielded against the agent's extraction
-- schema, `{ "metadata": {...} }`, or why it did not, `{ "error": {...} }`; NULL without rules.
ALTER TABLE tasks ADD COLUMN extraction jsonb;

-- MCP servers an organization registered: agents with `mcp` get their tools. The credential is
-- the name of an organization secret, sent as a header when the runner connects.
CREATE TABLE mcp_servers (
  id text PRIMARY KEY,
  organization_id text NOT NULL,
  mode text NOT NULL CHECK (mode IN ('live', 'test')),
  name text NOT NULL,
  url text NOT NULL,
  secret_name text,
  header text,
  created_at timestamptz NOT NULL,
  UNIQUE (organization_id, mode, name)
);
