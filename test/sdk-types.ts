/**
 * `make sdk-types`: regenerates sdk/src/generated/openapi.ts from the API's OpenAPI document,
 * built from the route table as `berth up` serves it at /v1/openapi.json (the server URL aside,
 * which the types do not use). `--check` exits 1 when the checked-in file is stale; the SDK's
 * integration test checks it against the document a real server serves.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { API_VERSION } from '../apiserver/src/app.js';
import { openapiDocument } from '../apiserver/src/http/openapi.js';
import { routeTableApp } from '../apiserver/src/http/route-table-app.js';
import { GENERATED_FILE, generateTypes } from '../sdk/scripts/generate-types.mjs';

const app = routeTableApp();
try {
  const text = generateTypes(openapiDocument(app.routes, { version: API_VERSION }));
  if (process.argv.includes('--check')) {
    if (readFileSync(GENERATED_FILE, 'utf8') !== text) {
      process.stderr.write(`${GENERATED_FILE} is stale: run make sdk-types\n`);
      process.exitCode = 1;
    } else process.stdout.write('sdk types match the API\'s document\n');
  } else {
    writeFileSync(GENERATED_FILE, text);
    process.stdout.write(`wrote ${GENERATED_FILE}\n`);
  }
} finally {
  await app.close();
}
