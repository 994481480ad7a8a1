import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { gzipSync } from 'node:zlib';
import { ApiError } from '@berth/common';
import { defineRoute, type RouteTable } from '../http/route.js';

export const WIDGET_SCRIPT_PATH = '/widget/v1/berth-chat.js';

/**
 * A day in every cache, then revalidated by ETag: the URL's `v1` changes only with a change a
 * page's script tag must follow, so an upgrade within v1 reaches visitors within a day.
 */
const CACHE_CONTROL = 'public, max-age=86400, stale-while-revalidate=604800';

interface WidgetScript {
  body: Buffer;
  gzipped: Buffer;
  etag: string;
}

/** The built widget (`@berth/widget`'s dist/berth-chat.js), read once, with its gzipped form. */
function loadWidgetScript(): WidgetScript {
  const path = createRequire(import.meta.url).resolve('@berth/widget/berth-chat.js');
  const body = readFileSync(path);
  const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`;
  return { body, gzipped: gzipSync(body, { level: 9 }), etag };
}

export function widgetRoutes(table: RouteTable): void {
  let script: WidgetScript | undefined;
  table.add(
    defineRoute({
      method: 'get',
      path: WIDGET_SCRIPT_PATH,
      operationId: 'widgetScript',
      tag: 'Widget',
      summary: 'The embeddable chat widget',
      description:
        'The script a website adds to its pages to chat with a `chat_embed` channel: a script element with `src` this URL and `data-channel-id` the channel id (the channel\'s `scriptTag`). ' +
        'It reads the channel\'s theme and talks only to this server, through the public `/channels/{id}` routes (docs/widget.md). ' +
        `Served as \`text/javascript\` with \`Cache-Control: ${CACHE_CONTROL}\` and an \`ETag\` (\`If-None-Match\` answers 304), gzipped when the request accepts gzip, ` +
        'and loadable from any origin (`Cross-Origin-Resource-Policy: cross-origin`, `Access-Control-Allow-Origin: *`).',
      auth: false,
      headers: [
        { name: 'If-None-Match', required: false, description: 'the ETag of a copy the client holds: answered 304 when it is current' },
        { name: 'Accept-Encoding', required: false, description: 'with `gzip`, the script is sent gzipped' },
      ],
      responses: {
        200: { description: 'the widget script', contentType: 'text/javascript; charset=utf-8', example: '(()=>{var e="/widget/v1/berth-chat.js";…})();' },
        304: { description: 'the copy the client holds (its `If-None-Match`) is current' },
      },
      errors: [],
      handler: async ({ req, res }) => {
        try {
          script ??= loadWidgetScript();
        } catch (error) {
          throw new ApiError('internal_error', 'the chat widget is not built on this server (npm run build builds it)', {
            reason: (error as Error).message,
          });
        }
        res.setHeader('Cache-Control', CACHE_CONTROL);
        res.setHeader('ETag', script.etag);
        res.setHeader('Vary', 'Accept-Encoding');
        res.setHeader('Access-Control-Allow-Origin', '*');
        res.setHeader('Cross-Origin-Resource-Policy', 'cross-origin');
        res.setHeader('X-Content-Type-Options', 'nosniff');
        const held = req.get('if-none-match');
        if (held && held.split(',').some((tag) => tag.trim().replace(/^W\//, '') === script!.etag)) {
          res.status(304).end();
          return;
        }
        const gzip = /\bgzip\b/.test(req.get('accept-encoding') ?? '');
        const body = gzip ? script.gzipped : script.body;
        res.status(200);
        res.setHeader('Content-Type', 'text/javascript; charset=utf-8');
        if (gzip) res.setHeader('Content-Encoding', 'gzip');
        res.setHeader('Content-Length', String(body.length));
        res.end(body);
      },
    }),
  );
}
