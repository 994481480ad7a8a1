import type { Mode } from '@berth/crds';
import type { Queryable } from './db/index.js';
import { ApiError } from './errors.js';
import { recordEvent } from './events.js';
import { cosineSimilarity } from './embeddings.js';
import { isId, newId } from './ids.js';

/**
 * Knowledge collections: documents of an organization cut into chunks and searched with
 * PostgreSQL full-text search (a GIN index over a generated tsvector). The API server writes
 * collections and sources; the runner's `knowledge_search` tool reads chunks.
 */

/** Chunks are cut at paragraph, then sentence, then word boundaries, near this many characters. */
export const CHUNK_CHARS = 1200;
/** Characters a chunk repeats from the end of the one before, so a passage cut in two is found whole in one. */
export const CHUNK_OVERLAP = 150;
/** The most text one source may hold (1 MiB of characters): a larger upload is refused, not cut. */
export const MAX_SOURCE_CHARS = 1024 * 1024;
export const MAX_SEARCH_RESULTS = 10;

export interface KnowledgeScope {
  organizationId: string;
  mode: Mode;
}

/**
 * Cuts text into chunks of at most `size` characters, preferring to end a chunk at a blank line,
 * then a sentence end, then a space; each chunk after the first starts `overlap` characters
 * before the previous one ended (at a word boundary). Whitespace-only text gives no chunks.
 */
export function chunkText(text: string, size = CHUNK_CHARS, overlap = CHUNK_OVERLAP): string[] {
  const normalized = text.replace(/\r\n?/g, '\n').trim();
  const chunks: string[] = [];
  let start = 0;
  while (start < normalized.length) {
    let end = Math.min(start + size, normalized.length);
    if (end < normalized.length) {
      const window = normalized.slice(start, end);
      const floor = Math.floor(size / 2);
      const cut = [window.lastIndexOf('\n\n'), Math.max(window.lastIndexOf('. '), window.lastIndexOf('.\n')) + 1, window.lastIndexOf(' ')].find(
        (at) => at >= floor,
      );
      if (cut !== undefined) end = start + cut;
    }
    const chunk = normalized.slice(start, end).trim();
    if (chunk) chunks.push(chunk);
    if (end >= normalized.length) break;
    let next = Math.max(end - overlap, start + 1);
    const space = normalized.indexOf(' ', next);
    if (space !== -1 && space < end) next = space + 1;
    start = next;
  }
  return chunks;
}

export interface CollectionRow {
  id: string;
  name: string;
  description: string | null;
  sessionId: string | null;
  createdAt: string;
  sourceCount: number;
  chunkCount: number;
  storageBytes: number;
}

const COLLECTION_COLUMNS = `c.id, c.name, c.description, c.session_id, c.created_at,
  (SELECT count(*) FROM knowledge_sources s WHERE s.collection_id = c.id)::int AS source_count,
  (SELECT coalesce(sum(chunk_count), 0) FROM knowledge_sources s WHERE s.collection_id = c.id)::int AS chunk_count,
  (SELECT coalesce(sum(bytes), 0) FROM knowledge_sources s WHERE s.collection_id = c.id)::bigint AS storage_bytes`;

function collectionOf(row: Record<string, unknown>): CollectionRow {
  return {
    id: row.id as string,
    name: row.name as string,
    description: (row.description as string | null) ?? null,
    sessionId: (row.session_id as string | null) ?? null,
    createdAt: (row.created_at as Date).toISOString(),
    sourceCount: Number(row.source_count),
    chunkCount: Number(row.chunk_count),
    storageBytes: Number(row.storage_bytes),
  };
}

