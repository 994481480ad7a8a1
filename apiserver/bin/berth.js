#!/usr/bin/env node
// The `berth` command: a file that exists before the build, so `npm ci` links it into node_modules/.bin.
import "../dist/cli/main.js";
