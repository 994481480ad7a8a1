import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { egressCidrProblem, egressHostProblem, modelSchema, parseDuration } from '@berth/crds';
import { DEFAULT_COMPUTE_PRICES, DEFAULT_STORAGE_PRICE, computePricesSchema, type ComputePrices } from './pricing.js';
import { z } from 'zod';
import { channelLimitsSchema } from './channels.js';

/**
 * Every setting in one table: its environment variable, its command-line flag, what it
 * means and its default. `berth --help` prints this table and `loadConfig` parses it, so
 * the two cannot disagree.
 */
interface Setting<T> {
  env: string;
  flag?: string;
  description: string;
  /** Shown in help; `undefined` means unset unless given. */
  defaultText?: string;
  schema: z.ZodType<T>;
  /** The value when neither flag nor variable gives one and it depends on the environment (read when the configuration is loaded, never at import). */
  fallback?: (env: NodeJS.ProcessEnv) => string;
}

const xdg = (env: NodeJS.ProcessEnv, variable: string, fallback: string) => env[variable] || join(homedir(), fallback);
const isRoot = () => process.getuid?.() === 0;
/** Root runs Berth as a system service would keep its state; other users keep it in their home. */
const defaultDataDir = (env: NodeJS.ProcessEnv) => (isRoot() ? '/var/lib/berth' : join(xdg(env, 'XDG_DATA_HOME', '.local/share'), 'berth'));
const defaultImageDir = (env: NodeJS.ProcessEnv) => (isRoot() ? '/var/cache/berth/images' : join(xdg(env, 'XDG_CACHE_HOME', '.cache'), 'berth', 'images'));

function byteSize(text: string): number | undefined {
  const match = /^(\d+)(Ki|Mi|Gi)?$/.exec(text);
  if (!match) return undefined;
  const factor = { Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3 }[match[2] ?? ''] ?? 1;
  return Number(match[1]) * factor;
}

const memorySize = (fallback: string) =>
  z
    .string()
    .default(fallback)
    .transform((text, ctx) => {
      const bytes = byteSize(text);
      if (bytes === undefined || bytes < 64 * 1024 ** 2) {
        ctx.addIssue({ code: 'custom', message: `"${text}" is not a size of at least 64Mi (bytes, or with Ki, Mi, Gi)` });
        return z.NEVER;
      }
      return bytes;
    });

/** Inside a pod the service account says which namespace it runs in. */
function defaultNamespace(): string {
  try {
    return readFileSync('/var/run/secrets/kubernetes.io/serviceaccount/namespace', 'utf8').trim() || 'default';
  } catch {
    return 'default';
  }
}

/** How a `gpu` value of an agent becomes scheduling constraints and a device limit. */
export const gpuTableSchema = z.record(
  z.string(),
  z
    .object({
      nodeSelector: z.record(z.string(), z.string()).default({}),
      tolerations: z
        .array(
          z
            .object({
              key: z.string().optional(),
              operator: z.enum(['Exists', 'Equal']).optional(),
              value: z.string().optional(),
              effect: z.enum(['NoSchedule', 'PreferNoSchedule', 'NoExecute']).optional(),
            })
            .strict(),
        )
        .default([]),
      resource: z.string().default('nvidia.com/gpu'),
      count: z.number().int().positive().default(1),
    })
    .strict(),
);
export type GpuTable = z.output<typeof gpuTableSchema>;

const nvidiaToleration = { key: 'nvidia.com/gpu', operator: 'Exists' as const, effect: 'NoSchedule' as const };
const nvidia = (product: string) => ({
  nodeSelector: { 'nvidia.com/gpu.product': product },
  tolerations: [nvidiaToleration],
  resource: 'nvidia.com/gpu',
  count: 1,
});
/** Product labels as NVIDIA GPU feature discovery sets them. */
export const DEFAULT_GPU_TABLE: GpuTable = {
  t4: nvidia('Tesla-T4'),
  l4: nvidia('NVIDIA-L4'),
  a10g: nvidia('NVIDIA-A10G'),
  a100: nvidia('NVIDIA-A100-SXM4-80GB'),
  h100: nvidia('NVIDIA-H100-80GB-HBM3'),
};

/** Where a model vendor is reached; keys come from the environment, never from this table. */
export const modelProvidersSchema = z.record(
  z.string().regex(/^[a-z0-9][a-z0-9-]*$/, 'vendor names are lowercase letters, digits and -'),
  z
    .object({
      api: z.enum(['openai', 'anthropic']),
      baseUrl: z.string().url(),
      apiKeyEnv: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/).optional(),
    })
    .strict(),
);
export type ModelProviders = z.output<typeof modelProvidersSchema>;

