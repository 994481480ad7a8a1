import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A local OpenAI-compatible embeddings server (`POST /v1/embeddings`), at the network boundary.
 * Its vectors are made from a small table of concepts, so that texts sharing a concept are near
 * each other although they share no word ("reimbursement" and "refunded"); other words are
 * hashed into dimensions of their own. An input holding `POISON` is answered 500.
 */
const CONCEPTS: [RegExp, number][] = [
  [/\b(refund\w*|reimburs\w*|money back)\b/gi, 0],
  [/\b(warrant\w*|guarantee\w*)\b/gi, 1],
  [/\b(ship\w*|deliver\w*|parcel\w*)\b/gi, 2],
];
const DIMENSIONS = 32;

export function fakeEmbedding(text: string): number[] {
  const vector = new Array<number>(DIMENSIONS).fill(0);
  let rest = text;
  for (const [pattern, dimension] of CONCEPTS) {
    vector[dimension]! += 4 * (rest.match(pattern)?.length ?? 0);
    rest = rest.replace(pattern, ' ');
  }
  for (const word of rest.toLowerCase().match(/[a-z]{4,}/g) ?? []) {
    let hash = 0;
    for (const char of word) hash = (hash * 31 + char.charCodeAt(0)) % 1_000_003;
    vector[3 + (hash % (DIMENSIONS - 3))]! += 0.2;
  }
  return vector;
}

export interface FakeEmbeddingsServer {
  baseUrl: string;
  requests: { model: string; input: string[]; authorization: string | undefined }[];
  close(): Promise<void>;
}

export async function startFakeEmbeddings(): Promise<FakeEmbeddingsServer> {
  const requests: FakeEmbeddingsServer['requests'] = [];
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    if (req.method !== 'POST' || req.url !== '/v1/embeddings') return void res.writeHead(404).end();
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { model: string; input: string | string[] };
    const input = Array.isArray(body.input) ? body.input : [body.input];
    requests.push({ model: body.model, input, authorization: req.headers.authorization });
    if (input.some((text) => text.includes('POISON'))) {
      res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'the embedder choked' } }));
      return;
    }
    const data = input.map((text, index) => ({ object: 'embedding', index, embedding: fakeEmbedding(text) }));
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ object: 'list', data, model: body.model, usage: { prompt_tokens: 1, total_tokens: 1 } }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    requests,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
