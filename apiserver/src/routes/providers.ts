import { z } from 'zod';
import { defineRoute, type RouteTable } from '../http/route.js';
import { PROVIDER_NAME_PATTERN, PROVIDER_NAME_RULE, type ProviderService } from '../services/providers.js';
import { SECRET_NAME_PATTERN, SECRET_NAME_RULE } from '@berth/common';
import { providerConfigExample } from './examples.js';

const MAX_CONFIG_BYTES = 16 * 1024;

const providerConfigSchema = z
  .object({
  provider: z.string(),
  enabled: z.boolean().describe('false keeps the configuration but runs the provider managed until it is enabled again'),
  credentialRef: z.string().describe('the name of the organization secret holding the credential; the value is never returned'),
  config: z.record(z.string(), z.unknown()).nullable(),
  createdAt: z.string().describe('ISO 8601'),
  })
  .meta({ id: 'ProviderConfig', description: "an organization's configuration of a BYOI provider" });

const providerParam = z
  .object({ provider: z.string().regex(PROVIDER_NAME_PATTERN, `must be ${PROVIDER_NAME_RULE}`).describe('`remote`, `kubernetes`, a model vendor of this install (`openai`, `anthropic`, …) or another name') })
  .strict();

const putBody = z
  .object({
    credentialRef: z
      .string({ error: (issue) => (issue.input === undefined ? 'required: the name of an organization secret holding the credential' : 'must be a string') })
      .regex(SECRET_NAME_PATTERN, `must be a secret name: ${SECRET_NAME_RULE}`)
      .describe('the name of an existing organization secret (`POST /v1/secrets`) holding the credential'),
    config: z
      .record(z.string(), z.unknown())
      .nullable()
      .optional()
      .refine((config) => config == null || Buffer.byteLength(JSON.stringify(config)) <= MAX_CONFIG_BYTES, `must be at most ${MAX_CONFIG_BYTES / 1024} KiB of JSON`)
      .describe('provider settings, checked by provider (see the description); default null'),
    enabled: z.boolean().optional().default(true).describe('default true'),
  })
  .strict();

const modeReply = (mode: 'byoi' | 'managed') => z.object({ ok: z.literal(true), provider: z.string(), mode: z.literal(mode) });

const MODES =
  'A provider that is not listed runs managed (on the platform\'s compute and keys, billed by Berth); a listed, enabled one is BYOI ("bring your own infrastructure"): it runs on the organization\'s own infrastructure or vendor account, which the organization pays directly. Configurations belong to the key mode that wrote them: a test key neither sees nor uses a live key\'s (and test keys run on mock models whatever is configured).';

const CREDENTIALS =
  '`credentialRef` names an organization secret (store it first with `POST /v1/secrets`; the credential is never sent inline). It holds: for `remote`, the bearer token Berth sends to the remote provider (the remote provider protocol); for `kubernetes`, a kubeconfig; for a model vendor (`openai`, `anthropic`, … as this install configures them), the API key.';

const CONFIG =
  '`config` by provider: a model vendor takes an optional `baseUrl` (http(s)), the organization\'s own endpoint speaking that vendor\'s API (an Azure OpenAI or vLLM deployment, say), default the install\'s URL for the vendor, and no other key; `kubernetes` takes an optional `namespace` (a DNS label); any other provider (`remote`, a name of your choosing, or one of this install\'s own such as `local`) is compute reached over the remote provider protocol and requires `endpoint`, the http(s) URL of the remote provider, beside any other keys. URLs must not carry credentials.';

export function providerRoutes(table: RouteTable, providers: ProviderService): void {
  table.add(
    defineRoute({
      method: 'get',
      path: '/v1/providers',
      operationId: 'listProviders',
      tag: 'Providers',
      summary: 'List BYOI provider configurations',
      description: `The organization's provider configurations for the calling key's mode, by name. ${MODES} Credentials are shown by the name of their secret, never by value.`,
      responses: { 200: { description: 'the configured providers', schema: z.object({ data: z.array(providerConfigSchema) }), example: { data: [providerConfigExample] } } },
      errors: [],
      handler: async ({ principal }) => ({ status: 200, body: await providers.list(principal) }),
    }),
    defineRoute({
      method: 'put',
      path: '/v1/providers/:provider',
      operationId: 'putProvider',
      tag: 'Providers',
      summary: 'Configure a provider as BYOI',
      description: `Creates or replaces the organization's configuration of \`provider\` (the name: ${PROVIDER_NAME_RULE}). ${MODES} ${CREDENTIALS} A \`credentialRef\` that names no organization secret is refused with 422. ${CONFIG} A model vendor's configuration applies from each agent's next run; a compute provider's from the next provisioning.`,
      params: providerParam,
      body: putBody,
      requestExample: { credentialRef: 'OPENAI_API_KEY', config: { baseUrl: 'https://llm.example.com/v1' } },
      responses: { 200: { description: 'configured', schema: modeReply('byoi'), example: { ok: true, provider: 'openai', mode: 'byoi' } } },
      errors: ['unprocessable_entity'],
      handler: async ({ principal, params, body }) => ({ status: 200, body: await providers.put(principal, params.provider, body) }),
    }),
    defineRoute({
      method: 'delete',
      path: '/v1/providers/:provider',
      operationId: 'deleteProvider',
      tag: 'Providers',
      summary: 'Return a provider to managed mode',
      description:
        "Removes the organization's configuration of `provider`: it runs managed again for future provisioning and, for a model vendor, from each agent's next run. Agents in flight are untouched: a sandbox already running on the organization's infrastructure stays there until it ends. The credential's secret is kept (delete it with `DELETE /v1/secrets/{name}`). 404 when the provider was not configured.",
      params: providerParam,
      responses: { 200: { description: 'removed', schema: modeReply('managed'), example: { ok: true, provider: 'openai', mode: 'managed' } } },
      errors: ['not_found', 'unprocessable_entity'],
      handler: async ({ principal, params }) => ({ status: 200, body: await providers.delete(principal, params.provider) }),
    }),
  );
}
