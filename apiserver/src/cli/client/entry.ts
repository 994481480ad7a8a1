import { clientMain } from './main.js';
import { clientHelp } from './usage.js';

// The client commands without the server's modules: `bin/berth.js` comes here for them, so they start fast.
clientMain(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr, stdin: process.stdin, env: process.env }, clientHelp).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`berth: ${(error as Error).stack ?? String(error)}\n`);
    process.exitCode = 1;
  },
);
