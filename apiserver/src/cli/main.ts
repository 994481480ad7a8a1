#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { ConfigError, SETTINGS, createLogger, loadConfig } from '@berth/common';
import { API_VERSION } from '../app.js';
import { openDatabase } from './database.js';
import { COMMANDS, commandHelp, mainHelp } from './help.js';
import { imagesCommand } from './images.js';
import { CliError, keysCommand } from './keys.js';
import { up } from './up.js';
import { managementSettings } from './parts.js';


const settingFlags = Object.fromEntries(
  Object.values(SETTINGS as Record<string, { flag?: string }>)
    .filter((setting) => setting.flag !== undefined)
    .map((setting) => [setting.flag!, { type: 'string' as const }]),
);

/** Commands that reach a running Berth over its API with the SDK (cli/client); `bin/berth.js` sends them there directly. */
const CLIENT_COMMANDS = new Set(['agents', 'run', 'login']);

async function main(argv: string[]): Promise<number> {
  if (CLIENT_COMMANDS.has(argv[0] ?? '')) {
    const [{ clientMain }, { clientHelp }] = await Promise.all([import('./client/main.js'), import('./client/usage.js')]);
    return clientMain(argv, { stdout: process.stdout, stderr: process.stderr, stdin: process.stdin, env: process.env }, clientHelp);
  }
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
  if (values.version || command === 'version') {
    out(API_VERSION);
    return 0;
  }
  const helpFor = command === 'help' ? action : values.help ? command : undefined;
  if (helpFor !== undefined) {
    if (!(helpFor in COMMANDS)) throw new CliError(`unknown command ${helpFor}; see berth --help`);
    process.stdout.write(commandHelp(helpFor));
    return 0;
  }
  if (values.help || command === 'help' || command === undefined) {
    process.stdout.write(mainHelp(API_VERSION));
    return command === undefined && !values.help ? 2 : 0;
  }
  const flags = Object.fromEntries(Object.entries(values).filter(([, value]) => typeof value === 'string')) as Record<string, string>;
  const config = loadConfig(process.env, flags);
  const log = createLogger({ level: config.logLevel, name: 'berth' });
  // Settings that only make sense together are checked before anything starts.
  if (command === 'up' || command === 'apiserver') managementSettings(config);
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
      case 'admin': {
        if (action !== 'login') throw new CliError('usage: berth admin login');
        const { adminLoginCommand } = await import('./admin.js');
        const database = await openDatabase(config, log, { shareRunning: true });
        try {
          await adminLoginCommand(database.pool, config, out);
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
      case 'node': {
        if (action !== undefined) throw new CliError(`berth node takes no arguments (got ${action})`);
        const { nodeCommand } = await import('./node.js');
        await nodeCommand(config, log, out);
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
