import { ApiError, agentFieldsOf } from '@berth/common';
import type { z } from 'zod';
import type { Principal } from '../http/context.js';
import type { AgentDefinitionService } from '../services/agent-definitions.js';
import type { AgentService, AgentView, AgentWait } from '../services/agents.js';
import { createAgentBody } from './schemas.js';

/** Where a field of an agent made from a definition came from; errors name it the same way. */
type Origin = 'definition' | 'overrides' | 'request';

/**
 * Creates an agent from a definition. The fields are layered: the definition's current version
 * (compute, model, systemPrompt as instructions, tools, browser, timeout), then `overrides`, then
 * the fields written at the top level of the request. The result goes through the creation
 * schema and checks as a whole, so an override is validated exactly like the same field at the
 * top level, and an error names the field where the caller wrote it (`overrides.tools`).
 *
 * `request` is the creation body as sent (already valid against the schema): only the fields it
 * holds count as written, not the defaults the schema fills in.
 */
export async function createAgentFromDefinition(
  deps: { agents: AgentService; definitions: AgentDefinitionService },
  principal: Principal,
  sessionId: string,
  request: { definition: string; overrides?: Record<string, unknown> | undefined; [field: string]: unknown },
  wait?: AgentWait,
): Promise<AgentView> {
  const { definition: nameOrId, overrides = {}, ...written } = request;
  for (const field of ['definition', 'overrides']) {
    if (field in overrides) throw fieldError(`overrides.${field}`, 'cannot be overridden');
  }
  const definition = await deps.definitions.resolve(principal, nameOrId);
  const fromDefinition = agentFieldsOf(definition.config);

  const origins = new Map<string, Origin>();
  for (const [fields, origin] of [[fromDefinition, 'definition'], [overrides, 'overrides'], [written, 'request']] as const) {
    for (const field of Object.keys(fields)) origins.set(field, origin);
  }
  const nameOf = (field: string): string => {
    const origin = origins.get(field);
    return origin === 'overrides' || origin === 'definition' ? `${origin}.${field}` : field;
  };

  const parsed = createAgentBody.safeParse({ ...fromDefinition, ...overrides, ...written });
  if (!parsed.success) throw validationFailure(parsed.error, nameOf);
  try {
    return await deps.agents.create(principal, sessionId, {
      ...parsed.data,
      definition: definition.id,
      definitionVersion: definition.version,
      ...(request.overrides === undefined ? {} : { overrides }),
    }, wait);
  } catch (error) {
    throw renamedFields(error, nameOf);
  }
}

function fieldError(field: string, problem: string): ApiError {
  return new ApiError('unprocessable_entity', `${field}: ${problem}`, { fields: { [field]: [problem] } });
}

function validationFailure(error: z.ZodError, nameOf: (field: string) => string): ApiError {
  const fields: Record<string, string[]> = {};
  for (const issue of error.issues) {
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) (fields[nameOf(key)] ??= []).push('unknown field');
      continue;
    }
    const [top, ...rest] = issue.path.map(String);
    const path = top === undefined ? 'body' : [nameOf(top), ...rest].join('.');
    (fields[path] ??= []).push(issue.message);
  }
  const summary = Object.entries(fields)
    .map(([field, messages]) => `${field}: ${messages.join('; ')}`)
    .join(', ');
  return new ApiError('unprocessable_entity', `invalid body: ${summary}`, { fields });
}

/** A 422 of agent creation about a field that came from the definition or the overrides, named so. */
function renamedFields(error: unknown, nameOf: (field: string) => string): unknown {
  if (!(error instanceof ApiError) || error.code !== 'unprocessable_entity') return error;
  const fields = error.details.fields as Record<string, string[]> | undefined;
  if (!fields) return error;
  let message = error.message;
  const renamed: Record<string, string[]> = {};
  for (const [field, problems] of Object.entries(fields)) {
    const name = nameOf(field);
    renamed[name] = problems;
    if (name !== field && message.startsWith(`${field}: `)) message = `${name}: ${message.slice(field.length + 2)}`;
  }
  return new ApiError('unprocessable_entity', message, { ...error.details, fields: renamed });
}
