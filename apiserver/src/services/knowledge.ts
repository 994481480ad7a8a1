import { Counter, type Registry } from 'prom-client';
import {
  ApiError,
  MAX_SOURCE_CHARS,
  chunkText,
  createCollection,
  deleteCollection,
  deleteSource,
  findCollection,
  guardedGet,
  isId,
  listCollections,
  listSources,
  objectNameToId,
  withTransaction,
  writeSource,
  type Clock,
  type CollectionRow,
  type Embedder,
  type Pool,
  type SourceRow,
  type SourceType,
  type UrlPolicy,
} from '@berth/common';
import type { Principal } from '../http/context.js';
import type { CursorCodec } from './pagination.js';
import type { SessionService } from './sessions.js';

/** A URL source is fetched within this, like a webhook delivery. */
const FETCH_TIMEOUT_MS = 10_000;

export type SourceInput =
  | { type: 'text'; name?: string | undefined; text: string }
  | { type: 'file'; name: string; content: string; contentType?: string | undefined }
  | { type: 'url'; url: string; name?: string | undefined };

function collectionView(row: CollectionRow) {
  return {
    id: row.id,
    name: row.name,
    ...(row.description !== null ? { description: row.description } : {}),
    ...(row.sessionId !== null ? { sessionId: row.sessionId } : {}),
    sourceCount: row.sourceCount,
    chunkCount: row.chunkCount,
    storageBytes: row.storageBytes,
    createdAt: row.createdAt,
  };
}

function sourceView(row: SourceRow) {
  return {
    id: row.id,
    collectionId: row.collectionId,
    type: row.type,
    name: row.name,
    ...(row.url !== null ? { url: row.url } : {}),
    state: row.state,
    ...(row.error !== null ? { error: row.error } : {}),
    chunkCount: row.chunkCount,
    bytes: row.bytes,
    createdAt: row.createdAt,
    ...(row.syncedAt !== null ? { syncedAt: row.syncedAt } : {}),
  };
}

/** The readable text of an HTML page: scripts, styles and tags dropped, common entities decoded, blocks kept as lines. */
export function htmlToText(html: string): string {
  return html
    .replace(/<(script|style|noscript|template)\b[\s\S]*?<\/\1\s*>/gi, ' ')
    .replace(/<!--[\s\S]*?-->/g, ' ')
    .replace(/<\/?(p|div|br|li|h[1-6]|tr|section|article|header|footer|pre|blockquote)\b[^>]*>/gi, '\n')
    .replace(/<[^>]+>/g, ' ')
    .replace(/&nbsp;/g, ' ')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&#39;|&apos;/g, "'")
    .replace(/&amp;/g, '&')
    .replace(/[ \t]+/g, ' ')
    .replace(/\n\s*\n+/g, '\n\n')
    .trim();
}

/** Text from bytes that must be UTF-8 text: a binary file (a NUL byte, invalid UTF-8) is refused. */
function decodeText(bytes: Buffer): string | undefined {
  if (bytes.includes(0)) return undefined;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return undefined;
  }
}

