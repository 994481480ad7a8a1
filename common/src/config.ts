import { homedir } from 'node:os';
import { join } from 'node:path';
import { modelSchema, parseDuration } from '@berth/crds';
import { z } from 'zod';

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
}

const xdg = (variable: string, fallback: string) => process.env[variable] || join(homedir(), fallback);
const isRoot = process.getuid?.() === 0;
/** Root runs Berth as a system service would keep its state; other users keep it in their home. */
const DEFAULT_DATA_DIR = isRoot ? '/var/lib/berth' : join(xdg('XDG_DATA_HOME', '.local/share'), 'berth');
const DEFAULT_IMAGE_DIR = isRoot ? '/var/cache/berth/images' : join(xdg('XDG_CACHE_HOME', '.cache'), 'berth', 'images');

function byteSize(text: string): number | undefined {
  const match = /^(\d+)(Ki|Mi|Gi)?$/.exec(text);
  if (!match) return undefined;
  const factor = { Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3 }[match[2] ?? ''] ?? 1;
  return Number(match[1]) * factor;
}

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
    schema: z.string().min(1).default(DEFAULT_DATA_DIR),
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
    schema: z.string().min(1).default(DEFAULT_IMAGE_DIR),
  },
  sandboxNetwork: {
    env: 'BERTH_SANDBOX_NETWORK',
    description: 'network of local sandboxes: none (isolated) or host (shares the host network; development only)',
    defaultText: 'none',
    schema: z.enum(['none', 'host']).default('none'),
  },
  sandboxCpus: {
    env: 'BERTH_SANDBOX_CPUS',
    description: 'CPU limit of each local sandbox, in cores',
    defaultText: '1',
    schema: z.coerce.number().positive().max(256).default(1),
  },
  sandboxMemory: {
    env: 'BERTH_SANDBOX_MEMORY',
    description: 'memory limit of each local sandbox (bytes, or with Ki, Mi, Gi)',
    defaultText: '1Gi',
    schema: z
      .string()
      .default('1Gi')
      .transform((text, ctx) => {
        const bytes = byteSize(text);
        if (bytes === undefined || bytes < 64 * 1024 ** 2) {
          ctx.addIssue({ code: 'custom', message: `"${text}" is not a memory size of at least 64Mi` });
          return z.NEVER;
        }
        return bytes;
      }),
  },
  browserImage: {
    env: 'BERTH_BROWSER_IMAGE',
    description: 'local sandbox image with a browser; agents with browser: true are refused while unset',
    schema: z.string().min(1).optional(),
  },
  defaultProvider: {
    env: 'BERTH_DEFAULT_PROVIDER',
    description: 'provider of agents that name none',
    defaultText: 'local',
    schema: z.enum(['local']).default('local'),
  },
  defaultModel: {
    env: 'BERTH_DEFAULT_MODEL',
    description: 'model (<vendor>/<model>) of agents that name none',
    defaultText: 'openai/gpt-4o-mini',
    schema: modelSchema.default('openai/gpt-4o-mini'),
  },
  execTimeout: {
    env: 'BERTH_EXEC_TIMEOUT',
    description: 'longest synchronous exec before it is killed and answered with 504 timeout',
    defaultText: '120s',
    schema: durationMs('120s'),
  },
  controllerWorkers: {
    env: 'BERTH_CONTROLLER_WORKERS',
    description: 'agents reconciled at once',
    defaultText: '4',
    schema: z.coerce.number().int().min(1).max(64).default(4),
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
    const raw = (setting.flag !== undefined ? flags[setting.flag] : undefined) ?? emptyToUndefined(env[setting.env]);
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
export function describeSettings(): string[] {
  return Object.values(SETTINGS as Record<string, Setting<unknown>>).map((setting) => {
    const name = setting.flag ? `--${setting.flag} <value>` : '';
    const fallback = setting.defaultText ? ` (default: ${setting.defaultText})` : '';
    return `  ${name.padEnd(26)}${setting.env.padEnd(26)}${setting.description}${fallback}`;
  });
}
