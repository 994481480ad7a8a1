import { MAX_SEARCH_RESULTS, findCollection, searchKnowledge, sessionCollection, type Embedder, type Logger, type Queryable, type Resource } from '@berth/common';
import { ToolInputError, type ToolSpec } from './tools.js';

const DEFAULT_RESULTS = 5;

export type SearchResult = 'hits' | 'empty' | 'no_collection';

/**
 * `knowledge_search`, offered to an agent with `knowledge`: full-text search of its collection
 * (the session's default one for `true`). The collection is looked up at every call, so one
 * deleted during a run is reported to the model rather than searched.
 */
export function knowledgeSearchTool(
  db: Queryable,
  agent: Resource<'Agent'>,
  onSearch: (result: SearchResult) => void,
  options: { embedder?: Embedder | undefined; log: Logger },
): ToolSpec {
  const { knowledge, organizationId, mode, sessionId } = agent.spec;
  const scope = { organizationId, mode };
  return {
    name: 'knowledge_search',
    description:
      'Search the knowledge collection of this agent (documents its owner added) for passages relevant to a query. Use words that the passages would contain; returns the best matching passages with their source names.',
    inputSchema: {
      type: 'object',
      properties: {
        query: { type: 'string', description: 'what to look for: keywords or a question' },
        limit: { type: 'integer', minimum: 1, maximum: MAX_SEARCH_RESULTS, description: `passages to return (default ${DEFAULT_RESULTS})` },
      },
      required: ['query'],
      additionalProperties: false,
    },
    needsBrowser: false,
    async run(input) {
      const query = input.query;
      if (typeof query !== 'string' || !query.trim()) throw new ToolInputError('"query" must be a non-empty string');
      const limit = input.limit ?? DEFAULT_RESULTS;
      if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1 || limit > MAX_SEARCH_RESULTS) {
        throw new ToolInputError(`"limit" must be a whole number from 1 to ${MAX_SEARCH_RESULTS}`);
      }
      const collection = knowledge === true ? await sessionCollection(db, scope, sessionId) : typeof knowledge === 'string' ? await findCollection(db, scope, knowledge) : undefined;
      if (!collection) {
        onSearch('no_collection');
        return { output: 'the knowledge collection of this agent no longer exists', isError: true };
      }
      let embedded: { model: string; vector: number[] } | undefined;
      if (options.embedder) {
        try {
          embedded = { model: options.embedder.model, vector: (await options.embedder.embed([query]))[0]! };
        } catch (error) {
          // Words still find what they match: the search goes on without the similarity half.
          options.log.warn({ err: error }, 'embedding the knowledge query failed; searching by words only');
        }
      }
      const hits = await searchKnowledge(db, collection.id, query, limit, embedded);
      onSearch(hits.length > 0 ? 'hits' : 'empty');
      if (hits.length === 0) return { output: `no passages in collection "${collection.name}" match: ${query}`, isError: false };
      const output = hits.map((hit, index) => `[${index + 1}] ${hit.sourceName} (passage ${hit.ordinal + 1})\n${hit.content}`).join('\n\n');
      return { output, isError: false };
    },
  };
}
