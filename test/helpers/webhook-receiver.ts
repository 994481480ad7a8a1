import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedDelivery {
  headers: IncomingHttpHeaders;
  body: string;
  /** When it arrived (Date.now()). */
  at: number;
}

export interface WebhookReceiver {
  url: string;
  received: ReceivedDelivery[];
  close(): Promise<void>;
}

/**
 * A webhook receiver on loopback that records every delivery; `status` answers the n-th one
 * (counting from 1), 200 unless told otherwise.
 */
export async function startWebhookReceiver(status: (n: number) => number = () => 200): Promise<WebhookReceiver> {
  const received: ReceivedDelivery[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      received.push({ headers: req.headers, body, at: Date.now() });
      res.writeHead(status(received.length)).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    received,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
