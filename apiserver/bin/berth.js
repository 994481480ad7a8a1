#!/usr/bin/env node
// The `berth` command: a file that exists before the build, so `npm ci` links it into node_modules/.bin.
// The commands that only talk to a running Berth over HTTP load the client alone, which starts faster.
const CLIENT_COMMANDS = ['agents', 'run', 'login'];
await import(CLIENT_COMMANDS.includes(process.argv[2]) ? '../dist/cli/client/entry.js' : '../dist/cli/main.js');