export async function createCollection(
  db: Queryable,
  scope: KnowledgeScope,
  input: { name: string; description?: string | undefined; sessionId?: string | undefined },
  now: Date,
): Promise<CollectionRow> {
  const id = newId('kcol', now);
  const inserted = await db.query(
    `INSERT INTO knowledge_collections (id, organization_id, mode, name, description, session_id, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING RETURNING id`,
    [id, scope.organizationId, scope.mode, input.name, input.description ?? null, input.sessionId ?? null, now],
  );
  if (inserted.rowCount === 0) {
    const clash = input.sessionId !== undefined && (await sessionCollection(db, scope, input.sessionId));
    throw new ApiError(
      'conflict',
      clash ? `session ${input.sessionId} already has a default collection (${clash.name})` : `a collection named "${input.name}" exists already`,
      clash ? { fields: { sessionId: ['has a default collection already'] } } : { fields: { name: ['taken'] } },
    );
  }
  return (await findCollection(db, scope, id))!;
}

/** A collection by id or name, within the organization and mode. */
export async function findCollection(db: Queryable, scope: KnowledgeScope, idOrName: string): Promise<CollectionRow | undefined> {
  const column = isId(idOrName, 'kcol') ? 'id' : 'name';
  const { rows } = await db.query(
    `SELECT ${COLLECTION_COLUMNS} FROM knowledge_collections c WHERE c.${column} = $1 AND c.organization_id = $2 AND c.mode = $3`,
    [idOrName, scope.organizationId, scope.mode],
  );
  return rows[0] ? collectionOf(rows[0]) : undefined;
}

export async function sessionCollection(db: Queryable, scope: KnowledgeScope, sessionId: string): Promise<CollectionRow | undefined> {
  const { rows } = await db.query(
    `SELECT ${COLLECTION_COLUMNS} FROM knowledge_collections c WHERE c.session_id = $1 AND c.organization_id = $2 AND c.mode = $3`,
    [sessionId, scope.organizationId, scope.mode],
  );
  return rows[0] ? collectionOf(rows[0]) : undefined;
}

/** The session's default collection, made (named after the session) when it has none. */
export async function ensureSessionCollection(db: Queryable, scope: KnowledgeScope, sessionId: string, now: Date): Promise<CollectionRow> {
  const existing = await sessionCollection(db, scope, sessionId);
  if (existing) return existing;
  await db.query(
    `INSERT INTO knowledge_collections (id, organization_id, mode, name, description, session_id, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`,
    [newId('kcol', now), scope.organizationId, scope.mode, `session-${sessionId}`, `default collection of session ${sessionId}`, sessionId, now],
  );
  return (await sessionCollection(db, scope, sessionId))!;
}

/** Collections in id order (creation order), after `after` when given. */
export async function listCollections(db: Queryable, scope: KnowledgeScope, page: { limit: number; after?: string | undefined }): Promise<CollectionRow[]> {
  const { rows } = await db.query(
    `SELECT ${COLLECTION_COLUMNS} FROM knowledge_collections c
     WHERE c.organization_id = $1 AND c.mode = $2 AND ($3::text IS NULL OR c.id > $3) ORDER BY c.id LIMIT $4`,
    [scope.organizationId, scope.mode, page.after ?? null, page.limit],
  );
  return rows.map(collectionOf);
}

export async function deleteCollection(db: Queryable, scope: KnowledgeScope, id: string): Promise<boolean> {
  const result = await db.query('DELETE FROM knowledge_collections WHERE id = $1 AND organization_id = $2 AND mode = $3', [id, scope.organizationId, scope.mode]);
  return (result.rowCount ?? 0) > 0;
}

export type SourceType = 'text' | 'file' | 'url';

export interface SourceRow {
  id: string;
  collectionId: string;
  type: SourceType;
  name: string;
  url: string | null;
  state: 'synced' | 'failed';
  error: string | null;
  chunkCount: number;
  bytes: number;
  createdAt: string;
  syncedAt: string | null;
}

