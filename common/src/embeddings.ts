import type { EmbeddingsSettings } from './config.js';

/**
 * Embeddings through an OpenAI-compatible `/embeddings` endpoint, configured by the install
 * (`BERTH_EMBEDDINGS`), like the model providers: its URL is the operator's, not a customer's.
 */
export interface Embedder {
  model: string;
  embed(texts: string[]): Promise<number[][]>;
}

const BATCH = 64;
const TIMEOUT_MS = 30_000;

export function createEmbedder(settings: EmbeddingsSettings, env: NodeJS.ProcessEnv = process.env): Embedder {
  const url = `${settings.baseUrl.replace(/\/+$/, '')}/embeddings`;
  const key = settings.apiKeyEnv ? env[settings.apiKeyEnv] : undefined;
  return {
    model: settings.model,
    async embed(texts) {
      const vectors: number[][] = [];
      for (let start = 0; start < texts.length; start += BATCH) {
        const batch = texts.slice(start, start + BATCH);
        const response = await fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
          body: JSON.stringify({ model: settings.model, input: batch }),
          signal: AbortSignal.timeout(TIMEOUT_MS),
        });
        const text = await response.text();
        if (!response.ok) throw new Error(`the embeddings endpoint answered ${response.status}: ${text.slice(0, 300)}`);
        const body = JSON.parse(text) as { data?: { index?: number; embedding?: unknown }[] };
        const data = [...(body.data ?? [])].sort((a, b) => (a.index ?? 0) - (b.index ?? 0));
        if (data.length !== batch.length || data.some((item) => !Array.isArray(item.embedding) || !(item.embedding as unknown[]).every((x) => typeof x === 'number'))) {
          throw new Error(`the embeddings endpoint gave ${data.length} vectors for ${batch.length} texts, or vectors that are not lists of numbers`);
        }
        vectors.push(...data.map((item) => item.embedding as number[]));
      }
      return vectors;
    },
  };
}

/** Cosine similarity of two vectors of the same length (0 when either is all zeros). */
export function cosineSimilarity(a: readonly number[], b: readonly number[]): number {
  let dot = 0;
  let normA = 0;
  let normB = 0;
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    dot += a[i]! * b[i]!;
    normA += a[i]! * a[i]!;
    normB += b[i]! * b[i]!;
  }
  return normA === 0 || normB === 0 ? 0 : dot / Math.sqrt(normA * normB);
}
