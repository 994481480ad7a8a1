import { describeSettings } from '@berth/common';
import { CLIENT_HELP } from './client/usage.js';

const DATABASE = ['DATABASE_URL', 'BERTH_DATA_DIR', 'BERTH_LOG_LEVEL'];

interface CommandHelp {
  /** Usage lines, each `berth …`, and what the line does. */
  usage: [line: string, what: string][];
  /** What the command is for, in a few sentences. */
  about: string;
  /** The settings it reads: all of them, or the variables named. */
  settings: 'all' | readonly string[];
}

/** Every command: `berth --help` lists them, `berth <command> --help` shows one. */
export const COMMANDS: Record<string, CommandHelp> = {
  up: {
    usage: [['berth up [settings]', 'run Berth on this machine (embedded mode)']],
    about:
      'Runs the API server, the operator and gVisor sandboxes in one process, with an embedded PostgreSQL in the data directory unless DATABASE_URL is set. Prints the base URL and, on the first start, one live and one test API key. Stops in order on SIGTERM or Ctrl-C.',
    settings: 'all',
  },
  apiserver: {
    usage: [['berth apiserver [settings]', 'cluster mode: the HTTP API']],
    about: 'Serves the HTTP API and writes custom resources. Needs DATABASE_URL and Kubernetes credentials (KUBECONFIG or in-cluster).',
    settings: 'all',
  },
  operator: {
    usage: [['berth operator [settings]', 'cluster mode: the controllers']],
    about: 'Runs the controllers with leader election, the runners, the billing pass and the webhook sender, with /healthz, /readyz and /metrics on --metrics-port.',
    settings: 'all',
  },
  node: {
    usage: [['berth node [settings]', 'cluster mode: the node agent (a DaemonSet) that checkpoints and restores pods natively']],
    about:
      "Runs on each gVisor node, on the host network: checkpoints a pod's sandbox with runsc through the runsc shim's state directory and streams the archive to the operator, and stages archives for new pods, which its runsc wrapper (installed as <state dir>/bin/runsc) restores instead of starting. Requires BERTH_NODE_AGENT_PORT and BERTH_NODE_AGENT_TOKEN; never talks to the Kubernetes API.",
    settings: ['BERTH_HOST', 'BERTH_NODE_AGENT_PORT', 'BERTH_NODE_AGENT_TOKEN', 'BERTH_NODE_NAME', 'BERTH_NODE_RUNSC_ROOT', 'BERTH_NODE_STATE_DIR', 'BERTH_RUNSC', 'BERTH_LOG_LEVEL'],
  },
  runner: {
    usage: [['berth runner [settings]', 'runner workers only']],
    about: 'Runs agent-loop workers beside a berth up that shares their DATABASE_URL and --data-dir.',
    settings: 'all',
  },
  keys: {
    usage: [
      ['berth keys create [--mode live|test] [--label text]', 'create an API key (shown once)'],
      ['berth keys list', 'list keys (prefixes only)'],
      ['berth keys revoke <key id or prefix>', 'revoke a key; requests with it get auth/key_revoked'],
    ],
    about: 'Manages API keys in the database, whether or not berth up is running.',
    settings: DATABASE,
  },
  admin: {
    usage: [['berth admin login', "print a one-time sign-in link for the organization's owner (the first owner, in embedded mode)"]],
    about:
      "Prints a link that signs a browser in to the management plane (/api) once, within 24 hours, as the owner of the install's first organization; if it has no owner yet, a local owner is created for it. For single-user and development installs without an identity provider.",
    settings: [...DATABASE, 'BERTH_PUBLIC_URL', 'BERTH_DASHBOARD_URL', 'BERTH_HOST', 'BERTH_PORT'],
  },
  secrets: {
    usage: [['berth secrets rotate', 're-encrypt every secret under BERTH_SECRETS_KEY']],
    about: 'Re-encrypts every stored secret under the current key. Keep the old key in BERTH_SECRETS_PREVIOUS_KEYS until it is done.',
    settings: [...DATABASE, 'BERTH_SECRETS_KEY', 'BERTH_SECRETS_PREVIOUS_KEYS'],
  },
  images: {
    usage: [
      ['berth images build [python] [node] [go] [browser]', 'build local sandbox images ahead of first use (default: python node go)'],
      ['berth images list', 'show which images are built'],
    ],
    about: 'Builds the root filesystems of the local sandbox images with mmdebstrap, or lists them.',
    settings: ['BERTH_IMAGE_DIR', 'BERTH_LOG_LEVEL'],
  },
  // The commands that use a running Berth over its API (cli/client).
  ...Object.fromEntries(Object.entries(CLIENT_HELP).map(([name, help]) => [name, { usage: help.usage, about: help.about, settings: [] }])),
  help: {
    usage: [['berth help [command] | berth [command] --help', 'this text, or one command\'s']],
    about: 'Shows every command and setting, or one command with the settings it reads.',
    settings: [],
  },
  version: {
    usage: [['berth version | berth --version', 'the version']],
    about: 'Prints the version of Berth.',
    settings: [],
  },
};

const WIDTH = 100;

/** Rows as aligned columns: every column as wide as its widest cell, the last one wrapped under itself. */
export function columns(rows: string[][], indent = 2): string[] {
  const widths = rows[0]!.slice(0, -1).map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  const lead = indent + widths.reduce((sum, width) => sum + width + 2, 0);
  return rows.flatMap((row) => {
    const cells = row.slice(0, -1).map((cell, column) => cell.padEnd(widths[column]! + 2)).join('');
    const [first, ...more] = wrap(row.at(-1)!, Math.max(WIDTH - lead, 30));
    return [`${' '.repeat(indent)}${cells}${first ?? ''}`.trimEnd(), ...more.map((line) => `${' '.repeat(lead)}${line}`)];
  });
}

function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/)) {
    if (line && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else {
      line = line ? `${line} ${word}` : word;
    }
  }
  return [...lines, line];
}

function settingsOf(help: CommandHelp): string[] {
  const rows = describeSettings(help.settings === 'all' ? undefined : help.settings);
  return rows.length ? ['', 'Settings (a flag wins over its environment variable):', ...columns(rows)] : [];
}

export function mainHelp(version: string): string {
  const usage = Object.values(COMMANDS).flatMap((command) => command.usage);
  return [
    `berth ${version}: sandboxed compute for AI agents`,
    '',
    'Usage:',
    ...columns(usage),
    '',
    '`berth <command> --help` shows one command and the settings it reads.',
    ...settingsOf({ usage: [], about: '', settings: 'all' }),
    '',
    'Examples:',
    '  npx berth up --port 8080 --data-dir ./berth-data',
    '  BERTH_PORT=9000 npx berth up',
    '  npx berth keys create --mode test --label ci',
    '  npx berth login --url http://127.0.0.1:8080 --key svc_live_…',
    '  npx berth agents exec agt_01m80… --language python "print(6 * 7)"',
    '',
  ].join('\n');
}

export function commandHelp(name: string): string {
  const help = COMMANDS[name]!;
  return ['Usage:', ...columns(help.usage), '', ...wrap(help.about, WIDTH), ...settingsOf(help), ''].join('\n');
}
