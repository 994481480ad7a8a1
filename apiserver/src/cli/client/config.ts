import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { UsageError } from './output.js';

/** What the client commands need to reach a Berth: its base URL and an API key. */
export interface Connection {
  url: string;
  apiKey: string;
  /** Where each came from, for `berth login --show` and error messages. */
  source: { url: string; apiKey: string };
}

interface StoredConfig {
  url?: string;
  apiKey?: string;
}

/** `$BERTH_CONFIG`, else `$XDG_CONFIG_HOME/berth/config.json`, else `~/.config/berth/config.json`. */
export function configPath(env: NodeJS.ProcessEnv): string {
  if (env.BERTH_CONFIG) return env.BERTH_CONFIG;
  return join(env.XDG_CONFIG_HOME || join(homedir(), '.config'), 'berth', 'config.json');
}

function readStored(path: string): StoredConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw error;
  }
  try {
    const parsed = JSON.parse(text) as StoredConfig;
    if (typeof parsed !== 'object' || parsed === null) throw new Error('not an object');
    return parsed;
  } catch (error) {
    throw new UsageError(`${path} is not a JSON object (${(error as Error).message}); run berth login again`);
  }
}

/** The connection: flags (`--url`, `--key`) win over BERTH_URL / BERTH_API_KEY, which win over the config file. */
export function resolveConnection(flags: { url?: string | undefined; key?: string | undefined }, env: NodeJS.ProcessEnv): Connection {
  const path = configPath(env);
  const stored = readStored(path);
  const pick = (flag: string | undefined, variable: string, fromFile: string | undefined): [string | undefined, string] =>
    flag ? [flag, 'flag'] : env[variable] ? [env[variable], variable] : fromFile ? [fromFile, path] : [undefined, ''];
  const [url, urlSource] = pick(flags.url, 'BERTH_URL', stored.url);
  const [apiKey, keySource] = pick(flags.key, 'BERTH_API_KEY', stored.apiKey);
  if (!url || !apiKey) {
    throw new UsageError(`no ${!url ? 'Berth URL' : 'API key'}: run berth login --url <url> --key <key>, or set BERTH_URL and BERTH_API_KEY`);
  }
  return { url, apiKey, source: { url: urlSource, apiKey: keySource } };
}

/** Writes the config file, readable by its owner only (it holds a key). */
export function writeConfig(env: NodeJS.ProcessEnv, config: { url: string; apiKey: string }): string {
  const path = configPath(env);
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  writeFileSync(path, `${JSON.stringify({ url: config.url, apiKey: config.apiKey }, null, 2)}\n`, { mode: 0o600 });
  chmodSync(path, 0o600);
  return path;
}
