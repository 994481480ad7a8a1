import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A website of a Berth customer: one page with the widget's script tag (read at each request: the
 * site's origin is known before the channel that allows it), on its own origin (a loopback port
 * other than the API's), so the widget's requests cross origins as on a real site.
 */
export async function startCustomerSite(
  scriptTag: () => string,
  headers: Record<string, string> = {},
): Promise<{ url: string; origin: string; close(): Promise<void> }> {
  const page = () => `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>Harbour Supplies</title></head>
<body>
<header><a href="#main">Skip to content</a></header>
<main id="main"><h1>Harbour Supplies</h1><p>Ropes, fenders and chandlery since 1962.</p></main>
${scriptTag()}
</body>
</html>`;
  const server: Server = createServer((req, res) => {
    if (req.url === '/' || req.url?.startsWith('/?')) {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store', ...headers });
      res.end(page());
    } else {
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('not found');
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: `${origin}/`,
    origin,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