function sourceOf(row: Record<string, unknown>): SourceRow {
  return {
    id: row.id as string,
    collectionId: row.collection_id as string,
    type: row.type as SourceType,
    name: row.name as string,
    url: (row.url as string | null) ?? null,
    state: row.state as 'synced' | 'failed',
    error: (row.error as string | null) ?? null,
    chunkCount: Number(row.chunk_count),
    bytes: Number(row.bytes),
    createdAt: (row.created_at as Date).toISOString(),
    syncedAt: row.synced_at ? (row.synced_at as Date).toISOString() : null,
  };
}

/**
 * Writes a source and its chunks, or a failed source, with its `knowledge.sync_completed` or
 * `knowledge.sync_failed` event: one transaction (`db` is a transaction's client).
 */
export async function writeSource(
  db: Queryable,
  scope: KnowledgeScope,
  collection: CollectionRow,
  input:
    | { type: SourceType; name: string; url?: string | undefined; chunks: string[]; embeddings?: { model: string; vectors: number[][] } | undefined }
    | { type: SourceType; name: string; url?: string | undefined; error: string; errorCode?: 'fetch_failed' | 'embedding_failed' },
  now: Date,
): Promise<SourceRow> {
  const id = newId('ksrc', now);
  const failed = 'error' in input;
  const chunks = failed ? [] : input.chunks;
  const embeddings = failed ? undefined : input.embeddings;
  const bytes = chunks.reduce((sum, chunk) => sum + Buffer.byteLength(chunk), 0);
  const { rows } = await db.query(
    `INSERT INTO knowledge_sources (id, collection_id, type, name, url, state, error, chunk_count, bytes, created_at, synced_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING *`,
    [id, collection.id, input.type, input.name, input.url ?? null, failed ? 'failed' : 'synced', failed ? input.error : null, chunks.length, bytes, now, failed ? null : now],
  );
  if (chunks.length > 0) {
    await db.query(
      `INSERT INTO knowledge_chunks (source_id, collection_id, ordinal, content, embedding, embedding_model)
       SELECT $1, $2, t.ordinal - 1, t.content, CASE WHEN $4::text IS NULL THEN NULL ELSE ARRAY(SELECT jsonb_array_elements_text($5::jsonb -> (t.ordinal - 1)::int)::real) END, $4
       FROM unnest($3::text[]) WITH ORDINALITY AS t (content, ordinal)`,
      [id, collection.id, chunks, embeddings?.model ?? null, embeddings ? JSON.stringify(embeddings.vectors) : null],
    );
  }
  const data = failed
    ? { collectionId: collection.id, sourceId: id, error: { code: input.errorCode ?? 'fetch_failed', message: input.error } }
    : {
        collectionId: collection.id,
        sourceId: id,
        chunkCount: chunks.length,
        storageBytes: bytes,
        collectionChunkCount: collection.chunkCount + chunks.length,
        collectionStorageBytes: collection.storageBytes + bytes,
      };
  await recordEvent(
    db,
    { type: failed ? 'knowledge.sync_failed' : 'knowledge.sync_completed', organizationId: scope.organizationId, mode: scope.mode, subjectId: collection.id, occurrence: `${id}/sync`, data },
    now,
  );
  return sourceOf(rows[0]);
}

export async function listSources(db: Queryable, collectionId: string, page: { limit: number; after?: string | undefined }): Promise<SourceRow[]> {
  const { rows } = await db.query(
    'SELECT * FROM knowledge_sources WHERE collection_id = $1 AND ($2::text IS NULL OR id > $2) ORDER BY id LIMIT $3',
    [collectionId, page.after ?? null, page.limit],
  );
  return rows.map(sourceOf);
}

export async function deleteSource(db: Queryable, collectionId: string, sourceId: string): Promise<boolean> {
  const result = await db.query('DELETE FROM knowledge_sources WHERE id = $1 AND collection_id = $2', [sourceId, collectionId]);
  return (result.rowCount ?? 0) > 0;
}