export function createKnowledgeService(deps: { pool: Pool; clock: Clock; sessions: SessionService; policy: UrlPolicy; metrics: Registry; cursors: CursorCodec; embedder?: Embedder | undefined }) {
  const { pool, clock, sessions, cursors } = deps;
  const syncs = new Counter({
    name: 'berth_knowledge_syncs_total',
    help: 'Knowledge sources written, by source type and result (synced or failed)',
    labelNames: ['type', 'result'],
    registers: [deps.metrics],
  });

  /** One page of a list fetched with one row more than asked: that row says whether there is more. */
  function pageOf<Row extends { id: string }, View>(rows: Row[], limit: number, view: (row: Row) => View, list: string) {
    const more = rows.length > limit;
    return { data: rows.slice(0, limit).map(view), hasMore: more, ...(more ? { cursor: cursors.encode(list, rows[limit - 1]!.id) } : {}) };
  }

  const scopeOf = (principal: Principal) => ({ organizationId: principal.organizationId, mode: principal.mode });

  async function find(principal: Principal, idOrName: string): Promise<CollectionRow> {
    const collection = await findCollection(pool, scopeOf(principal), idOrName);
    if (!collection) throw new ApiError('not_found', `collection ${idOrName} does not exist`);
    return collection;
  }

  /** The source's text, or why it could not be had (a URL that failed: the source is written as failed). */
  async function textOf(input: SourceInput): Promise<{ name: string; url?: string; text: string } | { name: string; url: string; error: string }> {
    if (input.type === 'text') return { name: input.name ?? 'text', text: input.text };
    if (input.type === 'file') {
      const text = decodeText(Buffer.from(input.content, 'base64'));
      if (text === undefined) {
        throw new ApiError('unprocessable_entity', 'content: not a UTF-8 text file (text, Markdown, CSV, JSON or HTML)', { fields: { content: ['not UTF-8 text'] } });
      }
      const html = input.contentType === 'text/html' || /\.html?$/i.test(input.name);
      return { name: input.name, text: html ? htmlToText(text) : text };
    }
    const name = input.name ?? input.url;
    const fetched = await guardedGet(input.url, deps.policy, { maxBytes: MAX_SOURCE_CHARS, timeoutMs: FETCH_TIMEOUT_MS });
    if (!fetched.ok) return { name, url: input.url, error: fetched.error ?? 'the fetch failed' };
    const text = decodeText(fetched.body!);
    if (text === undefined) return { name, url: input.url, error: `not a text document (${fetched.contentType || 'no content type'})` };
    return { name, url: input.url, text: /html/i.test(fetched.contentType ?? '') ? htmlToText(text) : text };
  }

  return {
    async create(principal: Principal, input: { name: string; description?: string | undefined; sessionId?: string | undefined }) {
      if (input.name.startsWith('kcol_')) {
        throw new ApiError('unprocessable_entity', 'name: must not start with kcol_ (collection ids do)', { fields: { name: ['must not start with kcol_'] } });
      }
      const sessionId = input.sessionId === undefined ? undefined : objectNameToId((await sessions.find(principal, input.sessionId)).metadata.name);
      return collectionView(await createCollection(pool, scopeOf(principal), { ...input, sessionId }, clock.now()));
    },

    async list(principal: Principal, page: { limit: number; cursor?: string | undefined }) {
      const after = page.cursor === undefined ? undefined : cursors.decode('knowledge-collections', page.cursor);
      const rows = await listCollections(pool, scopeOf(principal), { limit: page.limit + 1, after });
      return pageOf(rows, page.limit, collectionView, 'knowledge-collections');
    },

    async get(principal: Principal, idOrName: string) {
      return collectionView(await find(principal, idOrName));
    },

    async delete(principal: Principal, idOrName: string) {
      const collection = await find(principal, idOrName);
      await deleteCollection(pool, scopeOf(principal), collection.id);
      return { ok: true as const };
    },

    /**
     * Adds a source: its text is had (an upload decoded, a URL fetched under the webhook rules),
     * chunked and indexed, and the source written with its sync event in one transaction. A URL
     * that cannot be fetched is written as a failed source (`knowledge.sync_failed`).
     */
    async addSource(principal: Principal, idOrName: string, input: SourceInput) {
      const collection = await find(principal, idOrName);
      const text = await textOf(input);
      if ('text' in text && text.text.length > MAX_SOURCE_CHARS) {
        throw new ApiError('unprocessable_entity', `the source holds ${text.text.length} characters; at most ${MAX_SOURCE_CHARS}`, {
          fields: { [input.type === 'text' ? 'text' : 'content']: ['too large'] },
        });
      }
      // Chunks are embedded before the transaction (no connection held over an HTTP call); an
      // embeddings endpoint that fails fails the sync like a URL that cannot be fetched.
      let content: Parameters<typeof writeSource>[3];
      if ('error' in text) content = { type: input.type as SourceType, ...text };
      else {
        const chunks = chunkText(text.text);
        const { text: _text, ...named } = text;
        content = { type: input.type as SourceType, ...named, chunks };
        if (deps.embedder && chunks.length > 0) {
          try {
            content = { ...content, embeddings: { model: deps.embedder.model, vectors: await deps.embedder.embed(chunks) } };
          } catch (error) {
            content = { type: input.type as SourceType, ...named, error: `embedding failed: ${(error as Error).message}`, errorCode: 'embedding_failed' };
          }
        }
      }
      const source = await withTransaction(pool, async (tx) => {
        // Read again inside the transaction: the event's totals include sources added meanwhile.
        const current = await findCollection(tx, scopeOf(principal), collection.id);
        if (!current) throw new ApiError('not_found', `collection ${idOrName} does not exist`);
        return writeSource(tx, scopeOf(principal), current, content, clock.now());
      });
      syncs.inc({ type: input.type, result: source.state });
      return sourceView(source);
    },

    async listSources(principal: Principal, idOrName: string, page: { limit: number; cursor?: string | undefined }) {
      const collection = await find(principal, idOrName);
      const list = `knowledge-sources/${collection.id}`;
      const after = page.cursor === undefined ? undefined : cursors.decode(list, page.cursor);
      const rows = await listSources(pool, collection.id, { limit: page.limit + 1, after });
      return pageOf(rows, page.limit, sourceView, list);
    },

    async deleteSource(principal: Principal, idOrName: string, sourceId: string) {
      const collection = await find(principal, idOrName);
      if (!isId(sourceId, 'ksrc') || !(await deleteSource(pool, collection.id, sourceId))) {
        throw new ApiError('not_found', `source ${sourceId} does not exist in collection ${idOrName}`);
      }
      return { ok: true as const };
    },
  };
}

export type KnowledgeService = ReturnType<typeof createKnowledgeService>;
