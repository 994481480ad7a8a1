/** Usage of the client commands: in `berth --help` beside the others, and `berth agents --help`. Imports nothing heavy. */
export interface ClientHelp {
  usage: [line: string, what: string][];
  about: string;
  /** Options of the command's forms, shown by `berth <command> --help`. */
  options: [flag: string, what: string][];
}

const CONNECTION =
  'The server and key come from --url and --key, else BERTH_URL and BERTH_API_KEY, else the file `berth login` writes ($BERTH_CONFIG, or $XDG_CONFIG_HOME/berth/config.json, default ~/.config/berth/config.json). Colours only on a terminal, and never with NO_COLOR set.';

const COMMON: [string, string][] = [
  ['--url <base url>, --key <API key>', 'the server and key, over BERTH_URL, BERTH_API_KEY and the config file'],
  ['--json', 'JSON instead of text (errors too: {"error": {code, message, details, requestId}, "status"})'],
];

export const CLIENT_HELP: Record<string, ClientHelp> = {
  login: {
    usage: [['berth login --url <base url> --key <key>', 'check an API key against a server and save both for the client commands']],
    about: `Saves the base URL and API key (file mode 0600) after one keyed request proves them. ${CONNECTION}`,
    options: COMMON,
  },
  agents: {
    usage: [
      ['berth agents create --session <id> | --user <id>', 'start an agent; waits until it is ready'],
      ['berth agents list [--session <id>] [--status s]', 'agents across sessions, newest first'],
      ['berth agents get <agent id>', 'one agent'],
      ['berth agents exec <agent id> [--] <code>', "run code (bash by default); output as it comes, the program's exit code"],
      ['berth agents shell <agent id> [-- program args]', 'a terminal in the sandbox (default bash)'],
      ['berth agents files <agent id> ls [path]', 'a directory of the sandbox (default /workspace)'],
      ['berth agents files <agent id> get <path> [local|-]', 'download a file to a local file or stdout (default), streamed'],
      ['berth agents files <agent id> put <local|-> <path>', 'upload a local file or stdin, streamed'],
      ['berth agents files <agent id> rm|mkdir <path>', 'remove a file or directory; make a directory'],
      ['berth agents pause|resume <agent id>', 'pause (checkpoint) or resume; waits until done'],
      ['berth agents terminate <agent id>', 'end the agent; its sandbox and files are deleted'],
    ],
    about: `Sandboxes over the API, with the TypeScript SDK (docs/cli.md). ${CONNECTION}`,
    options: [
      ['create: --compute python|node|go, --timeout 30m, --model m, --instructions text, --definition name, --no-wait', 'the agent\'s fields; --no-wait answers while it is booting'],
      ['list: --limit n, --all', 'page size (1 to 100), or every page'],
      ['exec: --language bash|python|typescript', 'the language (default bash); code - reads the code from stdin'],
      ['exec: --env NAME=value (repeated), --cwd dir, --timeout s, --stdin file|-', 'environment, working directory (under /workspace), limit in seconds, input'],
      ['exec: --background', 'start it as a background process and print its pid'],
      ['shell: --cwd dir', 'the working directory; the terminal follows this one\'s size'],
      ['files put: --parents, --mode 644', 'make missing directories; the permission bits (octal)'],
      ['files rm: --recursive (-r); files mkdir: --parents (-p)', 'a directory with its entries; the directories above it too'],
      ['files ls: --json', 'the API\'s listing: {path, data: [{name, path, type, size, mode, modifiedAt}], omitted}'],
      ['pause, resume: --no-wait', 'answer at once instead of waiting for paused / idle'],
      ...COMMON,
    ],
  },
  run: {
    usage: [['berth run "<task>" [--agent <id>]', 'give a task to an agent and follow its stream']],
    about: `Runs the agent loop on a task and follows its stream: thinking, tool calls and results, the answer and its cost; on a terminal a spinner with the time spent. Without --agent a new agent is started (in the session of --user, default berth-cli, or in --session) and terminated at the end unless --keep. With --json, one JSON object a line for each event, then {"task": …}. Exit code 0 when the task completed, 1 otherwise. ${CONNECTION}`,
    options: [
      ['--agent <agt_…>', 'an existing agent'],
      ['--session <ses_…> | --user <id>', 'where a new agent starts'],
      ['--compute, --model, --timeout', 'a new agent\'s fields'],
      ['--keep', 'do not terminate the new agent at the end'],
      ...COMMON,
    ],
  },
};

/** `berth <command> --help` of a client command. */
export function clientHelp(command: string): string {
  const help = CLIENT_HELP[command]!;
  return [
    'Usage:',
    ...help.usage.map(([line, what]) => `  ${line.padEnd(50)}  ${what}`),
    '',
    'Options:',
    ...help.options.flatMap(([flag, what]) => [`  ${flag}`, `      ${what}`]),
    '',
    help.about,
    '',
  ].join('\n');
}
