import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Duplex } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GUEST_DIR, guestSource } from '../guest.js';
import { Connection, backgroundOutput, backgroundProcessSchema } from '../local/channel.js';
import { launcherWatch } from '../local/files.js';
import { BACKGROUND_OUTPUT_BYTES, ProviderError, createLogger } from '@berth/common';
import type { SandboxRef } from '@berth/crds';
import { desiredPod, type PodSettings } from './pod.js';
import { guestConfigMap, launcherCommand } from './launcher.js';

/**
 * The pod's side of ADR 47 on this host, without a pod: the real launcher.py and pod-channel.py,
 * and clients that are the real pod-channel-client.pl with its stdin and stdout as the exec API's.
 */
const log = createLogger({ level: 'silent', name: 'pod-launcher-test' });
let dir: string;
let launcher: ChildProcess;
let broker: ChildProcess;
const env = { ...process.env, BERTH_LAUNCHER_SOCKET: `berth-test-${randomBytes(6).toString('hex')}`, BERTH_POD_CHANNEL: `berth-test-pod-${randomBytes(6).toString('hex')}` };

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'berth-pod-channel-'));
  const channel = join(dir, 'launcher.sock');
  broker = spawn('python3', ['-I', '-S', join(GUEST_DIR, 'pod-channel.py')], { env: { ...env, BERTH_LAUNCHER_CHANNEL: channel }, stdio: 'inherit' });
  launcher = spawn('python3', ['-I', '-S', join(GUEST_DIR, 'launcher.py')], { env: { ...env, BERTH_LAUNCHER_CHANNEL: channel, BERTH_WORKSPACE: dir }, stdio: 'inherit' });
});
afterAll(() => {
  launcher?.kill('SIGKILL');
  broker?.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

/** A client as the provider has one: the relay's stdin and stdout as a `Connection`'s socket. */
async function connect(): Promise<{ connection: Connection; client: ChildProcess }> {
  const client = spawn('perl', ['-e', guestSource('pod-channel-client.pl')], { env, stdio: ['pipe', 'pipe', 'inherit'] });
  const socket = Duplex.from({ readable: client.stdout!, writable: client.stdin! }) as Duplex & { unref(): Duplex };
  socket.unref = () => socket;
  const connection = await new Promise<Connection>((resolve, reject) => {
    new Connection(socket as unknown as Socket, resolve, () => reject(new Error('the client closed before the hello')), log);
  });
  return { connection, client };
}

const program = (code: string, stdin = '') => ({
  argv: ['sh', '-c', guestSource('pod-program.sh'), 'berth-program', 'sh', String(Buffer.byteLength(code)), 'sh'],
  stdin: Buffer.concat([Buffer.from(code), Buffer.from(stdin)]),
});

describe('the launcher behind pod-channel.py', () => {
  it('runs execs of several clients at once, each answered on its own connection', async () => {
    const [a, b] = await Promise.all([connect(), connect()]);
    const run = (connection: Connection, code: string, stdin?: string) =>
      connection.exec({ ...program(code, stdin), env: { WHO: 'x' }, cwd: dir, limitMs: 10_000, maxOutputBytes: 1 << 20, timeoutMs: 15_000 });
    const [first, second] = await Promise.all([run(a.connection, 'sleep 0.3; echo a-$WHO; cat; exit 4', 'in-a'), run(b.connection, 'echo b >&2; pwd')]);
    expect(first).toMatchObject({ kind: 'ended', outcome: { outcome: 'exited', exitCode: 4 }, stdout: 'a-x\nin-a' });
    expect(second).toMatchObject({ kind: 'ended', outcome: { outcome: 'exited', exitCode: 0 }, stdout: `${dir}\n`, stderr: 'b\n' });
    const limited = await a.connection.exec({ ...program('sleep 5'), env: {}, cwd: dir, limitMs: 300, maxOutputBytes: 1024, timeoutMs: 10_000 });
    expect(limited).toMatchObject({ kind: 'ended', outcome: { outcome: 'timedOut' } });
    a.connection.close();
    b.connection.close();
  });

  it('cancels the execs of a client that went away, and keeps background processes for the next client', async () => {
    const a = await connect();
    const marker = join(dir, 'should-not-exist');
    const running = a.connection.exec({ ...program(`sleep 1; touch ${marker}`), env: {}, cwd: dir, limitMs: undefined, maxOutputBytes: 1024, timeoutMs: 10_000 });
    const background = await a.connection.background({ ...program('echo started; sleep 30'), env: {}, cwd: dir, limitMs: undefined, maxOutputBytes: 0 }, 5_000);
    a.client.kill('SIGKILL');
    expect((await running).kind).toBe('lost');
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(existsSync(marker)).toBe(false);

    const b = await connect();
    const listed = (await b.connection.control({ op: 'list' }, 5_000)) as { processes: unknown[] };
    const mine = listed.processes.map((entry) => backgroundProcessSchema.parse(entry)).find((entry) => entry.pid === background.pid);
    expect(mine).toMatchObject({ running: true });
    const output = (await b.connection.control({ op: 'output', pid: background.pid }, 5_000)) as { stdout: string };
    expect(Buffer.from(output.stdout, 'base64').toString()).toBe('started\n');
    await b.connection.control({ op: 'signal', pid: background.pid, signal: 'KILL' }, 5_000);
    const ended = backgroundProcessSchema.parse(await b.connection.control({ op: 'wait', pid: background.pid, timeoutMs: 5_000 }, 10_000));
    expect(ended).toMatchObject({ running: false, outcome: { outcome: 'signaled', signal: 9 } });
    b.connection.close();
  });

  it("passes the answer with a background process's full kept output, larger than a client's frame", async () => {
    const a = await connect();
    const code = 'for i in $(seq 24); do head -c 65536 /dev/zero | tr "\\0" x; head -c 65536 /dev/zero | tr "\\0" y >&2; done';
    const started = await a.connection.background({ ...program(code), env: {}, cwd: dir, limitMs: undefined, maxOutputBytes: 0 }, 5_000);
    await expect(a.connection.control({ op: 'wait', pid: started.pid, timeoutMs: 10_000 }, 15_000)).resolves.toMatchObject({ running: false });
    const output = backgroundOutput(await a.connection.control({ op: 'output', pid: started.pid }, 10_000));
    expect([output.stdout, output.stderr]).toEqual(['x'.repeat(BACKGROUND_OUTPUT_BYTES), 'y'.repeat(BACKGROUND_OUTPUT_BYTES)]);
    expect((await a.connection.control({ op: 'list' }, 5_000)) as object).toHaveProperty('processes');
    a.connection.close();
  });

  it("watches a directory for a client, and ends the launcher's watch when the client goes away", async () => {
    const a = await connect();
    mkdirSync(join(dir, 'watched'));
    let ended = false;
    const watch = await launcherWatch('kubernetes', a.connection, { id: 'agt_pod' } as SandboxRef, join(dir, 'watched'), {}, () => (ended = true));
    const seen: string[] = [];
    const iterated = (async () => {
      for await (const change of watch.changes) seen.push(`${change.type} ${change.name}`);
    })().catch((error: unknown) => error);
    writeFileSync(join(dir, 'watched', 'a.txt'), 'a');
    await until(() => seen.includes('write a.txt'));
    expect(seen).toEqual(['create a.txt', 'write a.txt']);
    const watches = () => readdirSync(`/proc/${launcher.pid}/fd`).filter((fd) => readlinkSafe(`/proc/${launcher.pid}/fd/${fd}`).includes('inotify')).length;
    expect(watches()).toBe(1);
    // The exec ended: pod-channel.py sends the launcher CANCEL of the watch's id.
    a.client.kill('SIGKILL');
    expect(await iterated).toBeInstanceOf(ProviderError);
    expect(ended).toBe(true);
    await until(() => watches() === 0);
  });

  it("follows a background process's output on a connection of its own, and its stdin after the program, kept open, takes input", async () => {
    const a = await connect();
    const started = await a.connection.background(
      { ...program('echo ready; read line; echo "got $line"; echo warn >&2; cat'), env: {}, cwd: dir, limitMs: undefined, maxOutputBytes: 0, keepStdin: true },
      5_000,
    );
    const follower = await connect();
    // Each stream's chunks in order; the order between the two pipes is the reader's, not the program's.
    const output: Record<string, string> = { stdout: '', stderr: '' };
    const onOutput = (stream: string, chunk: Buffer) => {
      output[stream] += chunk.toString();
    };
    const follow = await follower.connection.follow(started.pid, { from: { stdout: 0, stderr: 0 }, onOutput }, 5_000);
    await a.connection.backgroundInput(started.pid, Buffer.from('one\ntwo'), 5_000);
    await a.connection.closeBackgroundInput(started.pid, 5_000);
    await expect(follow.ended).resolves.toMatchObject({ status: 'exited', exitCode: 0 });
    expect(output).toEqual({ stdout: 'ready\ngot one\ntwo', stderr: 'warn\n' });
    a.connection.close();
    follower.connection.close();
  });

  it('ends a follow when its client goes away (pod-channel.py cancels it); the process runs on', async () => {
    const a = await connect();
    const started = await a.connection.background({ ...program('sleep 30'), env: {}, cwd: dir, limitMs: undefined, maxOutputBytes: 0 }, 5_000);
    const follower = await connect();
    const follow = await follower.connection.follow(started.pid, { onOutput: () => undefined }, 5_000);
    follower.client.kill('SIGKILL');
    await expect(follow.ended).rejects.toThrow(/went away/);
    expect(backgroundProcessSchema.parse(await a.connection.control({ op: 'wait', pid: started.pid, timeoutMs: 300 }, 5_000))).toMatchObject({ running: true });
    await a.connection.control({ op: 'signal', pid: started.pid, signal: 'KILL' }, 5_000);
    a.connection.close();
  });
});

function readlinkSafe(path: string): string {
  try {
    return readlinkSync(path);
  } catch {
    return '';
  }
}

async function until(condition: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

describe('a pod that has just started', () => {
  it('keeps the frames of a client that came before the launcher connected, and runs them once it does', async () => {
    const late = { ...env, BERTH_LAUNCHER_SOCKET: `${env.BERTH_LAUNCHER_SOCKET}-late`, BERTH_POD_CHANNEL: `${env.BERTH_POD_CHANNEL}-late` };
    const channel = join(dir, 'late.sock');
    const lateBroker = spawn('python3', ['-I', '-S', join(GUEST_DIR, 'pod-channel.py')], { env: { ...late, BERTH_LAUNCHER_CHANNEL: channel }, stdio: 'inherit' });
    let lateLauncher: ChildProcess | undefined;
    try {
      const client = spawn('perl', ['-e', guestSource('pod-channel-client.pl')], { env: late, stdio: ['pipe', 'pipe', 'inherit'] });
      const socket = Duplex.from({ readable: client.stdout!, writable: client.stdin! }) as Duplex & { unref(): Duplex };
      socket.unref = () => socket;
      let hello = false;
      const connection = new Connection(socket as unknown as Socket, () => (hello = true), () => undefined, log);
      // Sent before anything answers, as the provider sends an exec before the launcher's hello.
      const result = connection.exec({ ...program('echo early'), env: {}, cwd: dir, limitMs: 10_000, maxOutputBytes: 1024, timeoutMs: 15_000 });
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(hello).toBe(false);
      lateLauncher = spawn('python3', ['-I', '-S', join(GUEST_DIR, 'launcher.py')], { env: { ...late, BERTH_LAUNCHER_CHANNEL: channel }, stdio: 'inherit' });
      expect(await result).toMatchObject({ kind: 'ended', outcome: { outcome: 'exited', exitCode: 0 }, stdout: 'early\n' });
      expect(hello).toBe(true);
      connection.close();
    } finally {
      lateLauncher?.kill('SIGKILL');
      lateBroker.kill('SIGKILL');
    }
  });
});

describe('the sandbox pod with the launcher', () => {
  it('runs the launcher from the guest ConfigMap, named by the hash of the programs', () => {
    const configMap = guestConfigMap('sandboxes');
    expect(configMap.metadata?.name).toMatch(/^berth-guest-[0-9a-f]{12}$/);
    expect(configMap.immutable).toBe(true);
    expect(configMap.data?.['launcher.py']).toBe(guestSource('launcher.py'));
    const settings: PodSettings = {
      namespace: 'sandboxes',
      images: { python: 'py:1', node: 'node:1', go: 'go:1' },
      cpuLimit: 1,
      cpuRequest: 0.5,
      memoryLimitBytes: 1 << 30,
      memoryRequestBytes: 1 << 29,
      workspaceSizeBytes: 1 << 30,
      gpuTable: {},
    };
    const pod = desiredPod({ name: 'agt-1', sessionName: 'ses-1', compute: 'python', browser: false, timeoutSeconds: 60, guestConfigMap: configMap.metadata!.name! }, settings);
    const container = pod.spec!.containers[0]!;
    expect(container.command).toEqual(launcherCommand());
    expect(container.volumeMounts).toContainEqual({ name: 'guest', mountPath: '/run/berth/guest', readOnly: true });
    expect(pod.spec!.volumes).toContainEqual({ name: 'guest', configMap: { name: configMap.metadata!.name, defaultMode: 0o444 } });
    const without = desiredPod({ name: 'agt-1', sessionName: 'ses-1', compute: 'python', browser: false, timeoutSeconds: 60 }, settings);
    expect(without.spec!.containers[0]!.command).toBeUndefined();
  });
});
