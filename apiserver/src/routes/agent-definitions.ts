import { modelSettingsSchema as sharedModelSettings } from '@berth/crds';
import { z } from 'zod';
import { computeSchema, egressSchema } from '@berth/crds';
import { defineRoute, type RouteTable } from '../http/route.js';
import type { AgentDefinitionService } from '../services/agent-definitions.js';
import { queryInteger } from '../services/pagination.js';
import { createAgentBody, idParam, okSchema } from './schemas.js';
import { createDefinitionExample, definitionExample, definitionVersionExample, definitionVersionsExample } from './examples.js';

const NAME_RULE = '1–100 letters, digits, spaces, -, _ and ., starting with a letter or digit and not ending with a space';

export const definitionNameSchema = z
  .string()
  .min(1)
  .max(100)
  .regex(/^[A-Za-z0-9](?:[A-Za-z0-9 ._-]*[A-Za-z0-9._-])?$/, `must be ${NAME_RULE}`)
  .refine((name) => !name.startsWith('adef_'), 'must not start with adef_ (agents name a definition by name or id)')
  .describe(`unique among the organization's definitions that are not archived; ${NAME_RULE}; not starting with adef_; case-sensitive`);

const modelSettingsSchema = sharedModelSettings.describe('model settings: temperature (0–2), maxTokens (a positive integer), topP (0–1); other keys are refused');

// The agent fields a definition holds are checked exactly as agent creation checks them.
const agentField = createAgentBody.shape;
const descriptionSchema = z.string().max(1000);
const systemPromptSchema = agentField.instructions.unwrap();

const createDefinitionBody = z
  .object({
    name: definitionNameSchema,
    description: descriptionSchema.optional(),
    compute: agentField.compute,
    model: agentField.model,
    systemPrompt: systemPromptSchema.optional().describe("the agent's system prompt (its `instructions`)"),
    tools: agentField.tools,
    browser: agentField.browser,
    timeout: agentField.timeout,
    config: modelSettingsSchema.default({}),
    egress: agentField.egress,
  })
  .strict();

const updateDefinitionBody = z
  .object({
    description: descriptionSchema.nullable().optional().describe('null removes it'),
    compute: computeSchema.optional(),
    model: agentField.model.unwrap().nullable().optional().describe('`<vendor>/<model>`; null removes it (agents get the platform default)'),
    systemPrompt: systemPromptSchema.nullable().optional().describe('null removes it'),
    tools: agentField.tools.unwrap().optional().describe('replaces the list'),
    browser: z.boolean().optional(),
    timeout: agentField.timeout.unwrap().optional(),
    config: modelSettingsSchema.optional().describe('replaces all model settings; {} removes them'),
    egress: agentField.egress.unwrap().nullable().optional().describe('replaces the egress policy of its agents; null removes it (they get the install default)'),
    changelog: z.string().max(1000).optional().describe('what changed, for the version history; default: the fields changed'),
  })
  .strict()
  .refine((body) => Object.entries(body).some(([field, value]) => field !== 'changelog' && value !== undefined), {
    message: 'give at least one field to change besides changelog',
  });

export const agentDefinitionSchema = z
  .object({
  id: z.string().describe('`adef_…`'),
  name: z.string(),
  description: z.string().optional(),
  version: z.number().int().describe('the current version: the one agents are created from'),
  compute: computeSchema,
  model: z.string().optional().describe('absent: agents get the platform default model'),
  systemPrompt: z.string().optional(),
  tools: z.array(z.string()),
  browser: z.boolean(),
  timeout: z.string().describe('effective lifetime of its agents (capped at 24h)'),
  config: z.object({ temperature: z.number().optional(), maxTokens: z.number().int().optional(), topP: z.number().optional() }),
  egress: egressSchema.optional().describe("its agents' egress policy; absent: the install default"),
  archived: z.boolean().describe('deleted: kept for its history, but no new agents can be created from it'),
  createdAt: z.string(),
  updatedAt: z.string().describe('the last update, rollback or archiving'),
  })
  .meta({ id: 'AgentDefinition', description: 'a reusable agent configuration, at its current version' });

