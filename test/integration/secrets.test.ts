import { createHash, createHmac, randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keyIdOf, parseSecretKey } from '../../common/src/index.js';
import { runBerth, startBerth, tempDir, type BerthProcess } from '../helpers/berth.js';
import { eventually, recordingClient, type ApiClient } from '../helpers/http.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { removeDataDir } from '../helpers/runsc.js';

/**
 * Secrets through a real `berth up` with real gVisor sandboxes: stored encrypted, injected into
 * the sandbox environment, never shown. Every response of the file and the process's whole log
 * are searched for the values at the end.
 */
const ORG_VALUE = `org-${randomBytes(18).toString('hex')}`;
const SESSION_VALUE = `ses-${randomBytes(18).toString('hex')}`;
const SAME = `same-${randomBytes(12).toString('hex')}`;
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

const dataDir = tempDir('berth-secrets-');
const responses: string[] = [];
const logs: string[] = [];
let databaseUrl: string;
let db: pg.Pool;
let berth: BerthProcess;
let key: string;
let live: ApiClient;

async function start(env: Record<string, string> = {}) {
  berth = await startBerth({ dataDir, env: { DATABASE_URL: databaseUrl, BERTH_LOG_LEVEL: 'debug', ...env } });
  key ??= berth.liveKey!;
  live = recordingClient(berth.api(key), responses);
}

async function stop() {
  expect(await berth.stop()).toBe(0);
  logs.push(berth.stdout(), berth.stderr());
}

async function idleAgent(sessionId: string, secrets: string[]) {
  const created = await live.post(`/v1/sessions/${sessionId}/agents`, { secrets, timeout: '10m' });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  await eventually(async () => ((await live.get(`/v1/agents/${created.body.id}`)).body.status === 'idle' ? true : undefined), { what: 'agent idle' });
  return created.body.id as string;
}

/** Every path under `dir` (files and directories, not following links) that `keep` accepts. */
function findAll(dir: string, keep: (path: string) => boolean): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .map((entry) => join(entry.parentPath, entry.name))
    .filter(keep);
}

/** The SHA-256 of an environment variable inside the sandbox: checks the value without printing it. */
async function envDigest(agentId: string, name: string): Promise<string> {
  const result = await live.post(`/v1/agents/${agentId}/exec`, { language: 'bash', code: `printf %s "$${name}" | sha256sum | cut -d' ' -f1` });
  expect(result.body.exitCode).toBe(0);
  return result.body.stdout.trim();
}

beforeAll(async () => {
  databaseUrl = await createTestDatabase();
  db = new pg.Pool({ connectionString: databaseUrl });
  await start();
});
afterAll(async () => {
  if (berth.child.exitCode === null) await stop();
  removeDataDir(dataDir);
  await db.end();
});

