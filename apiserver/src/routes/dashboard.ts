import { createHash } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, extname, join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { ApiError } from '@berth/common';
import { z } from 'zod';
import { defineRoute, type RouteTable } from '../http/route.js';

/** Where the built console's files are served; the page itself is `/`. */
export const DASHBOARD_ASSETS_PATH = '/assets';

const CONTENT_TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.html': 'text/html; charset=utf-8',
};

/**
 * The page may run only its own script and styles and talk only to this origin: a console that
 * holds a sign-in cookie loads nothing from anywhere else (no CDN), and frames nothing.
 */
const CONTENT_SECURITY_POLICY =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

interface StaticFile {
  body: Buffer;
  gzipped: Buffer;
  etag: string;
  contentType: string;
}

interface BuiltDashboard {
  index: StaticFile;
  assets: Map<string, StaticFile>;
}

function staticFile(body: Buffer, contentType: string): StaticFile {
  const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`;
  return { body, gzipped: gzipSync(body, { level: 9 }), etag, contentType };
}

/** The built console (`@berth/dashboard`'s dist/app/: index.html and assets/), read once, gzipped once. */
function loadDashboard(): BuiltDashboard {
  const dist = join(dirname(createRequire(import.meta.url).resolve('@berth/dashboard/package.json')), 'dist', 'app');
  const index = staticFile(readFileSync(join(dist, 'index.html')), CONTENT_TYPES['.html']!);
  const assets = new Map<string, StaticFile>();
  for (const name of readdirSync(join(dist, 'assets'))) {
    const type = CONTENT_TYPES[extname(name)];
    if (type) assets.set(name, staticFile(readFileSync(join(dist, 'assets', name)), type));
  }
  return { index, assets };
}

function send(req: import('express').Request, res: import('express').Response, file: StaticFile, cacheControl: string): void {
  res.setHeader('Cache-Control', cacheControl);
  res.setHeader('ETag', file.etag);
  res.setHeader('Vary', 'Accept-Encoding');
  res.setHeader('X-Content-Type-Options', 'nosniff');
  const held = req.get('if-none-match');
  if (held && held.split(',').some((tag) => tag.trim().replace(/^W\//, '') === file.etag)) {
    res.status(304).end();
    return;
  }
  const gzip = /\bgzip\b/.test(req.get('accept-encoding') ?? '');
  const body = gzip ? file.gzipped : file.body;
  res.status(200);
  res.setHeader('Content-Type', file.contentType);
  if (gzip) res.setHeader('Content-Encoding', 'gzip');
  res.setHeader('Content-Length', String(body.length));
  res.end(body);
}

/** The web console (docs/dashboard.md): its page at `/` and its hashed, immutable files under `/assets/`. */
export function dashboardRoutes(table: RouteTable): void {
  let built: BuiltDashboard | undefined;
  const dashboard = (): BuiltDashboard => {
    try {
      built ??= loadDashboard();
      return built;
    } catch (error) {
      throw new ApiError('internal_error', 'the dashboard is not built on this server (npm run build builds it)', {
        reason: (error as Error).message,
      });
    }
  };
  const validators = [
    { name: 'If-None-Match', required: false, description: 'the ETag of a copy the client holds: answered 304 when it is current' },
    { name: 'Accept-Encoding', required: false, description: 'with `gzip`, the file is sent gzipped' },
  ];
  table.add(
    defineRoute({
      method: 'get',
      path: '/',
      operationId: 'dashboardPage',
      tag: 'Dashboard',
      summary: 'The web console',
      description:
        'The dashboard (docs/dashboard.md): one HTML page that loads its script and stylesheet from `/assets/` and reads and changes everything through `/api` with the sign-in cookie. ' +
        `Revalidated on every load (\`Cache-Control: no-cache\` and an \`ETag\`), with \`Content-Security-Policy: ${CONTENT_SECURITY_POLICY}\`.`,
      auth: false,
      headers: validators,
      responses: {
        200: { description: 'the page', contentType: 'text/html; charset=utf-8', example: '<!doctype html><html lang="en">…</html>' },
        304: { description: 'the copy the client holds (its `If-None-Match`) is current' },
      },
      errors: [],
      handler: async ({ req, res }) => {
        const { index } = dashboard();
        res.setHeader('Content-Security-Policy', CONTENT_SECURITY_POLICY);
        res.setHeader('X-Frame-Options', 'DENY');
        res.setHeader('Referrer-Policy', 'same-origin');
        send(req, res, index, 'no-cache');
      },
    }),
  );
  table.add(
    defineRoute({
      method: 'get',
      path: `${DASHBOARD_ASSETS_PATH}/:file`,
      operationId: 'dashboardAsset',
      tag: 'Dashboard',
      summary: 'A file of the web console',
      description:
        "The dashboard's script and stylesheet, named by a hash of their content, so cached for a year (`Cache-Control: public, max-age=31536000, immutable`); gzipped when the request accepts gzip.",
      auth: false,
      params: z.object({ file: z.string().regex(/^[A-Za-z0-9._-]+$/, 'must be a file name of the built dashboard').max(200) }).strict(),
      headers: validators,
      responses: {
        200: { description: 'the file', contentType: 'text/javascript; charset=utf-8', example: '(()=>{…})();' },
        304: { description: 'the copy the client holds (its `If-None-Match`) is current' },
      },
      errors: ['not_found'],
      handler: async ({ req, res, params }) => {
        const file = dashboard().assets.get(params.file);
        if (!file) throw new ApiError('not_found', `no dashboard file ${params.file}`);
        send(req, res, file, 'public, max-age=31536000, immutable');
      },
    }),
  );
}
