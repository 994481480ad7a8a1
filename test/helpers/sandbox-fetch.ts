import { expect } from 'vitest';
import type { ApiClient } from './http.js';

/**
 * Runs python's urllib in the agent's sandbox (it reads the proxy variables and SSL_CERT_FILE as
 * any client there would): `status body` for an answer, `http <status> <body>` for an HTTP
 * error, `error <what>` for anything else (a refused tunnel's 403 among them). `cafile`: trust
 * only that CA file in the sandbox instead of the default bundle.
 */
export async function fetchInSandbox(api: ApiClient, agentId: string, url: string, cafile?: string): Promise<string> {
  const context = cafile ? `ssl.create_default_context(cafile=${JSON.stringify(cafile)})` : 'None';
  const code = [
    'import ssl, urllib.request, urllib.error',
    'try:',
    `    with urllib.request.urlopen(${JSON.stringify(url)}, timeout=20, context=${context}) as answer:`,
    "        print(answer.status, answer.read().decode().strip())",
    'except urllib.error.HTTPError as error:',
    "    print('http', error.code, error.read().decode().strip())",
    'except Exception as error:',
    "    print('error', error)",
  ].join('\n');
  const result = await api.post(`/v1/agents/${agentId}/exec`, { language: 'python', code });
  expect(result.status, JSON.stringify(result.body)).toBe(200);
  return (result.body.stdout as string).trim();
}