const versionEntrySchema = z
  .object({
  version: z.number().int(),
  createdAt: z.string(),
  changelog: z.string().describe('`created` for version 1'),
  createdBy: z.string().describe('id of the API key (`key_…`) that wrote the version'),
  })
  .meta({ id: 'AgentDefinitionVersion' });

const definitionParam = idParam('adef', 'agent definition');

const versionDetailSchema = agentDefinitionSchema
  .omit({ archived: true, createdAt: true, updatedAt: true })
  .extend({
    version: z.number().int().describe('the version read'),
    current: z.boolean().describe('true when it is the current version (the one agents are created from)'),
    changelog: z.string().describe('`created` for version 1'),
    createdBy: z.string().describe('id of the API key (`key_…`) that wrote the version'),
    createdAt: z.string().describe('when the version was written'),
  })
  .meta({ id: 'AgentDefinitionVersionDetail', description: "an agent definition's fields as one of its versions holds them" });

export function agentDefinitionRoutes(table: RouteTable, definitions: AgentDefinitionService): void {
  table.add(
    defineRoute({
      method: 'post',
      path: '/v1/agent-definitions',
      operationId: 'createAgentDefinition',
      tag: 'Agent definitions',
      summary: 'Create an agent definition',
      description:
        'A reusable agent configuration at version 1. Agents are created from it with `definition` (its name or id) on `POST /v1/sessions/{id}/agents`. ' +
        'Fields are checked like those of agent creation: an unknown tool or model vendor, or a browser tool without `browser: true`, is 422; a timeout over 24h is capped. A name already used by a definition that is not archived is 409 `conflict`.',
      body: createDefinitionBody,
      requestExample: createDefinitionExample,
      responses: { 201: { description: 'the definition, at version 1', schema: agentDefinitionSchema, example: { ...definitionExample, version: 1, updatedAt: definitionExample.createdAt } } },
      errors: ['unprocessable_entity', 'conflict'],
      handler: async ({ principal, body }) => ({ status: 201, body: await definitions.create(principal, body) }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/agent-definitions',
      operationId: 'listAgentDefinitions',
      tag: 'Agent definitions',
      summary: 'List agent definitions',
      description: 'Newest first, each at its current version, in `{ data }` like every other list. Archived definitions only with `includeArchived=true`.',
      query: z
        .object({
          includeArchived: z
            .enum(['true', 'false'], { error: 'must be true or false' })
            .default('false')
            .transform((value) => value === 'true')
            .describe('also list archived (deleted) definitions'),
        })
        .strict(),
      responses: { 200: { description: 'the definitions', schema: z.object({ data: z.array(agentDefinitionSchema) }), example: { data: [definitionExample] } } },
      errors: ['unprocessable_entity'],
      handler: async ({ principal, query }) => ({ status: 200, body: await definitions.list(principal, query) }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/agent-definitions/:id',
      operationId: 'getAgentDefinition',
      tag: 'Agent definitions',
      summary: 'Get an agent definition',
      description: 'The definition at its current version (the latest one, unless rolled back). Archived definitions are found too (`archived: true`).',
      params: definitionParam,
      responses: { 200: { description: 'the definition', schema: agentDefinitionSchema, example: definitionExample } },
      errors: ['not_found'],
      handler: async ({ principal, params }) => ({ status: 200, body: await definitions.get(principal, params.id) }),
    }),
    defineRoute({
      method: 'put',
      path: '/v1/agent-definitions/:id',
      operationId: 'updateAgentDefinition',
      tag: 'Agent definitions',
      summary: 'Update an agent definition',
      description:
        'Writes a new version from the current one with the fields given (omitted fields keep their value, `null` removes an optional one) and makes it current. ' +
        'The new version number follows the highest one, also after a rollback. Agents created before keep the version they were created from. ' +
        'A body without a field to change is 422; an archived definition is 409 `conflict`. The name cannot be changed (duplicate instead).',
      params: definitionParam,
      body: updateDefinitionBody,
      requestExample: { config: { temperature: 0.2 }, changelog: 'lower temperature' },
      responses: { 200: { description: 'the definition at its new version', schema: agentDefinitionSchema, example: definitionExample } },
      errors: ['not_found', 'unprocessable_entity', 'conflict'],
      handler: async ({ principal, params, body }) => ({ status: 200, body: await definitions.update(principal, params.id, body) }),
    }),
    defineRoute({
      method: 'delete',
      path: '/v1/agent-definitions/:id',
      operationId: 'deleteAgentDefinition',
      tag: 'Agent definitions',
      summary: 'Archive an agent definition',
      description:
        'Archives it: it stays readable with its versions (listed with `includeArchived=true`), agents made from it are unaffected, and new agents can no longer be created from it. Its name can be used again. Archiving an archived definition changes nothing.',
      params: definitionParam,
      responses: { 200: { description: 'archived', schema: okSchema, example: { ok: true } } },
      errors: ['not_found'],
      handler: async ({ principal, params }) => ({ status: 200, body: await definitions.archive(principal, params.id) }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/agent-definitions/:id/versions',
      operationId: 'listAgentDefinitionVersions',
      tag: 'Agent definitions',
      summary: "List an agent definition's versions",
      description: 'Every version, newest first, including those after the current one when it was rolled back.',
      params: definitionParam,
      responses: { 200: { description: 'the version history', schema: z.object({ data: z.array(versionEntrySchema) }), example: definitionVersionsExample } },
      errors: ['not_found'],
      handler: async ({ principal, params }) => ({ status: 200, body: await definitions.versions(principal, params.id) }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/agent-definitions/:id/versions/:version',
      operationId: 'getAgentDefinitionVersion',
      tag: 'Agent definitions',
      summary: 'Get one version of an agent definition',
      description:
        "The definition's fields as that version holds them (beyond the spec): what an agent made from it would get, to compare two versions before a rollback. A version the definition does not have is 404.",
      params: definitionParam.extend({ version: queryInteger({ min: 1, max: 1_000_000 }).describe('the version number, from 1') }),
      responses: {
        200: {
          description: 'the version',
          schema: versionDetailSchema,
          example: definitionVersionExample,
        },
      },
      errors: ['not_found'],
      handler: async ({ principal, params }) => ({ status: 200, body: await definitions.version(principal, params.id, params.version) }),
    }),
    defineRoute({
      method: 'post',
      path: '/v1/agent-definitions/:id/rollback',
      operationId: 'rollbackAgentDefinition',
      tag: 'Agent definitions',
      summary: 'Roll an agent definition back to a version',
      description:
        'Makes an existing version current again; later versions are kept (the next update gets a number after the highest). A version that does not exist is 422 naming `version`; an archived definition is 409 `conflict`.',
      params: definitionParam,
      body: z.object({ version: z.number().int().positive().describe('an existing version') }).strict(),
      requestExample: { version: 1 },
      responses: { 200: { description: 'the current version now', schema: z.object({ ok: z.literal(true), version: z.number().int() }), example: { ok: true, version: 1 } } },
      errors: ['not_found', 'unprocessable_entity', 'conflict'],
      handler: async ({ principal, params, body }) => ({ status: 200, body: await definitions.rollback(principal, params.id, body.version) }),
    }),
    defineRoute({
      method: 'post',
      path: '/v1/agent-definitions/:id/duplicate',
      operationId: 'duplicateAgentDefinition',
      tag: 'Agent definitions',
      summary: 'Duplicate an agent definition',
      description:
        "A new, independent definition at version 1 with the current version's fields (its changelog names the source and version). Archived definitions can be duplicated. A name already in use is 409 `conflict`.",
      params: definitionParam,
      body: z.object({ name: definitionNameSchema }).strict(),
      requestExample: { name: 'sales analyst eu' },
      responses: {
        201: {
          description: 'the copy',
          schema: z.object({ id: z.string().describe('`adef_…`'), name: z.string() }),
          example: { id: 'adef_01jq3vj0n2q4s6u8w0y2a4c6e8', name: 'sales analyst eu' },
        },
      },
      errors: ['not_found', 'unprocessable_entity', 'conflict'],
      handler: async ({ principal, params, body }) => ({ status: 201, body: await definitions.duplicate(principal, params.id, body.name) }),
    }),
  );
}
