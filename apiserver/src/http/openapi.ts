import { ERROR_STATUS, type ErrorCode } from '@berth/common';
import { z } from 'zod';
import { errorEnvelopeSchema } from './errors.js';
import { AUTH_ERRORS, type RouteTable } from './route.js';

/** The OpenAPI 3.1 document of a route table: the routes' own schemas, so the docs cannot drift from behaviour. */
export function openapiDocument(table: RouteTable, info: { version: string; serverUrl?: string }): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  const toSchema = (schema: z.ZodType, io: 'input' | 'output') =>
    z.toJSONSchema(schema, { io, unrepresentable: 'any', target: 'draft-2020-12' });

  for (const route of table.list()) {
    const openapiPath = route.path.replace(/:([A-Za-z]+)/g, '{$1}');
    const parameters: unknown[] = [];
    for (const [location, schema] of [['path', route.params], ['query', route.query]] as const) {
      if (!schema) continue;
      const json = toSchema(schema, 'input') as { properties?: Record<string, unknown>; required?: string[] };
      for (const [name, property] of Object.entries(json.properties ?? {})) {
        parameters.push({
          name,
          in: location,
          required: location === 'path' || (json.required ?? []).includes(name),
          schema: property,
          description: (property as { description?: string }).description,
        });
      }
    }
    const responses: Record<string, unknown> = {};
    for (const [status, response] of Object.entries(route.responses)) {
      responses[status] = {
        description: response.description,
        ...(response.schema
          ? { content: { [response.contentType ?? 'application/json']: { schema: toSchema(response.schema, 'output') } } }
          : response.contentType
            ? { content: { [response.contentType]: { schema: { type: 'string' } } } }
            : {}),
      };
    }
    const errorCodes = [...new Set([...(route.auth === false ? [] : AUTH_ERRORS), ...route.errors])];
    const byStatus = new Map<number, ErrorCode[]>();
    for (const code of errorCodes) byStatus.set(ERROR_STATUS[code], [...(byStatus.get(ERROR_STATUS[code]) ?? []), code]);
    for (const [status, codes] of byStatus) {
      responses[String(status)] = {
        description: `error codes: ${codes.map((code) => `\`${code}\``).join(', ')}`,
        content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
      };
    }
    (paths[openapiPath] ??= {})[route.method] = {
      operationId: route.operationId,
      tags: [route.tag],
      summary: route.summary,
      description: route.description,
      ...(route.auth === false ? { security: [] } : {}),
      ...(parameters.length ? { parameters } : {}),
      ...(route.body ? { requestBody: { required: true, content: { 'application/json': { schema: toSchema(route.body, 'input') } } } } : {}),
      responses,
    };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Berth API',
      version: info.version,
      description:
        'Sandboxed compute for AI agents. Authenticate with `Authorization: Bearer <API key>`; ' +
        '`svc_live_` keys run real sandboxes, `svc_test_` keys get realistic mock results and never touch a provider.',
    },
    ...(info.serverUrl ? { servers: [{ url: info.serverUrl }] } : {}),
    security: [{ bearer: [] }],
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'an API key: svc_live_… or svc_test_…' } },
      schemas: { Error: toSchema(errorEnvelopeSchema, 'output') },
    },
    paths,
  };
}
