import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, renameSync, rmSync as removeSync, writeFileSync } from 'node:fs';
import { connect, createServer, type Socket } from 'node:net';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError, BACKGROUND_OUTPUT_BYTES, ProviderError, SandboxFileError, silentLogger, type FileChange } from '@berth/common';
import { GUEST_DIR } from '../guest.js';
import {
  backgroundOutput,
  encodeFrame,
  FRAME_HEADER_BYTES,
  FrameError,
  FrameKind,
  FrameReader,
  LauncherChannels,
  MAX_RECEIVED_FRAME_BYTES,
  parseChannelOutcome,
  PROTOCOL_WITH_ADR_50,
  StreamRefusedError,
  STREAM_WINDOW_BYTES,
  DATA_CHUNK_BYTES,
  type ChannelExecRequest,
} from './channel.js';
import { launcherArgs } from './launcher.js';
import { launcherFiles } from './files.js';

describe('frames', () => {
  it('have a 9-byte header: payload length, exec id and kind, big-endian', () => {
    expect(encodeFrame(258, FrameKind.stdout, Buffer.from('hi'))).toEqual(Buffer.from([0, 0, 0, 2, 0, 0, 1, 2, 3, 0x68, 0x69]));
    expect(encodeFrame(1, FrameKind.cancel).length).toBe(FRAME_HEADER_BYTES);
  });

  it('are read whole whatever the chunks they arrive in', () => {
    const stream = Buffer.concat([
      encodeFrame(1, FrameKind.stdout, Buffer.from('out')),
      encodeFrame(1, FrameKind.outcome, Buffer.from('{"outcome": "exited", "exitCode": 0, "dropped": [0, 0]}')),
      encodeFrame(0, FrameKind.hello),
    ]);
    for (const size of [1, 2, 7, 9, 10, stream.length]) {
      const reader = new FrameReader();
      const frames = [];
      for (let offset = 0; offset < stream.length; offset += size) frames.push(...reader.push(stream.subarray(offset, offset + size)));
      expect(frames.map(({ id, kind, payload }) => [id, kind, payload.toString()])).toEqual([
        [1, FrameKind.stdout, 'out'],
        [1, FrameKind.outcome, '{"outcome": "exited", "exitCode": 0, "dropped": [0, 0]}'],
        [0, FrameKind.hello, ''],
      ]);
    }
  });

  it('larger than the limit are refused before they are buffered', () => {
    const header = Buffer.alloc(FRAME_HEADER_BYTES);
    header.writeUInt32BE(MAX_RECEIVED_FRAME_BYTES + 1, 0);
    expect(() => new FrameReader().push(header)).toThrow(FrameError);
  });

  it("carry the launcher's outcome with what it dropped, and nothing else as one", () => {
    expect(parseChannelOutcome(Buffer.from('{"outcome": "exited", "exitCode": 124, "dropped": [0, 5]}'))).toEqual({
      outcome: { outcome: 'exited', exitCode: 124 },
      dropped: [0, 5],
    });
    expect(parseChannelOutcome(Buffer.from('{"outcome": "exited", "exitCode": 124}'))).toBeUndefined();
    expect(parseChannelOutcome(Buffer.from('{"outcome": "gone", "dropped": [0, 0]}'))).toBeUndefined();
    expect(parseChannelOutcome(Buffer.from('124'))).toBeUndefined();
  });
});

