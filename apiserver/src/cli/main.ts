#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { ConfigError, SETTINGS, createLogger, describeSettings, loadConfig } from '@berth/common';
import { API_VERSION } from '../app.js';
import { openDatabase } from './database.js';
import { imagesCommand } from './images.js';
import { CliError, keysCommand } from './keys.js';
import { up } from './up.js';

const HELP = `berth ${API_VERSION}: sandboxed compute for AI agents

Usage:
  berth up [settings]                      run Berth on this machine (embedded mode): API server,
                                           operator and gVisor sandboxes in one process, with an
                                           embedded PostgreSQL unless DATABASE_URL is set
  berth apiserver [settings]               cluster mode: the HTTP API, writing custom resources
                                           (DATABASE_URL required; KUBECONFIG or in-cluster credentials)
  berth operator [settings]                cluster mode: the controllers, with leader election, and
                                           /healthz, /readyz, /metrics on --metrics-port
  berth runner [settings]                  runner workers only, beside a berth up that shares their
                                           DATABASE_URL and --data-dir
  berth keys create [--mode live|test] [--label text]
                                           create an API key (shown once)
  berth keys list                          list keys (prefixes only)
  berth keys revoke <key id or prefix>     revoke a key; requests with it get auth/key_revoked
  berth secrets rotate                     re-encrypt every secret under BERTH_SECRETS_KEY (the old
                                           key in BERTH_SECRETS_PREVIOUS_KEYS until it is done)
  berth images build [python] [node] [go] [browser]
                                           build local sandbox images ahead of first use
                                           (default: python node go)
  berth images list                        show which images are built
  berth help | --help                      this text
  berth version | --version                the version

Settings (a flag wins over its environment variable):
${describeSettings().join('\n')}

Examples:
  npx berth up --port 8080 --data-dir ./berth-data
  BERTH_PORT=9000 npx berth up
  npx berth keys create --mode test --label ci
`;

const settingFlags = Object.fromEntries(
  Object.values(SETTINGS as Record<string, { flag?: string }>)
    .filter((setting) => setting.flag !== undefined)
    .map((setting) => [setting.flag!, { type: 'string' as const }]),
);

async function main(argv: string[]): Promise<number> {
  const out = (line: string) => process.stdout.write(`${line}\n`);
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      ...settingFlags,
      help: { type: 'boolean', short: 'h' },
      version: { type: 'boolean' },
      mode: { type: 'string' },
      label: { type: 'string' },
    },
  });
  const [command, action, ...rest] = positionals;
  if (values.help || command === 'help' || command === undefined) {
    process.stdout.write(HELP);
    return command === undefined && !values.help ? 2 : 0;
  }
  if (values.version || command === 'version') {
    out(API_VERSION);
    return 0;
  }
  const flags = Object.fromEntries(Object.entries(values).filter(([, value]) => typeof value === 'string')) as Record<string, string>;
  const config = loadConfig(process.env, flags);
  const log = createLogger({ level: config.logLevel, name: 'berth' });
  try {
    switch (command) {
      case 'up':
        if (action !== undefined) throw new CliError(`berth up takes no arguments (got ${action})`);
        await up(config, log, out);
        return 0;
      case 'apiserver':
      case 'operator': {
        if (action !== undefined) throw new CliError(`berth ${command} takes no arguments (got ${action})`);
        // Loaded only here: embedded mode never needs the Kubernetes client.
        const cluster = await import('./cluster.js');
        await (command === 'apiserver' ? cluster.apiserverCommand : cluster.operatorCommand)(config, log, out);
        return 0;
      }
      case 'keys': {
        const database = await openDatabase(config, log, { shareRunning: true });
        try {
          await keysCommand(database.pool, { action, target: rest[0], mode: values.mode, label: values.label }, out);
        } finally {
          await database.close();
        }
        return 0;
      }
      case 'secrets': {
        const { loadSecretBox, secretsCommand } = await import('./secrets.js');
        const box = await loadSecretBox(config, { generate: true });
        const database = await openDatabase(config, log, { shareRunning: true });
        try {
          await secretsCommand(database.pool, box, action, out);
        } finally {
          await database.close();
        }
        return 0;
      }
      case 'runner': {
        if (action !== undefined) throw new CliError(`berth runner takes no arguments (got ${action})`);
        const { runnerCommand } = await import('./runner.js');
        await runnerCommand(config, log, out);
        return 0;
      }
      case 'images':
        await imagesCommand(config, log, { action, names: rest }, out);
        return 0;
      default:
        throw new CliError(`unknown command ${command}; see berth --help`);
    }
  } finally {
    log.flush();
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    const known = error instanceof CliError || error instanceof ConfigError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS');
    process.stderr.write(`berth: ${known ? (error as Error).message : (error as Error).stack ?? String(error)}\n`);
    process.exitCode = known ? 2 : 1;
  },
);