export interface SearchHit {
  sourceId: string;
  sourceName: string;
  ordinal: number;
  content: string;
  rank: number;
}

/**
 * The chunks of a collection that best match a query. A model asks in sentences ("how long does
 * a refund take"), so the query's words (English-stemmed, stop words dropped) are ORed, not
 * ANDed, and ts_rank_cd puts the chunks that hold more of them, closer together, first.
 */
export async function searchKnowledge(
  db: Queryable,
  collectionId: string,
  query: string,
  limit: number,
  embedded?: { model: string; vector: number[] },
): Promise<SearchHit[]> {
  const byMeaning = embedded ? await searchByEmbedding(db, collectionId, embedded, limit) : [];
  const byWords = await searchByWords(db, collectionId, query, limit);
  const seen = new Set(byMeaning.map((hit) => `${hit.sourceId}/${hit.ordinal}`));
  return [...byMeaning, ...byWords.filter((hit) => !seen.has(`${hit.sourceId}/${hit.ordinal}`))].slice(0, Math.min(limit, MAX_SEARCH_RESULTS));
}

/** Chunks below this similarity to the query are not offered as meaning the same. */
const MIN_SIMILARITY = 0.2;

/**
 * The chunks nearest the query's embedding (made by the same model), by cosine similarity over
 * the collection's rows: the embedded PostgreSQL has no pgvector, so there is no vector index
 * (ADR 34); a collection is read once a search.
 */
async function searchByEmbedding(db: Queryable, collectionId: string, embedded: { model: string; vector: number[] }, limit: number): Promise<SearchHit[]> {
  const { rows } = await db.query(
    `SELECT k.source_id, s.name AS source_name, k.ordinal, k.content, k.embedding
     FROM knowledge_chunks k JOIN knowledge_sources s ON s.id = k.source_id
     WHERE k.collection_id = $1 AND k.embedding_model = $2`,
    [collectionId, embedded.model],
  );
  return rows
    .map((row) => ({
      sourceId: row.source_id as string,
      sourceName: row.source_name as string,
      ordinal: Number(row.ordinal),
      content: row.content as string,
      rank: cosineSimilarity(embedded.vector, row.embedding as number[]),
    }))
    .filter((hit) => hit.rank >= MIN_SIMILARITY)
    .sort((a, b) => b.rank - a.rank)
    .slice(0, Math.min(limit, MAX_SEARCH_RESULTS));
}

async function searchByWords(db: Queryable, collectionId: string, query: string, limit: number): Promise<SearchHit[]> {
  const { rows } = await db.query(
    `WITH q AS (SELECT replace(plainto_tsquery('english', $2)::text, ' & ', ' | ')::tsquery AS query)
     SELECT k.source_id, s.name AS source_name, k.ordinal, k.content, ts_rank_cd(k.search, q.query) AS rank
     FROM knowledge_chunks k JOIN knowledge_sources s ON s.id = k.source_id, q
     WHERE k.collection_id = $1 AND k.search @@ q.query
     ORDER BY rank DESC, k.id LIMIT $3`,
    [collectionId, query, Math.min(limit, MAX_SEARCH_RESULTS)],
  );
  return rows.map((row) => ({
    sourceId: row.source_id as string,
    sourceName: row.source_name as string,
    ordinal: Number(row.ordinal),
    content: row.content as string,
    rank: Number(row.rank),
  }));
}

/**
 * The collection an agent's `knowledge` names: the session's default collection for `true`
 * (made when the session has none), else a collection by name or id; undefined when it names
 * none that exists.
 */
export async function resolveAgentKnowledge(
  db: Queryable,
  scope: KnowledgeScope,
  sessionId: string,
  knowledge: boolean | string,
  now: Date,
): Promise<CollectionRow | undefined> {
  if (knowledge === false) return undefined;
  if (knowledge === true) return ensureSessionCollection(db, scope, sessionId, now);
  return findCollection(db, scope, knowledge);
}