describe('the channel with a launcher on this host', () => {
  // Outside gVisor the launcher is an ordinary process; its abstract socket is this host's, so it
  // gets a name of its own, and the channel a directory of its own.
  const dir = mkdtempSync(join(tmpdir(), 'berth-channel-'));
  const socketPath = join(dir, 'launcher.sock');
  const workspace = join(dir, 'workspace');
  mkdirSync(workspace);
  const channels = new LauncherChannels(silentLogger);
  let launcher: ChildProcess | undefined;

  const startLauncher = () => {
    const [bash, flag, command] = launcherArgs();
    launcher = spawn(bash!, [flag!, command!, `${GUEST_DIR}/launcher.py`], {
      stdio: 'ignore',
      env: { ...process.env, BERTH_LAUNCHER_SOCKET: `berth-channel-test-${process.pid}`, BERTH_LAUNCHER_CHANNEL: socketPath, BERTH_WORKSPACE: workspace, GREETING: 'from the sandbox' },
    });
  };
  const stopLauncher = async () => {
    const ended = new Promise((resolve) => launcher?.once('exit', resolve));
    launcher?.kill('SIGKILL'); // it ignores the signals that would end it, as PID 1 must
    await ended;
  };

  beforeAll(async () => {
    await channels.listen('agt_a', socketPath);
    startLauncher();
    expect(await channels.awaitLauncher('agt_a', 10_000)).toBe(true);
  });
  afterAll(async () => {
    await stopLauncher();
    await channels.closeAll();
    rmSync(dir, { recursive: true, force: true });
  });

  const request = (argv: string[], more: Partial<ChannelExecRequest> = {}): ChannelExecRequest => ({
    argv,
    env: {},
    cwd: dir,
    limitMs: 10_000,
    maxOutputBytes: 1024 * 1024,
    timeoutMs: 15_000,
    ...more,
  });
  const exec = (argv: string[], more: Partial<ChannelExecRequest> = {}) => channels.exec('agt_a', request(argv, more))!;

  it("runs a program in the exec's directory and environment, under the launcher's own, with stdin empty", async () => {
    const result = await exec(['bash', '-c', 'echo "$GREETING, $WHO in $PWD"; cat; echo err >&2'], { env: { WHO: 'alice' } });
    expect(result).toMatchObject({ kind: 'ended', outcome: { outcome: 'exited', exitCode: 0 }, stdout: `from the sandbox, alice in ${dir}\n`, stderr: 'err\n' });
  });

  it("reports the program's exit status apart from its output: a `timeout:` line and 124 are the program's", async () => {
    const result = await exec(['bash', '-c', 'echo "timeout: sending signal TERM to command x" >&2; exit 124']);
    expect(result).toMatchObject({ kind: 'ended', outcome: { outcome: 'exited', exitCode: 124 } });
  });

  it('stops a program at its limit, TERM then KILL, and says it timed out', async () => {
    expect(await exec(['sleep', '30'], { limitMs: 200 })).toMatchObject({ outcome: { outcome: 'timedOut', signal: 15, exitCode: 143 } });
    const stubborn = await exec(['bash', '-c', 'trap "" TERM; sleep 30 & wait'], { limitMs: 200 });
    expect(stubborn).toMatchObject({ outcome: { outcome: 'timedOut', signal: 9, exitCode: 137 } });
  });

  it('keeps the first maxOutputBytes of each stream and says how many more there were', async () => {
    const result = await exec(['bash', '-c', 'head -c 5000 /dev/zero | tr "\\0" a; head -c 30 /dev/zero | tr "\\0" b >&2'], { maxOutputBytes: 1000 });
    expect(result.kind === 'ended' && result.stdout).toBe(`${'a'.repeat(1000)}\n[output truncated: 4000 more bytes not shown]\n`);
    expect(result.kind === 'ended' && result.stderr).toBe('b'.repeat(30));
  });

  it('runs execs side by side: four that each wait for all four to have started all finish', async () => {
    // Run one after another, the first would wait for the others until its limit.
    const barrier = ['bash', '-c', `touch ${dir}/started-$0; for i in $(seq 200); do [ $(ls ${dir} | grep -c '^started-') = 4 ] && exit 0; sleep 0.05; done; exit 1`];
    const results = await Promise.all([1, 2, 3, 4].map((n) => exec([...barrier, String(n)])));
    expect(results.map((result) => result.kind === 'ended' && result.outcome)).toEqual(Array(4).fill({ outcome: 'exited', exitCode: 0 }));
  });

  it('cancels a program the host gave up on: the launcher kills it', async () => {
    const pidFile = join(dir, 'given-up.pid');
    expect(await exec(['bash', '-c', `echo $$ > ${pidFile}; exec sleep 30`], { timeoutMs: 300 })).toMatchObject({ kind: 'timedOut' });
    const pid = Number((await import('node:fs')).readFileSync(pidFile, 'utf8'));
    await until(() => !isRunning(pid));
  });

  it('fails the execs of a connection that ends, and takes the connection the launcher makes next', async () => {
    const running = exec(['sleep', '5']);
    await new Promise((resolve) => setTimeout(resolve, 100));
    await stopLauncher();
    expect(await running).toMatchObject({ kind: 'lost' });
    expect(channels.connected('agt_a')).toBe(false);
    startLauncher();
    expect(await channels.awaitLauncher('agt_a', 10_000)).toBe(true);
    expect(await exec(['true'])).toMatchObject({ outcome: { outcome: 'exited', exitCode: 0 } });
  });

  it('writes stdin, streams output as it comes, and cancels through an abort signal', async () => {
    const fed = await exec(['python3', '-c', 'import sys; print(sys.stdin.read()[::-1])'], { stdin: Buffer.from('olleh') });
    expect(fed).toMatchObject({ kind: 'ended', stdout: 'hello\n' });
    const chunks: [string, string, number][] = [];
    const streamed = await exec(['bash', '-c', 'echo one; sleep 0.3; echo two >&2; sleep 0.3; echo three'], {
      onOutput: (stream, chunk) => chunks.push([stream, chunk.toString(), Date.now()]),
    });
    expect(streamed).toMatchObject({ kind: 'ended', stdout: 'one\nthree\n', stderr: 'two\n' });
    expect(chunks.map(([stream, text]) => [stream, text])).toEqual([['stdout', 'one\n'], ['stderr', 'two\n'], ['stdout', 'three\n']]);
    expect(chunks[2]![2] - chunks[0]![2]).toBeGreaterThan(400);
    const abort = new AbortController();
    const cancelled = exec(['sleep', '30'], { signal: abort.signal });
    setTimeout(() => abort.abort(), 100);
    expect(await cancelled).toMatchObject({ kind: 'ended', outcome: { outcome: 'signaled', signal: 9 } });
  });

  it('runs a program on a terminal, with input and resize', async () => {
    const connection = channels.connection('agt_a')!;
    expect(connection.protocol).toBe(PROTOCOL_WITH_ADR_50);
    let screen = '';
    const session = connection.terminal(request(['python3', '-q', '-i'], { limitMs: undefined, onOutput: (_stream, chunk) => (screen += chunk.toString()) }), { rows: 24, cols: 80 });
    session.write(Buffer.from('6*7\n'));
    await until(() => screen.includes('42\r\n'));
    session.resize(50, 100);
    session.write(Buffer.from('import os; print(os.get_terminal_size())\n'));
    await until(() => screen.includes('columns=100, lines=50'));
    session.write(Buffer.from('exit(4)\n'));
    expect(await session.done).toMatchObject({ kind: 'ended', outcome: { outcome: 'exited', exitCode: 4 } });
  });

  it('starts background processes that outlive the connection, and answers about them', async () => {
    const connection = channels.connection('agt_a')!;
    const started = await connection.background({ argv: ['bash', '-c', 'cat; echo done >&2; exec sleep 30'], env: {}, cwd: dir, limitMs: undefined, maxOutputBytes: 0, stdin: Buffer.from('kept\n') }, 5_000);
    expect(started).toMatchObject({ running: true, outcome: null });
    await expect(connection.control({ op: 'wait', pid: started.pid, timeoutMs: 100 }, 5_000)).resolves.toMatchObject({ running: true });
    await expect(connection.control({ op: 'signal', pid: 1 << 30, signal: 'TERM' }, 5_000)).rejects.toMatchObject({ code: 'not_found' });
    await expect(connection.control({ op: 'signal', pid: started.pid, signal: 'SEGV' }, 5_000)).rejects.toMatchObject({ code: 'bad_request' });
    await connection.control({ op: 'signal', pid: started.pid, signal: 'KILL' }, 5_000);
    await expect(connection.control({ op: 'wait', pid: started.pid, timeoutMs: 5_000 }, 10_000)).resolves.toMatchObject({ running: false, outcome: { outcome: 'signaled', signal: 9 } });
    const output = (await connection.control({ op: 'output', pid: started.pid }, 5_000)) as { stdout: string; stderr: string };
    expect([Buffer.from(output.stdout, 'base64').toString(), Buffer.from(output.stderr, 'base64').toString()]).toEqual(['kept\n', 'done\n']);
  });

  it("reads back a background process's full kept output, both streams past BACKGROUND_OUTPUT_BYTES, in one answer", async () => {
    const connection = channels.connection('agt_a')!;
    // 1.5 MiB on each stream: the launcher keeps the last 1 MiB of each, which in base64 is more than a chunk's frame.
    const program = 'import sys\nfor stream in (sys.stdout, sys.stderr):\n    for i in range(24):\n        stream.write(str(i % 10) * 65536)\n    stream.flush()';
    const started = await connection.background({ argv: ['python3', '-c', program], env: {}, cwd: dir, limitMs: undefined, maxOutputBytes: 0 }, 5_000);
    await expect(connection.control({ op: 'wait', pid: started.pid, timeoutMs: 10_000 }, 15_000)).resolves.toMatchObject({ running: false, outcome: { outcome: 'exited', exitCode: 0 } });
    const output = backgroundOutput(await connection.control({ op: 'output', pid: started.pid }, 10_000));
    expect([output.stdout.length, output.stderr.length]).toEqual([BACKGROUND_OUTPUT_BYTES, BACKGROUND_OUTPUT_BYTES]);
    expect(output.dropped).toEqual({ stdout: 24 * 65536 - BACKGROUND_OUTPUT_BYTES, stderr: 24 * 65536 - BACKGROUND_OUTPUT_BYTES });
    expect(output.stdout.endsWith('3'.repeat(65536))).toBe(true);
    expect(channels.connected('agt_a')).toBe(true);
  });

  it("pushes a background process's output to a follow as it comes, in its streams' order, and feeds its stdin until closed", async () => {
    const connection = channels.connection('agt_a')!;
    const program = 'echo ready; while read line; do echo "out $line"; echo "err $line" >&2; done; echo closed';
    const started = await connection.background({ argv: ['bash', '-c', program], env: {}, cwd: dir, limitMs: undefined, maxOutputBytes: 0, keepStdin: true }, 5_000);
    const chunks: [string, string, number][] = [];
    const follow = await connection.follow(started.pid, { from: { stdout: 0, stderr: 0 }, onOutput: (stream, chunk) => chunks.push([stream, chunk.toString(), Date.now()]) }, 5_000);
    expect(follow.process).toMatchObject({ pid: started.pid, status: 'running' });
    await until(() => chunks.length === 1);
    const delays: number[] = [];
    for (const word of ['a', 'b', 'c']) {
      const sent = Date.now();
      const seen = chunks.length;
      await connection.backgroundInput(started.pid, Buffer.from(`${word}\n`), 5_000);
      await until(() => chunks.length >= seen + 2);
      delays.push(chunks[seen]![2] - sent);
    }
    await connection.closeBackgroundInput(started.pid, 5_000);
    await expect(follow.ended).resolves.toMatchObject({ status: 'exited', exitCode: 0 });
    expect(chunks.map(([stream, text]) => [stream, text])).toEqual([
      ['stdout', 'ready\n'],
      ...['a', 'b', 'c'].flatMap((word) => [['stdout', `out ${word}\n`], ['stderr', `err ${word}\n`]]),
      ['stdout', 'closed\n'],
    ]);
    // Pushed, not polled: each line comes within a few milliseconds of its input, on a busy machine too.
    expect(Math.max(...delays)).toBeLessThan(150);
    const closed = await connection.backgroundInput(started.pid, Buffer.from('late\n'), 5_000).catch((error: unknown) => error);
    expect(closed).toBeInstanceOf(ApiError);
    expect(closed).toMatchObject({ code: 'conflict' });
    await expect(connection.follow(1 << 30, { onOutput: () => undefined }, 5_000)).rejects.toMatchObject({ code: 'not_found' });
  });

  it('follows from now without offsets, and stops a follow while the process runs on', async () => {
    const connection = channels.connection('agt_a')!;
    const started = await connection.background({ argv: ['bash', '-c', 'echo before; read line; echo "after $line"; exec sleep 30'], env: {}, cwd: dir, limitMs: undefined, maxOutputBytes: 0, keepStdin: true }, 5_000);
    await until(async () => ((await connection.control({ op: 'output', pid: started.pid }, 5_000)) as { stdout: string }).stdout !== '');
    const seen: string[] = [];
    const follow = await connection.follow(started.pid, { onOutput: (_stream, chunk) => seen.push(chunk.toString()) }, 5_000);
    await connection.backgroundInput(started.pid, Buffer.from('x\n'), 5_000);
    await until(() => seen.length === 1);
    expect(seen).toEqual(['after x\n']);
    follow.stop();
    await expect(follow.ended).resolves.toBeUndefined();
    await expect(connection.control({ op: 'wait', pid: started.pid, timeoutMs: 0 }, 5_000)).resolves.toMatchObject({ running: true });
    await connection.control({ op: 'signal', pid: started.pid, signal: 'KILL' }, 5_000);
    // A process started without keepStdin has its stdin closed.
    const plain = await connection.background({ argv: ['sleep', '30'], env: {}, cwd: dir, limitMs: undefined, maxOutputBytes: 0 }, 5_000);
    await expect(connection.closeBackgroundInput(plain.pid, 5_000)).rejects.toMatchObject({ code: 'conflict' });
    await connection.control({ op: 'signal', pid: plain.pid, signal: 'KILL' }, 5_000);
  });

  it('writes and reads a file as streams under windows, whole or not at all', async () => {
    const connection = channels.connection('agt_a')!;
    const body = randomBytes(5 * STREAM_WINDOW_BYTES + 123);
    const { stream: upload } = await connection.openStream('file', { op: 'write', path: `${workspace}/blob`, parents: false }, 5_000);
    await pipeline(Readable.from([body.subarray(0, 1000), body.subarray(1000)]), upload);
    expect(await upload.ended).toMatchObject({ info: { type: 'file', size: body.length } });
    const { reply, stream: download } = await connection.openStream('file', { op: 'read', path: `${workspace}/blob` }, 5_000);
    expect(reply).toMatchObject({ info: { size: body.length } });
    const digest = createHash('sha256');
    // Read slowly at first: the launcher sends no more than a window ahead of the reader.
    download.pause();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(download.readableLength).toBeLessThanOrEqual(STREAM_WINDOW_BYTES + DATA_CHUNK_BYTES);
    for await (const chunk of download) digest.update(chunk as Buffer);
    expect(digest.digest('hex')).toBe(createHash('sha256').update(body).digest('hex'));
    // An upload given up half-way leaves nothing at its path.
    const { stream: broken } = await connection.openStream('file', { op: 'write', path: `${workspace}/half` }, 5_000);
    broken.write(Buffer.alloc(1000));
    broken.destroy(new Error('the client went away'));
    await expect(connection.file({ op: 'stat', path: `${workspace}/half` }, 5_000)).resolves.toMatchObject({ error: 'not_found' });
    await expect(connection.openStream('file', { op: 'read', path: '/etc/passwd' }, 5_000)).rejects.toBeInstanceOf(StreamRefusedError);
  });

  it('watches a directory through the files capability: changes by name and type, until closed or the directory goes', async () => {
    const files = launcherFiles('local', async () => channels.connection('agt_a')!);
    const ref = { id: 'agt_a' } as Parameters<typeof files.stat>[0];
    mkdirSync(`${workspace}/watched/sub`, { recursive: true });
    const watch = await files.watch!(ref, `${workspace}/watched`, { recursive: true });
    expect(watch.info).toMatchObject({ type: 'directory', path: `${workspace}/watched` });
    const seen: FileChange[] = [];
    const iterated = (async () => {
      for await (const change of watch.changes) seen.push(change);
    })();
    writeFileSync(`${workspace}/watched/sub/a.txt`, 'a');
    renameSync(`${workspace}/watched/sub/a.txt`, `${workspace}/watched/b.txt`);
    await files.write(ref, `${workspace}/watched/up.txt`, Readable.from([Buffer.from('up')]), {});
    removeSync(`${workspace}/watched/b.txt`);
    await until(() => seen.some((change) => change.name === 'b.txt' && change.type === 'remove'));
    expect(seen).toEqual([
      { name: 'sub/a.txt', type: 'create' },
      { name: 'sub/a.txt', type: 'write' },
      { name: 'sub/a.txt', type: 'rename' },
      { name: 'b.txt', type: 'create' },
      { name: 'up.txt', type: 'create' },
      { name: 'up.txt', type: 'write' },
      { name: 'b.txt', type: 'remove' },
    ]);
    // Closed: the iteration ends, and the launcher lets the watch go.
    watch.close();
    await iterated;
    // The watched directory removed: the iteration throws not_found.
    const gone = await files.watch!(ref, `${workspace}/watched/sub`, {});
    removeSync(`${workspace}/watched`, { recursive: true });
    const ended = await (async () => {
      for await (const change of gone.changes) void change;
    })().catch((error: unknown) => error);
    expect(ended).toBeInstanceOf(SandboxFileError);
    expect(ended).toMatchObject({ code: 'not_found' });
    await expect(files.watch!(ref, '/etc', {})).rejects.toMatchObject({ code: 'outside' });
    await expect(files.watch!(ref, `${workspace}/nothing`, {})).rejects.toMatchObject({ code: 'not_found' });
    // The launcher's connection lost: a watch ends with a provider error.
    mkdirSync(`${workspace}/kept`);
    const lost = await files.watch!(ref, `${workspace}/kept`, {});
    const before = channels.connection('agt_a')!;
    before.socket.destroy();
    const failure = await (async () => {
      for await (const change of lost.changes) void change;
    })().catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ProviderError);
    // The launcher connects again, for the tests after this one.
    await until(() => channels.connection('agt_a') !== undefined && channels.connection('agt_a') !== before, 10_000);
  });

  it('tunnels to a port on the loopback, both ways', async () => {
    const connection = channels.connection('agt_a')!;
    const server = createServer((socket) => socket.pipe(socket));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    try {
      const { stream } = await connection.openStream('tunnel', { port }, 5_000);
      const echoed: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => echoed.push(chunk));
      const sent = randomBytes(3 * STREAM_WINDOW_BYTES);
      stream.end(sent);
      await new Promise((resolve) => stream.once('end', resolve));
      expect(Buffer.concat(echoed).equals(sent)).toBe(true);
    } finally {
      server.close();
    }
    await expect(connection.openStream('tunnel', { port: 1 }, 5_000)).rejects.toMatchObject({ code: 'refused' });
  });

  it('has no exec for a sandbox whose launcher never connected, after waiting as long as it was told', async () => {
    await channels.listen('agt_never', join(dir, 'never.sock'));
    expect(await channels.awaitLauncher('agt_never', 200)).toBe(false);
    expect(channels.exec('agt_never', request(['true']))).toBeUndefined();
    expect(channels.exec('agt_unknown', request(['true']))).toBeUndefined();
  });

  it("answers 501 naming files.watch for a launcher of protocol 3, which cannot watch", async () => {
    await channels.listen('agt_older', join(dir, 'older.sock'));
    const socket: Socket = connect(join(dir, 'older.sock'));
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write(encodeFrame(0, FrameKind.hello, Buffer.from('{"protocol": 3, "pid": 1}')));
    expect(await channels.awaitLauncher('agt_older', 5_000)).toBe(true);
    const files = launcherFiles('local', async () => channels.connection('agt_older')!);
    await expect(files.watch!({ id: 'agt_older' } as Parameters<typeof files.stat>[0], `${workspace}`, {})).rejects.toMatchObject({ status: 501, details: { field: 'files.watch' } });
    socket.destroy();
  });

  it("takes a connection as the launcher's only once it said hello, and closes one that sends a frame over the limit", async () => {
    await channels.listen('agt_rude', join(dir, 'rude.sock'));
    const socket: Socket = connect(join(dir, 'rude.sock'));
    await new Promise((resolve) => socket.once('connect', resolve));
    expect(await channels.awaitLauncher('agt_rude', 200)).toBe(false);
    socket.write(encodeFrame(0, FrameKind.hello, Buffer.from('{"protocol": 1, "pid": 1}')));
    expect(await channels.awaitLauncher('agt_rude', 5_000)).toBe(true);
    const header = Buffer.alloc(FRAME_HEADER_BYTES);
    header.writeUInt32BE(MAX_RECEIVED_FRAME_BYTES + 1, 0);
    socket.write(header);
    await new Promise((resolve) => socket.once('close', resolve));
    expect(channels.connected('agt_rude')).toBe(false);
  });

  it('closes, however many connections it has: the launcher\'s, an older one, one that has not said hello', async () => {
    const path = join(dir, 'busy.sock');
    await channels.listen('agt_busy', path);
    const open = async (hello: boolean) => {
      const socket: Socket = connect(path);
      await new Promise((resolve) => socket.once('connect', resolve));
      if (hello) socket.write(encodeFrame(0, FrameKind.hello, Buffer.from('{"protocol": 1, "pid": 1}')));
      return socket;
    };
    const older = await open(true);
    expect(await channels.awaitLauncher('agt_busy', 5_000)).toBe(true);
    const launcher = await open(true);
    const silent = await open(false);
    const ended = Promise.all([older, launcher, silent].map((socket) => new Promise((resolve) => socket.once('close', resolve))));
    await channels.close('agt_busy');
    await ended;
    expect(channels.connected('agt_busy')).toBe(false);
  });

  it('leaves a socket another process listens on to it, and takes it over once that process is gone', async () => {
    const path = join(dir, 'shared.sock');
    const other = new LauncherChannels(silentLogger);
    expect(await other.listen('agt_shared', path)).toBe(true);
    expect(await channels.listen('agt_shared', path)).toBe(false);
    expect(channels.exec('agt_shared', request(['true']))).toBeUndefined();
    await other.closeAll();
    expect(await channels.listen('agt_shared', path)).toBe(true);
    await channels.close('agt_shared');
  });

  it('gives the socket up when another process replaced its file (the sandbox was made again there)', async () => {
    const path = join(dir, 'replaced.sock');
    const other = new LauncherChannels(silentLogger);
    expect(await other.listen('agt_replaced', path)).toBe(true);
    rmSync(path); // the sandbox's directory was removed and made again by another process, which listens now
    expect(await channels.listen('agt_replaced', path)).toBe(true);
    expect(await other.listen('agt_replaced', path)).toBe(false);
    await other.closeAll();
    expect(await channels.listen('agt_replaced', path)).toBe(true);
  });
});

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function until(condition: () => boolean | Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('the condition did not come true in time');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