describe('secrets', () => {
  let sessionId: string;
  let otherSessionId: string;

  it('stores organization secrets and lists their names only', async () => {
    const stored = await live.post('/v1/secrets', { API_TOKEN: ORG_VALUE, SHARED: 'org-shared', SAME_A: SAME, SAME_B: SAME });
    expect(stored.status).toBe(200);
    expect(stored.body).toEqual({ ok: true, count: 4 });
    const listed = await live.get('/v1/secrets');
    expect(listed.body.data.map((secret: { name: string }) => secret.name)).toEqual(['API_TOKEN', 'SAME_A', 'SAME_B', 'SHARED']);
    expect(listed.body.data[0]).toEqual({ name: 'API_TOKEN', createdAt: expect.any(String) });
    // Overwritten, not duplicated.
    expect((await live.post('/v1/secrets', { SHARED: 'org-shared-2' })).body).toEqual({ ok: true, count: 1 });
    expect((await live.get('/v1/secrets')).body.data).toHaveLength(4);
  });

  it('keeps ciphertext, not plaintext, with a new nonce for every value', async () => {
    const { rows } = await db.query<{ name: string; nonce: Buffer; ciphertext: Buffer; key_id: string }>(
      "SELECT name, nonce, ciphertext, key_id FROM secrets WHERE scope = '' ORDER BY name",
    );
    expect(rows).toHaveLength(4);
    for (const row of rows) {
      expect(row.ciphertext.includes(Buffer.from(ORG_VALUE))).toBe(false);
      expect(row.ciphertext.includes(Buffer.from(SAME))).toBe(false);
      expect(row.nonce).toHaveLength(12);
    }
    const [a, b] = rows.filter((row) => row.name.startsWith('SAME_'));
    expect(a!.ciphertext.equals(b!.ciphertext)).toBe(false);
    expect(a!.nonce.equals(b!.nonce)).toBe(false);
    const fileKey = parseSecretKey(readFileSync(join(dataDir, 'secrets.key'), 'utf8'), 'secrets.key');
    expect(rows.every((row) => row.key_id === keyIdOf(fileKey))).toBe(true);
    expect(statSync(join(dataDir, 'secrets.key')).mode & 0o777).toBe(0o600);
  });

  it('stores session secrets apart from the organization', async () => {
    sessionId = (await live.post('/v1/sessions', { userId: 'secret-keeper' })).body.id;
    otherSessionId = (await live.post('/v1/sessions', { userId: 'other' })).body.id;
    expect((await live.post(`/v1/sessions/${sessionId}/secrets`, { API_TOKEN: SESSION_VALUE })).body).toEqual({ ok: true, count: 1 });
    expect((await live.get(`/v1/sessions/${sessionId}/secrets`)).body.data.map((secret: { name: string }) => secret.name)).toEqual(['API_TOKEN']);
    expect((await live.get(`/v1/sessions/${otherSessionId}/secrets`)).body.data).toEqual([]);
  });

  it('injects the named secrets into the sandbox, the session scope winning', async () => {
    const agent = await idleAgent(sessionId, ['API_TOKEN', 'SHARED']);
    expect(await envDigest(agent, 'API_TOKEN')).toBe(sha256(SESSION_VALUE));
    expect(await envDigest(agent, 'SHARED')).toBe(sha256('org-shared-2'));
    expect(await envDigest(agent, 'SAME_A')).toBe(sha256('')); // not asked for
    const other = await idleAgent(otherSessionId, ['API_TOKEN']);
    expect(await envDigest(other, 'API_TOKEN')).toBe(sha256(ORG_VALUE));
    // The agent shows the names it asked for; no resource holds a value.
    expect((await live.get(`/v1/agents/${agent}`)).body.secrets).toEqual(['API_TOKEN', 'SHARED']);
    const { rows } = await db.query('SELECT count(*)::int AS n FROM resources WHERE spec::text LIKE $1 OR spec::text LIKE $2 OR status::text LIKE $1 OR status::text LIKE $2', [`%${ORG_VALUE}%`, `%${SESSION_VALUE}%`]);
    expect(rows[0].n).toBe(0);
    await live.post(`/v1/agents/${other}/terminate`);
  });

  it('pauses into a private archive that names the secrets without their values; resume injects the current values', async () => {
    const agent = await idleAgent(sessionId, ['API_TOKEN']);
    const sandboxDirs = findAll(dataDir, (path) => path.endsWith(agent.replace('_', '-')) || path.endsWith(agent));
    expect(sandboxDirs.length).toBeGreaterThan(0);
    for (const dir of sandboxDirs) expect(statSync(dir).mode & 0o077, dir).toBe(0);

    expect((await live.post(`/v1/agents/${agent}/pause`)).body.status).toBe('paused');
    // The checkpoint kept beside the sandbox until it is resumed (ADR 21) is as private as the rest.
    const kept = findAll(dataDir, (path) => path.includes(`/${agent}/`) && /\/kept-[0-9a-f]+$/.test(path));
    expect(kept).toHaveLength(1);
    expect(statSync(kept[0]!).mode & 0o077).toBe(0);
    // Archived after the pause answered: `ready` once it is stored.
    const snapshot = await eventually(async () => {
      const [current] = (await live.get(`/v1/snapshots?agentId=${agent}`)).body.data;
      return current?.state === 'ready' ? current : undefined;
    });
    const snapshotsDir = join(dataDir, 'snapshots');
    const archives = findAll(snapshotsDir, (path) => path.includes(snapshot.id) && statSync(path).isFile());
    expect(archives).toHaveLength(1);
    // Nothing under the archive root is readable, writable or searchable by others.
    for (const path of [snapshotsDir, ...findAll(snapshotsDir, () => true)]) expect(statSync(path).mode & 0o077, path).toBe(0);

    const unpacked = tempDir('berth-archive-');
    execFileSync('tar', ['--use-compress-program=zstd', '-xf', archives[0]!, '-C', unpacked]);
    const manifest = readFileSync(join(unpacked, 'manifest.json'), 'utf8');
    expect(manifest).toContain('API_TOKEN');
    // The memory image of a native checkpoint holds what the processes held; every other member holds no value.
    for (const file of findAll(unpacked, (path) => statSync(path).isFile() && !path.includes('/checkpoint/'))) {
      expect(readFileSync(file).includes(SESSION_VALUE), file).toBe(false);
    }
    rmSync(unpacked, { recursive: true, force: true });

    const rotated = `rotated-${randomBytes(12).toString('hex')}`;
    await live.post(`/v1/sessions/${sessionId}/secrets`, { API_TOKEN: rotated });
    expect((await live.post(`/v1/agents/${agent}/resume`)).body.status).toBe('idle');
    expect(await envDigest(agent, 'API_TOKEN')).toBe(sha256(rotated));
    await live.post(`/v1/sessions/${sessionId}/secrets`, { API_TOKEN: SESSION_VALUE });
    await live.post(`/v1/agents/${agent}/terminate`);
  });

  it('refuses an agent that names a secret that does not exist, naming it', async () => {
    const refused = await live.post(`/v1/sessions/${sessionId}/agents`, { secrets: ['API_TOKEN', 'NOPE', 'ALSO_MISSING'] });
    expect(refused.status).toBe(422);
    expect(refused.body.error).toMatchObject({ code: 'unprocessable_entity', details: { missing: ['NOPE', 'ALSO_MISSING'], fields: { secrets: [expect.stringContaining('NOPE, ALSO_MISSING')] } } });
  });

  it('refuses bad names and values without quoting a value', async () => {
    for (const [body, field] of [
      [{ '1ABC': ORG_VALUE }, '1ABC'],
      [{ 'has-dash': ORG_VALUE }, 'has-dash'],
      [{ NUMBER: 5 }, 'NUMBER'],
      [{ HUGE: `${ORG_VALUE}${'x'.repeat(70_000)}` }, 'HUGE'],
      [{}, 'body'],
    ] as const) {
      const response = await live.post('/v1/secrets', body);
      expect(response.status, JSON.stringify(field)).toBe(422);
      expect(Object.keys(response.body.error.details.fields).join(' ')).toContain(field);
    }
    const broken = await live.raw('/v1/secrets', { method: 'POST', headers: { 'content-type': 'application/json' }, body: `{"API_TOKEN": "${ORG_VALUE}` });
    expect(broken.status).toBe(422);
  });

  it('deletes secrets; a missing one is 404', async () => {
    expect((await live.raw('/v1/secrets/SAME_B', { method: 'DELETE' })).body).toEqual({ ok: true });
    expect((await live.raw('/v1/secrets/SAME_B', { method: 'DELETE' })).status).toBe(404);
    expect((await live.raw(`/v1/sessions/${sessionId}/secrets/API_TOKEN`, { method: 'DELETE' })).body).toEqual({ ok: true });
    expect((await live.raw(`/v1/sessions/${otherSessionId}/secrets/API_TOKEN`, { method: 'DELETE' })).status).toBe(404);
  });

  it('rotates the key: re-encrypts every value, after which only the new key is needed', async () => {
    // A trigger's signing secret is sealed with the same key, and rotated with the values.
    expect((await live.post('/v1/agent-definitions', { name: 'rotated' })).status).toBe(201);
    const trigger = (await live.post('/v1/triggers', { agent: 'rotated', userId: 'rotation', type: 'webhook' })).body;
    await stop();
    const oldKey = readFileSync(join(dataDir, 'secrets.key'), 'utf8').trim();
    const newKey = randomBytes(32).toString('base64');
    const rotated = await runBerth(['secrets', 'rotate', '--data-dir', dataDir], {
      DATABASE_URL: databaseUrl,
      BERTH_SECRETS_KEY: newKey,
      BERTH_SECRETS_PREVIOUS_KEYS: oldKey,
    });
    expect(rotated.code, rotated.stderr).toBe(0);
    expect(rotated.stdout).toContain('re-encrypted 3 secret values and 1 trigger secret');
    const { rows } = await db.query('SELECT DISTINCT key_id FROM secrets');
    expect(rows).toEqual([{ key_id: keyIdOf(Buffer.from(newKey, 'base64')) }]);
    const { rows: triggerKeys } = await db.query('SELECT DISTINCT secret_key_id FROM triggers');
    expect(triggerKeys).toEqual([{ secret_key_id: keyIdOf(Buffer.from(newKey, 'base64')) }]);

    await start({ BERTH_SECRETS_KEY: newKey });
    const fireBody = '{"after":"rotation"}';
    const fired = await berth.api(undefined).raw(new URL(trigger.url).pathname, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-trigger-signature': createHmac('sha256', trigger.secret).update(fireBody).digest('hex') },
      body: fireBody,
    });
    expect(fired.status, JSON.stringify(fired.body)).toBe(202);
    const agent = await idleAgent(otherSessionId, ['API_TOKEN']);
    expect(await envDigest(agent, 'API_TOKEN')).toBe(sha256(ORG_VALUE));
    await live.post(`/v1/agents/${agent}/terminate`);
  });

  it('never shows a value: not in any response, not in the log', async () => {
    await stop();
    expect(responses.length).toBeGreaterThan(20);
    for (const value of [ORG_VALUE, SESSION_VALUE, SAME]) {
      expect(responses.filter((body) => body.includes(value))).toEqual([]);
      expect(logs.filter((text) => text.includes(value))).toEqual([]);
    }
    expect(logs.join('').length).toBeGreaterThan(1000); // the log was there to search
  });
});
