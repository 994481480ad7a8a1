import { z } from 'zod';
import { requestOrigin } from '../http/origin.js';
import { defineRoute, type RouteTable } from '../http/route.js';

/** `/api/openapi.json`: the management plane's own document (cookie-authorized), apart from the data plane's. */
export function managementDocumentRoute(table: RouteTable, document: (requestOrigin: string | undefined) => Record<string, unknown>): void {
  table.add(
    defineRoute({
      method: 'get',
      path: '/api/openapi.json',
      operationId: 'managementOpenapi',
      tag: 'System',
      summary: 'The management API, as OpenAPI 3.1',
      description: 'The `/api` routes: sign-in, the signed-in user, team. Generated from the schemas that validate requests and shape responses.',
      auth: false,
      responses: {
        200: {
          description: 'the OpenAPI document',
          schema: z.looseObject({ openapi: z.string(), info: z.looseObject({ title: z.string(), version: z.string() }), paths: z.record(z.string(), z.unknown()) }),
          example: { openapi: '3.1.0', info: { title: 'Berth management API', version: '0.1.0' }, paths: {} },
        },
      },
      errors: [],
      handler: async ({ req }) => ({ status: 200, body: document(requestOrigin(req)) }),
    }),
  );
}