/** An OpenAI-compatible embeddings endpoint for knowledge search (`POST <baseUrl>/embeddings`). */
export const embeddingsSchema = z
  .object({
    baseUrl: z.string().url(),
    model: z.string().min(1),
    apiKeyEnv: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/).optional(),
  })
  .strict();
export type EmbeddingsSettings = z.output<typeof embeddingsSchema>;

export const DEFAULT_MODEL_PROVIDERS: ModelProviders = {
  openai: { api: 'openai', baseUrl: 'https://api.openai.com/v1', apiKeyEnv: 'OPENAI_API_KEY' },
  anthropic: { api: 'anthropic', baseUrl: 'https://api.anthropic.com', apiKeyEnv: 'ANTHROPIC_API_KEY' },
};

const dollars = z.string().regex(/^\d+(\.\d{1,5})?$/, 'dollars per million tokens with at most five decimals, as a string');
export const modelPricesSchema = z.record(
  z.string().regex(/^[a-z0-9][a-z0-9-]*\/\S+$/, 'keys are <vendor>/<model>'),
  z.object({ input: dollars, output: dollars }).strict(),
);
export type ModelPrices = z.output<typeof modelPricesSchema>;

/** List prices in dollars per million tokens; an install overrides or adds with BERTH_MODEL_PRICES. */
export const DEFAULT_MODEL_PRICES: ModelPrices = {
  'openai/gpt-4o-mini': { input: '0.15', output: '0.60' },
  'openai/gpt-4o': { input: '2.50', output: '10.00' },
  'openai/gpt-4.1': { input: '2.00', output: '8.00' },
  'openai/gpt-4.1-mini': { input: '0.40', output: '1.60' },
  'openai/gpt-4.1-nano': { input: '0.10', output: '0.40' },
  'anthropic/claude-opus-4-1': { input: '15.00', output: '75.00' },
  'anthropic/claude-sonnet-4-5': { input: '3.00', output: '15.00' },
  'anthropic/claude-haiku-4-5': { input: '1.00', output: '5.00' },
};

const durationMs = (fallback: string) =>
  z
    .string()
    .default(fallback)
    .transform((text, ctx) => {
      const seconds = parseDuration(text);
      if (seconds === undefined || seconds === 0) {
        ctx.addIssue({ code: 'custom', message: `"${text}" is not a duration such as 30s, 5m or 2h` });
        return z.NEVER;
      }
      return seconds * 1000;
    });

export const SETTINGS = {
  port: {
    env: 'BERTH_PORT',
    flag: 'port',
    description: 'TCP port of the HTTP API (0 picks a free one)',
    defaultText: '8080',
    schema: z.coerce.number().int().min(0).max(65535).default(8080),
  },
  host: {
    env: 'BERTH_HOST',
    flag: 'host',
    description: 'address the HTTP API listens on',
    defaultText: '127.0.0.1',
    schema: z.string().min(1).default('127.0.0.1'),
  },
  dataDir: {
    env: 'BERTH_DATA_DIR',
    flag: 'data-dir',
    description: 'where embedded mode keeps its PostgreSQL data, sandboxes and workspaces',
    defaultText: '/var/lib/berth as root, else ~/.local/share/berth',
    schema: z.string().min(1),
    fallback: defaultDataDir,
  },
  databaseUrl: {
    env: 'DATABASE_URL',
    flag: 'database-url',
    description: 'PostgreSQL connection string; unset runs an embedded PostgreSQL in the data directory',
    schema: z.string().url().optional(),
  },
  publicUrl: {
    env: 'BERTH_PUBLIC_URL',
    flag: 'public-url',
    description: 'base URL clients use, when it differs from the listening address',
    schema: z.string().url().optional(),
  },
  e2bDomain: {
    env: 'BERTH_E2B_DOMAIN',
    description:
      'the domain of the E2B-compatible surface: api.<domain> serves its control plane and <port>-<sandboxId>.<domain> a sandbox (wildcard DNS and TLS in front); unset: only the /e2b prefix and the E2b-Sandbox-Id header',
    schema: z
      .string()
      .regex(/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+$/, 'a DNS domain such as sandboxes.example.com')
      .optional(),
  },
  logLevel: {
    env: 'BERTH_LOG_LEVEL',
    flag: 'log-level',
    description: 'trace, debug, info, warn, error or silent (logs are JSON lines on stderr)',
    defaultText: 'info',
    schema: z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']).default('info'),
  },
  runsc: {
    env: 'BERTH_RUNSC',
    description: 'path of the gVisor runsc binary used by the local provider',
    defaultText: 'runsc (from PATH)',
    schema: z.string().min(1).default('runsc'),
  },
  imageDir: {
    env: 'BERTH_IMAGE_DIR',
    description: 'where root filesystems of the local sandbox images are built and kept',
    defaultText: '/var/cache/berth/images as root, else ~/.cache/berth/images',
    schema: z.string().min(1),
    fallback: defaultImageDir,
  },
  sandboxNetwork: {
    env: 'BERTH_SANDBOX_NETWORK',
    description: 'network of local sandboxes: none (isolated) or host (shares the host network; development only)',
    defaultText: 'none',
    schema: z.enum(['none', 'host']).default('none'),
  },
  egressAllow: {
    env: 'BERTH_EGRESS_ALLOW',
    description:
      'the egress allow-list of agents created without `egress` (and whose definition has none): comma-separated DNS names, wildcards (*.pypi.org) and networks (10.1.0.0/16); empty: no network (ADR 46)',
    defaultText: 'empty',
    schema: z
      .string()
      .optional()
      .transform((text, context) => {
        const entries = (text ?? '').split(',').map((entry) => entry.trim()).filter(Boolean);
        const hosts: string[] = [];
        const cidrs: string[] = [];
        for (const entry of entries) {
          const problem = entry.includes('/') ? egressCidrProblem(entry) : egressHostProblem(entry);
          if (problem) context.addIssue({ code: 'custom', message: `"${entry}": ${problem}` });
          (entry.includes('/') ? cidrs : hosts).push(entry);
        }
        return { hosts, cidrs };
      }),
  },
  egressDnsServers: {
    env: 'BERTH_EGRESS_DNS_SERVERS',
    description: 'comma-separated DNS servers (address or address:port) the egress proxy resolves the names sandboxes ask for with; default the host\'s resolver',
    defaultText: "the host's resolver",
    schema: z
      .string()
      .optional()
      .transform((text) => (text ?? '').split(',').map((entry) => entry.trim()).filter(Boolean)),
  },
  egressCaFile: {
    env: 'BERTH_EGRESS_CA_FILE',
    description:
      'PEM file of certificate authorities the egress proxy trusts, besides the system ones, when it connects on to a host whose requests it adds a credential to (an internal CA)',
    schema: z.string().min(1).optional(),
  },
  egressGateway: {
    env: 'BERTH_EGRESS_GATEWAY',
    description:
      'host:port of the egress gateway (the operator\'s, ADR 52) that sandbox pods of agents with an egress policy use as their proxy; a Service name (<name>.<namespace>.svc) is given to the pods as its ClusterIP, read from the API server, another name resolved; set, the kubernetes provider enforces egress policies (the chart sets it with egressGateway.enabled)',
    schema: z
      .string()
      .regex(/^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, 'must be host:port')
      .optional(),
  },
  egressGatewayPort: {
    env: 'BERTH_EGRESS_GATEWAY_PORT',
    description: 'port on which `berth operator` serves the egress gateway to sandbox pods (ADR 52); unset: it serves none',
    schema: z.coerce.number().int().min(1).max(65535).optional(),
  },
  egressGatewayHost: {
    env: 'BERTH_EGRESS_GATEWAY_HOST',
    description: 'address the egress gateway listens on; default BERTH_HOST',
    defaultText: 'BERTH_HOST',
    schema: z.string().min(1).optional(),
  },
  sandboxCpus: {
    env: 'BERTH_SANDBOX_CPUS',
    description: 'CPU limit of each local sandbox, in cores',
    defaultText: '1',
    schema: z.coerce.number().positive().max(256).default(1),
  },
  sandboxMemory: {
    env: 'BERTH_SANDBOX_MEMORY',
    description: 'memory limit of each sandbox (bytes, or with Ki, Mi, Gi)',
    defaultText: '1Gi',
    schema: memorySize('1Gi'),
  },
  browserImage: {
    env: 'BERTH_BROWSER_IMAGE',
    description:
      'image of browser agents: a local image name (browser) or, in cluster mode, a container image; browser: true is refused while unset',
    schema: z.string().min(1).optional(),
  },
  defaultProvider: {
    env: 'BERTH_DEFAULT_PROVIDER',
    description: 'provider of agents that name none',
    defaultText: 'local in embedded mode, kubernetes in cluster mode',
    schema: z.enum(['local', 'kubernetes']).optional(),
  },
  defaultModel: {
    env: 'BERTH_DEFAULT_MODEL',
    description: 'model (<vendor>/<model>) of agents that name none',
    defaultText: 'openai/gpt-4o-mini',
    schema: modelSchema.default('openai/gpt-4o-mini'),
  },
  namespace: {
    env: 'BERTH_NAMESPACE',
    flag: 'namespace',
    description: "cluster mode: namespace of Berth's custom resources",
    defaultText: "the pod's own namespace, else default",
    schema: z.string().regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'must be a Kubernetes namespace name').default(defaultNamespace()),
  },
  sandboxNamespace: {
    env: 'BERTH_SANDBOX_NAMESPACE',
    description: 'cluster mode: namespace of sandbox pods (pods are owned by their Agent only when it is the same)',
    defaultText: 'BERTH_NAMESPACE',
    schema: z.string().regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'must be a Kubernetes namespace name').optional(),
  },
  metricsPort: {
    env: 'BERTH_METRICS_PORT',
    flag: 'metrics-port',
    description:
      "cluster mode: port of /metrics beside the API port in `berth apiserver` (so that Prometheus scrapes a port clients never reach), and of the operator's /healthz, /readyz and /metrics",
    defaultText: '9090',
    schema: z.coerce.number().int().min(0).max(65535).default(9090),
  },
  leaderElection: {
    env: 'BERTH_LEADER_ELECTION',
    description: 'cluster mode: operator replicas elect one leader through a coordination.k8s.io Lease',
    defaultText: 'true',
    schema: z.enum(['true', 'false']).default('true').transform((value) => value === 'true'),
  },
  runtimeClass: {
    env: 'BERTH_RUNTIME_CLASS',
    description: 'cluster mode: runtimeClassName of sandbox pods; "none" for the node default runtime',
    defaultText: 'gvisor',
    schema: z
      .string()
      .default('gvisor')
      .transform((value) => (value === 'none' ? undefined : value)),
  },
  nodeAgentPort: {
    env: 'BERTH_NODE_AGENT_PORT',
    description:
      "cluster mode: port of the node agents (`berth node`, a DaemonSet on the host network) on each node's InternalIP; set, pauses checkpoint pods natively (processes and memory) where a node agent answers. `berth node` listens on it",
    defaultText: 'unset: pods pause at filesystem level',
    schema: z.coerce.number().int().min(1).max(65535).optional(),
  },
  nodeAgentToken: {
    env: 'BERTH_NODE_AGENT_TOKEN',
    description: 'cluster mode: the bearer token the operator presents to node agents and they require (at least 32 characters; the chart generates it)',
    schema: z.string().min(32, 'must be at least 32 characters').optional(),
  },
  nodeName: {
    env: 'BERTH_NODE_NAME',
    description: "berth node: the name of this node's Node object (the chart sets it from spec.nodeName)",
    defaultText: 'the host name',
    schema: z.string().min(1).optional(),
  },
  nodeRunscRoot: {
    env: 'BERTH_NODE_RUNSC_ROOT',
    description: "berth node: the runsc state directory of gVisor's containerd shim for Kubernetes pods (its runsc.toml `root`, then the namespace)",
    defaultText: '/run/containerd/runsc/k8s.io',
    schema: z.string().min(1).default('/run/containerd/runsc/k8s.io'),
  },
  nodeStateDir: {
    env: 'BERTH_NODE_STATE_DIR',
    description: 'berth node: where it installs the runsc wrapper (bin/runsc) and stages checkpoints to restore (restores/)',
    defaultText: '/var/lib/berth-node',
    schema: z.string().min(1).default('/var/lib/berth-node'),
  },
  imagePython: {
    env: 'BERTH_IMAGE_PYTHON',
    description: 'cluster mode: container image of python sandboxes',
    defaultText: 'berth/sandbox-python:0.1.0',
    schema: z.string().min(1).default('berth/sandbox-python:0.1.0'),
  },
  imageNode: {
    env: 'BERTH_IMAGE_NODE',
    description: 'cluster mode: container image of node sandboxes',
    defaultText: 'berth/sandbox-node:0.1.0',
    schema: z.string().min(1).default('berth/sandbox-node:0.1.0'),
  },
  imageGo: {
    env: 'BERTH_IMAGE_GO',
    description: 'cluster mode: container image of go sandboxes',
    defaultText: 'berth/sandbox-go:0.1.0',
    schema: z.string().min(1).default('berth/sandbox-go:0.1.0'),
  },
  gpuTable: {
    env: 'BERTH_GPU_TABLE',
    description:
      'cluster mode: JSON object from gpu type to { nodeSelector, tolerations, resource, count } for sandbox pods',
    defaultText: 't4, l4, a10g, a100, h100 on NVIDIA GPU feature discovery labels',
    schema: z
      .string()
      .optional()
      .transform((text, ctx) => {
        if (text === undefined) return DEFAULT_GPU_TABLE;
        try {
          return gpuTableSchema.parse(JSON.parse(text));
        } catch (error) {
          ctx.addIssue({ code: 'custom', message: `not a GPU table: ${(error as Error).message}` });
          return z.NEVER;
        }
      }),
  },
  sandboxCpuRequest: {
    env: 'BERTH_SANDBOX_CPU_REQUEST',
    description: 'cluster mode: CPU request of each sandbox pod, in cores (the limit is BERTH_SANDBOX_CPUS)',
    defaultText: '0.25',
    schema: z.coerce.number().positive().max(256).default(0.25),
  },
  sandboxMemoryRequest: {
    env: 'BERTH_SANDBOX_MEMORY_REQUEST',
    description: 'cluster mode: memory request of each sandbox pod (the limit is BERTH_SANDBOX_MEMORY)',
    defaultText: '256Mi',
    schema: memorySize('256Mi'),
  },
  workspaceSize: {
    env: 'BERTH_WORKSPACE_SIZE',
    description:
      'size limit of the /workspace of each sandbox: local sandboxes get a filesystem of this size (a sparse file on the host disk, so writing past it fails with ENOSPC); in cluster mode the sizeLimit of the pod\'s volume',
    defaultText: '10Gi',
    schema: memorySize('10Gi'),
  },
  sandboxOverlaySize: {
    env: 'BERTH_SANDBOX_OVERLAY_SIZE',
    description:
      'local sandboxes: largest the writable layer over the image may grow (/tmp, /root, caches: every write outside /workspace; kept in the sandbox\'s memory, so part of BERTH_SANDBOX_MEMORY); writing past it fails with ENOSPC',
    defaultText: '256Mi',
    schema: memorySize('256Mi'),
  },
  modelProviders: {
    env: 'BERTH_MODEL_PROVIDERS',
    description:
      'JSON object from model vendor to { api: "openai"|"anthropic", baseUrl, apiKeyEnv } (adds to or replaces the openai and anthropic defaults; any OpenAI-compatible server works: vLLM, Ollama, ...)',
    defaultText: 'openai (OPENAI_API_KEY) and anthropic (ANTHROPIC_API_KEY) at their public APIs',
    schema: z
      .string()
      .optional()
      .transform((text, ctx) => {
        try {
          return { ...DEFAULT_MODEL_PROVIDERS, ...(text === undefined ? {} : modelProvidersSchema.parse(JSON.parse(text))) };
        } catch (error) {
          ctx.addIssue({ code: 'custom', message: `not a model provider table: ${(error as Error).message}` });
          return z.NEVER;
        }
      }),
  },
  embeddings: {
    env: 'BERTH_EMBEDDINGS',
    description:
      'JSON { baseUrl, model, apiKeyEnv? } of an OpenAI-compatible embeddings endpoint (POST <baseUrl>/embeddings): knowledge chunks and queries are embedded and searched by similarity before full-text matches',
    defaultText: 'unset: knowledge search is PostgreSQL full-text search only',
    schema: z
      .string()
      .optional()
      .transform((text, ctx) => {
        if (text === undefined) return undefined;
        try {
          return embeddingsSchema.parse(JSON.parse(text));
        } catch (error) {
          ctx.addIssue({ code: 'custom', message: `not an embeddings setting: ${(error as Error).message}` });
          return z.NEVER;
        }
      }),
  },
  modelPrices: {
    env: 'BERTH_MODEL_PRICES',
    description:
      'JSON object from <vendor>/<model> to { input, output } in dollars per million tokens, as decimal strings (adds to or replaces the built-in table; unpriced models cost nothing)',
    defaultText: 'current list prices of common OpenAI and Anthropic models',
    schema: z
      .string()
      .optional()
      .transform((text, ctx) => {
        try {
          return { ...DEFAULT_MODEL_PRICES, ...(text === undefined ? {} : modelPricesSchema.parse(JSON.parse(text))) };
        } catch (error) {
          ctx.addIssue({ code: 'custom', message: `not a model price table: ${(error as Error).message}` });
          return z.NEVER;
        }
      }),
  },
  computePrices: {
    env: 'BERTH_COMPUTE_PRICES',
    description:
      'JSON object from provider name (or * for all) to { python, node, go, browser, gpu: { <type>: price } } in dollars per minute, as decimal strings; a GPU price is added to the compute price; merged over the built-in * entry',
    defaultText: '$0.0010/min for python, node and go, $0.0020 for browser agents, plus t4 $0.0100, l4 $0.0135, a10g $0.0200, a100 $0.0600, h100 $0.1000',
    schema: z
      .string()
      .optional()
      .transform((text, ctx) => {
        try {
          const own = text === undefined ? {} : computePricesSchema.parse(JSON.parse(text));
          const star = { ...DEFAULT_COMPUTE_PRICES['*'], ...own['*'], gpu: { ...DEFAULT_COMPUTE_PRICES['*']!.gpu, ...own['*']?.gpu } };
          return { ...own, '*': star } as ComputePrices;
        } catch (error) {
          ctx.addIssue({ code: 'custom', message: `not a compute price table: ${(error as Error).message}` });
          return z.NEVER;
        }
      }),
  },
  storagePrice: {
    env: 'BERTH_STORAGE_PRICE',
    description: 'price of keeping snapshot archives, in dollars per GB-hour (decimal gigabytes), as a decimal string',
    defaultText: DEFAULT_STORAGE_PRICE,
    schema: z
      .string()
      .regex(/^\d+(\.\d{1,11})?$/, 'dollars as a decimal string with at most eleven decimals')
      .default(DEFAULT_STORAGE_PRICE),
  },
  meterInterval: {
    env: 'BERTH_METER_INTERVAL',
    description: 'how often the operator charges running sandboxes and stored snapshots and checks session limits',
    defaultText: '15s',
    schema: durationMs('15s'),
  },
  sessionCostStep: {
    env: 'BERTH_SESSION_COST_STEP',
    description: 'session.cost_threshold is written each time a session\'s total cost crosses another multiple of this many cents',
    defaultText: '100',
    schema: z.coerce.number().int().min(1).default(100),
  },
  secretsKey: {
    env: 'BERTH_SECRETS_KEY',
    description:
      'key that encrypts secrets at rest (AES-256-GCM): 32 bytes as base64 or hex; embedded mode generates one into <data dir>/secrets.key when unset, cluster mode needs it (the chart keeps it in a Kubernetes Secret)',
    schema: z.string().min(1).optional(),
  },
  secretsPreviousKeys: {
    env: 'BERTH_SECRETS_PREVIOUS_KEYS',
    description: 'comma-separated earlier keys, to read secrets written before a rotation until `berth secrets rotate` re-encrypts them',
    schema: z
      .string()
      .optional()
      .transform((text) => (text ? text.split(',').map((key) => key.trim()).filter(Boolean) : [])),
  },
  oidcIssuer: {
    env: 'BERTH_OIDC_ISSUER',
    description:
      'URL of the OpenID Connect provider people sign in to the management plane (/api, the dashboard) with; unset: no provider, sign-in only by the one-time links of `berth up` and `berth admin login`',
    schema: z.string().url().optional(),
  },
  oidcClientId: {
    env: 'BERTH_OIDC_CLIENT_ID',
    description: 'client id of Berth at the OpenID Connect provider (needed with BERTH_OIDC_ISSUER)',
    schema: z.string().min(1).optional(),
  },
  oidcClientSecret: {
    env: 'BERTH_OIDC_CLIENT_SECRET',
    description: 'client secret of Berth at the OpenID Connect provider (needed with BERTH_OIDC_ISSUER; the chart reads it from a Secret)',
    schema: z.string().min(1).optional(),
  },
  oidcAllowHttp: {
    env: 'BERTH_OIDC_ALLOW_HTTP',
    description: 'accept an http:// BERTH_OIDC_ISSUER (not only https://); for development',
    defaultText: 'false',
    schema: z.enum(['true', 'false']).default('false').transform((value) => value === 'true'),
  },
  dashboardUrl: {
    env: 'BERTH_DASHBOARD_URL',
    description:
      'URL where people reach the management plane (/api); the OpenID Connect redirect URL is <this>/api/auth/callback, and an https:// URL makes the sign-in cookie Secure',
    defaultText: 'BERTH_PUBLIC_URL, else the origin of each request',
    schema: z.string().url().optional(),
  },
  signup: {
    env: 'BERTH_SIGNUP',
    description:
      'who gets an organization at sign-in: invite (the first person to sign in owns the first organization; others need an invite) or organization (everyone without one gets their own)',
    defaultText: 'invite',
    schema: z.enum(['invite', 'organization']).default('invite'),
  },
  providerTokens: {
    env: 'BERTH_PROVIDER_TOKENS',
    description:
      'comma-separated bearer tokens that other Berth installs (or any client of the remote provider protocol) use to run sandboxes here, at /provider/v1 (berth up: the API port; cluster: the operator metrics port); unset serves nothing',
    schema: z
      .string()
      .optional()
      .transform((text) => (text ? text.split(',').map((token) => token.trim()).filter(Boolean) : [])),
  },
  byoiAllowHttp: {
    env: 'BERTH_BYOI_ALLOW_HTTP',
    description: 'accept http:// URLs (not only https://) for BYOI endpoints (config.endpoint, a model config.baseUrl)',
    defaultText: 'false',
    schema: z.enum(['true', 'false']).default('false').transform((value) => value === 'true'),
  },
  byoiAllowPrivate: {
    env: 'BERTH_BYOI_ALLOW_PRIVATE',
    description:
      'let BYOI endpoints and model base URLs point at private, loopback and link-local addresses (checked at PUT /v1/providers and before each connection); for installs whose organizations run compute inside the same network',
    defaultText: 'false',
    schema: z.enum(['true', 'false']).default('false').transform((value) => value === 'true'),
  },
  webhookAllowHttp: {
    env: 'BERTH_WEBHOOK_ALLOW_HTTP',
    description: 'accept http:// webhook URLs (not only https://), and the same for knowledge URL sources and MCP servers; for development',
    defaultText: 'false',
    schema: z.enum(['true', 'false']).default('false').transform((value) => value === 'true'),
  },
  webhookAllowPrivate: {
    env: 'BERTH_WEBHOOK_ALLOW_PRIVATE',
    description: 'deliver webhooks to private, loopback and link-local addresses (checked at registration and again after DNS resolution at delivery); the same rule holds for knowledge URL sources and MCP servers',
    defaultText: 'false',
    schema: z.enum(['true', 'false']).default('false').transform((value) => value === 'true'),
  },
  currency: {
    env: 'BERTH_CURRENCY',
    description: 'currency of every price and cost (lowercase ISO 4217)',
    defaultText: 'usd',
    schema: z.string().regex(/^[a-z]{3}$/, 'must be a lowercase three-letter currency code').default('usd'),
  },
  defaultPlan: {
    env: 'BERTH_DEFAULT_PLAN',
    description:
      'plan of an organization that has none of its own: free (60 requests/minute per API key), pro (300) or enterprise (BERTH_ENTERPRISE_RATE_LIMIT); the first organization of an install is enterprise',
    defaultText: 'free',
    schema: z.enum(['free', 'pro', 'enterprise']).default('free'),
  },
  enterpriseRateLimit: {
    env: 'BERTH_ENTERPRISE_RATE_LIMIT',
    description: 'requests per minute per API key on the enterprise plan (/v1 routes)',
    defaultText: '60000',
    schema: z.coerce.number().int().min(1).max(10_000_000).default(60_000),
  },
  runMaxSteps: {
    env: 'BERTH_RUN_MAX_STEPS',
    description: 'model calls a run may make before it stops with step_limit',
    defaultText: '25',
    schema: z.coerce.number().int().min(1).max(1000).default(25),
  },
  runnerWorkers: {
    env: 'BERTH_RUNNER_WORKERS',
    description: 'runs executed at once by this process (0: this process runs none)',
    defaultText: '4',
    schema: z.coerce.number().int().min(0).max(256).default(4),
  },
  modelTimeout: {
    env: 'BERTH_MODEL_TIMEOUT',
    description: 'longest single model call, retries apart',
    defaultText: '120s',
    schema: durationMs('120s'),
  },
  runnerLease: {
    env: 'BERTH_RUNNER_LEASE',
    description: 'a run whose runner has not renewed its claim for this long is taken over by another runner',
    defaultText: '30s',
    schema: durationMs('30s'),
  },
  runnerPoll: {
    env: 'BERTH_RUNNER_POLL',
    description:
      'how often an idle runner worker looks for queued runs (and runs whose runner died) on its own; a notification wakes it at once for a new run',
    defaultText: '2s',
    schema: durationMs('2s'),
  },
  streamHeartbeat: {
    env: 'BERTH_STREAM_HEARTBEAT',
    description: 'interval of heartbeat events on open agent streams',
    defaultText: '15s',
    schema: durationMs('15s'),
  },
  channelLimits: {
    env: 'BERTH_CHANNEL_LIMITS',
    description:
      'requests a minute the public channel routes accept, as JSON such as {"visitorMessages":5}: channelMessages (to one channel), visitorMessages (from one visitor of a channel), ipMessages and ipReads (from one client IP); fields left out keep their defaults',
    defaultText: '600, 20, 60 and 300 a minute',
    schema: z
      .string()
      .default('{}')
      .transform((text, ctx) => {
        try {
          const parsed = channelLimitsSchema.safeParse(JSON.parse(text));
          if (parsed.success) return parsed.data;
          ctx.addIssue({ code: 'custom', message: parsed.error.issues.map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`).join('; ') });
        } catch {
          ctx.addIssue({ code: 'custom', message: 'not JSON' });
        }
        return z.NEVER;
      }),
  },
  channelReplyTimeout: {
    env: 'BERTH_CHANNEL_REPLY_TIMEOUT',
    description: 'longest a public channel message waits for its reply before it is answered 504 (the reply is still stored and streamed)',
    defaultText: '120s',
    schema: durationMs('120s'),
  },
  slackApiUrl: {
    env: 'BERTH_SLACK_API_URL',
    description: 'base URL of the Slack Web API that channel replies are posted to (chat.postMessage)',
    defaultText: 'https://slack.com/api',
    schema: z.string().url().default('https://slack.com/api'),
  },
  sendgridApiUrl: {
    env: 'BERTH_SENDGRID_API_URL',
    description: 'base URL of the SendGrid API that email channel replies are sent through (v3/mail/send)',
    defaultText: 'https://api.sendgrid.com',
    schema: z.string().url().default('https://api.sendgrid.com'),
  },
  execTimeout: {
    env: 'BERTH_EXEC_TIMEOUT',
    description: 'longest synchronous exec before it is killed and answered with 504 timeout',
    defaultText: '120s',
    schema: durationMs('120s'),
  },
  warmStartTimeout: {
    env: 'BERTH_WARM_START_TIMEOUT',
    description:
      'longest a warm-pool sandbox may take to start (on Kubernetes: its pod Pending, e.g. unschedulable) before it is ended and another started; the pool\'s Filled condition says why',
    defaultText: '5m',
    schema: durationMs('5m'),
  },
  warmSandboxesMax: {
    env: 'BERTH_WARM_SANDBOXES_MAX',
    description: 'most warm-pool sandboxes one organization may keep started (the sum of its pools\' sizes, per key mode); 0 turns warm pools off',
    defaultText: '20',
    schema: z.coerce.number().int().min(0).max(10_000).default(20),
  },
  controllerWorkers: {
    env: 'BERTH_CONTROLLER_WORKERS',
    description: 'agents reconciled at once',
    defaultText: '4',
    schema: z.coerce.number().int().min(1).max(64).default(4),
  },
  snapshotStorage: {
    env: 'BERTH_SNAPSHOT_STORAGE',
    description: 'where snapshot archives of paused agents are kept: directory (BERTH_SNAPSHOT_DIR) or s3 (BERTH_S3_*)',
    defaultText: 'directory',
    schema: z.enum(['directory', 's3']).default('directory'),
  },
  snapshotDir: {
    env: 'BERTH_SNAPSHOT_DIR',
    description: 'directory of snapshot archives when BERTH_SNAPSHOT_STORAGE is directory',
    defaultText: '<data dir>/snapshots',
    // Optional here because its default follows BERTH_DATA_DIR; createSnapshotStorage resolves it.
    schema: z.string().min(1).optional(),
  },
  s3Bucket: {
    env: 'BERTH_S3_BUCKET',
    description:
      'bucket of snapshot archives when BERTH_SNAPSHOT_STORAGE is s3 (required then); credentials come from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN or the rest of the AWS SDK default chain (profile, web identity, instance role)',
    schema: z.string().min(1).optional(),
  },
  s3Prefix: {
    env: 'BERTH_S3_PREFIX',
    description: 'put before every snapshot archive key in the bucket, as it is (end it with / for a folder)',
    defaultText: 'snapshots/',
    schema: z.string().min(1).default('snapshots/'),
  },
  s3Endpoint: {
    env: 'BERTH_S3_ENDPOINT',
    description: 'URL of an S3-compatible server (MinIO, Ceph, ...) instead of AWS; buckets are then addressed by path',
    defaultText: 'AWS S3 of BERTH_S3_REGION',
    schema: z.string().url().optional(),
  },
  s3Region: {
    env: 'BERTH_S3_REGION',
    description: 'region of the snapshot bucket (S3-compatible servers mostly accept any)',
    defaultText: 'us-east-1',
    schema: z.string().min(1).default('us-east-1'),
  },
} satisfies Record<string, Setting<unknown>>;

type Settings = typeof SETTINGS;
export type BerthConfig = { [K in keyof Settings]: z.output<Settings[K]['schema']> };

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/**
 * Parses settings from flags (highest), then the environment, then defaults. A bad value
 * stops the process with a message naming the flag and variable.
 */
export function loadConfig(
  env: NodeJS.ProcessEnv = process.env,
  flags: Partial<Record<string, string>> = {},
): BerthConfig {
  const config: Record<string, unknown> = {};
  const problems: string[] = [];
  for (const [key, setting] of Object.entries(SETTINGS) as [keyof Settings, Setting<unknown>][]) {
    const raw = (setting.flag !== undefined ? flags[setting.flag] : undefined) ?? emptyToUndefined(env[setting.env]) ?? setting.fallback?.(env);
    const parsed = setting.schema.safeParse(raw);
    if (parsed.success) {
      config[key] = parsed.data;
    } else {
      const where = setting.flag ? `--${setting.flag} / ${setting.env}` : setting.env;
      problems.push(`${where}: ${parsed.error.issues.map((issue) => issue.message).join('; ')}`);
    }
  }
  if (problems.length > 0) throw new ConfigError(`invalid configuration:\n  ${problems.join('\n  ')}`);
  return config as BerthConfig;
}

function emptyToUndefined(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}

/** Lines for `--help`: flag, variable, default, meaning. */
/** One row per setting (or per setting named in `only`): its flag, its variable, and what it does with its default. */
export function describeSettings(only?: readonly string[]): [flag: string, env: string, description: string][] {
  return Object.values(SETTINGS as Record<string, Setting<unknown>>)
    .filter((setting) => only === undefined || only.includes(setting.env))
    .map((setting) => [
      setting.flag ? `--${setting.flag} <value>` : '',
      setting.env,
      `${setting.description}${setting.defaultText ? ` (default: ${setting.defaultText})` : ''}`,
    ]);
}
