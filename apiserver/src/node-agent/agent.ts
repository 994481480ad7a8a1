/**
 * The node agent (`berth node`, a DaemonSet): checkpoints a pod's gVisor sandbox natively and
 * stages checkpoints for new pods to be restored from (ADR 38). It speaks HTTP to the operator only,
 * with a shared bearer token; it never talks to the Kubernetes API.
 *
 * - `POST /v1/pods/{uid}/checkpoint`: `runsc checkpoint` of the pod's sandbox (found in the runsc
 *   shim's state directory by the pod UID its containers carry), answered with a gzipped tar of
 *   `manifest.json`, `workspace/` (the pod's /workspace volume) and `checkpoint/` (runsc's image),
 *   streamed as tar makes it. The sandbox is stopped afterwards, as `runsc checkpoint` leaves it.
 * - `PUT /v1/restores/{uid}`: such an archive, extracted to `restores/<uid>/` for the pod of that
 *   UID, which the runsc wrapper (`bin/runsc`, installed here at start) restores instead of
 *   starting. Refused with 409 when the archive was made by another runsc version.
 * - `DELETE /v1/restores/{uid}`: the staged checkpoint, once the pod runs (or was given up).
 * - `GET /v1/node`: this node's name and runsc version.
 */
import { spawn } from 'node:child_process';
import { randomUUID, timingSafeEqual } from 'node:crypto';
import { chmod, copyFile, mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Logger } from '@berth/common';
import express, { type NextFunction, type Request, type Response } from 'express';
import { Counter, Histogram, type Registry } from 'prom-client';

export interface NodeAgentOptions {
  runsc: string;
  /** The runsc shim's state directory for Kubernetes pods: `runsc --root <this> list` shows them. */
  runscRoot: string;
  /** Holds `bin/runsc` (the wrapper), `restores/` and `checkpoints/` (scratch). */
  stateDir: string;
  nodeName: string;
  token: string;
  /** The wrapper to install as `bin/runsc` (apiserver/node-agent/runsc-restore.sh). */
  wrapperSource: string;
  log: Logger;
  metrics: Registry;
  /** Staged restores and checkpoint scratch older than this are removed by the prune loop. */
  staleAfterMs?: number;
}

/** The first entry of every archive the node agent makes. */
export interface NodeCheckpointManifest {
  format: 1;
  provider: 'kubernetes';
  level: 'native';
  node: string;
  runscVersion: string;
  podUid: string;
  createdAt: string;
}

const POD_UID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

class NodeAgentError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export interface NodeAgent {
  app: express.Express;
  runscVersion: string;
  /** Removes stale staged restores and checkpoint scratch; the prune loop runs it every minute. */
  prune(): Promise<number>;
  stop(): void;
}

export async function createNodeAgent(options: NodeAgentOptions): Promise<NodeAgent> {
  const { log, stateDir } = options;
  const restores = join(stateDir, 'restores');
  const scratch = join(stateDir, 'checkpoints');
  await mkdir(restores, { recursive: true, mode: 0o700 });
  await mkdir(scratch, { recursive: true, mode: 0o700 });
  await installWrapper(options.wrapperSource, join(stateDir, 'bin', 'runsc'));
  const runscVersion = (await run(options.runsc, ['--version'])).split('\n')[0]!.replace(/^runsc version /, '').trim();

  const checkpointSeconds = new Histogram({
    name: 'berth_node_checkpoint_duration_seconds',
    help: "runsc checkpoint of a pod's sandbox by the node agent, by result",
    labelNames: ['result'],
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [options.metrics],
  });
  const archiveBytes = new Counter({ name: 'berth_node_checkpoint_archive_bytes_total', help: 'bytes of checkpoint archives streamed to the operator', registers: [options.metrics] });
  const staged = new Counter({ name: 'berth_node_restores_staged_total', help: 'checkpoints staged for a pod to restore, by result', labelNames: ['result'], registers: [options.metrics] });
  const pruneRuns = new Counter({ name: 'berth_node_prune_runs_total', help: 'runs of the loop that removes stale staged restores and scratch', labelNames: ['result'], registers: [options.metrics] });
  const pruned = new Counter({ name: 'berth_node_pruned_total', help: 'stale staged restores and checkpoint scratch directories removed', registers: [options.metrics] });

  const runsc = (args: string[]) => run(options.runsc, [`--root=${options.runscRoot}`, ...args]);

  /** The pod's sandbox (its pause container: checkpointing it saves every container) and its /workspace on the host. */
  async function findPod(uid: string): Promise<{ sandboxId: string; workspace: string | undefined }> {
    const listed = (JSON.parse((await runsc(['list', '--format=json'])) || '[]') as { id: string; status: string }[] | null) ?? [];
    const states = await Promise.all(
      listed.map(async (container) => {
        const state = await runsc(['state', container.id]).then(
          (text) => JSON.parse(text) as { id: string; status: string; bundle: string; annotations?: Record<string, string> },
          () => undefined,
        );
        return state;
      }),
    );
    const ofPod = states.filter((state) => state?.annotations?.['io.kubernetes.cri.sandbox-uid'] === uid);
    const sandbox = ofPod.find((state) => state!.annotations!['io.kubernetes.cri.container-type'] === 'sandbox' && state!.status === 'running');
    if (!sandbox) throw new NodeAgentError(404, 'not_found', `no running gVisor sandbox of pod ${uid} on node ${options.nodeName}`);
    let workspace: string | undefined;
    for (const container of ofPod) {
      if (container!.annotations!['io.kubernetes.cri.container-type'] !== 'container') continue;
      const spec = JSON.parse(await readFile(join(container!.bundle, 'config.json'), 'utf8')) as { mounts?: { destination: string; source?: string }[] };
      workspace = spec.mounts?.find((mount) => mount.destination === '/workspace')?.source ?? workspace;
    }
    return { sandboxId: sandbox.id, workspace };
  }

  const app = express();
  app.disable('x-powered-by');
  app.get('/healthz', (_req, res) => void res.json({ ok: true }));
  app.get('/metrics', async (_req, res) => {
    res.setHeader('Content-Type', options.metrics.contentType);
    res.send(await options.metrics.metrics());
  });
  const expected = Buffer.from(`Bearer ${options.token}`);
  app.use('/v1', (req, _res, next) => {
    const given = Buffer.from(req.get('authorization') ?? '');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return next(new NodeAgentError(401, 'unauthorized', 'a valid node agent token is required'));
    next();
  });
  const podUid = (req: Request): string => {
    const uid = String(req.params.uid);
    if (!POD_UID.test(uid)) throw new NodeAgentError(422, 'unprocessable_entity', `"${uid}" is not a pod UID`);
    return uid;
  };

  app.get('/v1/node', (_req, res) => void res.json({ node: options.nodeName, runscVersion }));

  app.post('/v1/pods/:uid/checkpoint', async (req, res, next) => {
    const started = process.hrtime.bigint();
    let dir: string | undefined;
    try {
      const uid = podUid(req);
      const pod = await findPod(uid);
      dir = join(scratch, `${uid}-${randomUUID()}`);
      await mkdir(join(dir, 'checkpoint'), { recursive: true, mode: 0o700 });
      const manifest: NodeCheckpointManifest = {
        format: 1,
        provider: 'kubernetes',
        level: 'native',
        node: options.nodeName,
        runscVersion,
        podUid: uid,
        createdAt: new Date().toISOString(),
      };
      await writeFile(join(dir, 'manifest.json'), JSON.stringify(manifest));
      await runsc(['checkpoint', `--image-path=${join(dir, 'checkpoint')}`, pod.sandboxId]);
      checkpointSeconds.observe({ result: 'success' }, Number(process.hrtime.bigint() - started) / 1e9);
      log.info({ podUid: uid, sandbox: pod.sandboxId }, 'pod checkpointed');
      res.status(200).setHeader('Content-Type', 'application/gzip');
      const archive = packTar(dir, pod.workspace);
      archive.on('data', (chunk: Buffer) => archiveBytes.inc(chunk.length));
      await pipeline(archive, res);
    } catch (error) {
      if (!res.headersSent) checkpointSeconds.observe({ result: 'error' }, Number(process.hrtime.bigint() - started) / 1e9);
      if (res.headersSent) res.destroy(error as Error);
      else next(error);
    } finally {
      if (dir) await rm(dir, { recursive: true, force: true });
    }
  });

  app.put('/v1/restores/:uid', async (req, res, next) => {
    let partial: string | undefined;
    try {
      const uid = podUid(req);
      partial = join(restores, `${uid}.partial`);
      await rm(partial, { recursive: true, force: true });
      await mkdir(partial, { recursive: true, mode: 0o700 });
      await extractTar(req, partial);
      const manifest = JSON.parse(await readFile(join(partial, 'manifest.json'), 'utf8').catch(() => '{}')) as Partial<NodeCheckpointManifest>;
      if (manifest.level !== 'native') throw new NodeAgentError(422, 'unprocessable_entity', 'the archive holds no native checkpoint (no manifest of one)');
      if (manifest.runscVersion !== runscVersion) {
        throw new NodeAgentError(409, 'conflict', `the checkpoint was made by runsc ${manifest.runscVersion}; this node runs ${runscVersion}`);
      }
      await rename(join(partial, 'checkpoint'), join(partial, 'image'));
      await writeFile(join(partial, 'ready'), '');
      await rm(join(restores, uid), { recursive: true, force: true });
      await rename(partial, join(restores, uid));
      partial = undefined;
      staged.inc({ result: 'success' });
      log.info({ podUid: uid, from: manifest.node }, 'checkpoint staged for restore');
      res.status(201).json({ staged: true, node: options.nodeName, runscVersion });
    } catch (error) {
      // Removed before the answer, so that nothing half-staged outlives a refusal.
      if (partial) await rm(partial, { recursive: true, force: true });
      staged.inc({ result: error instanceof NodeAgentError && error.status === 409 ? 'version_mismatch' : 'error' });
      next(error);
    }
  });

  app.delete('/v1/restores/:uid', async (req, res, next) => {
    try {
      await rm(join(restores, podUid(req)), { recursive: true, force: true });
      res.status(204).end();
    } catch (error) {
      next(error);
    }
  });

  app.use((_req, _res, next) => next(new NodeAgentError(404, 'not_found', 'no such route')));
  app.use((error: unknown, req: Request, res: Response, _next: NextFunction) => {
    const known = error instanceof NodeAgentError ? error : undefined;
    if (!known) log.error({ err: error, path: req.path }, 'node agent request failed');
    res.status(known?.status ?? 500).json({
      error: { code: known?.code ?? 'internal_error', message: known?.message ?? (error as Error).message, details: {}, requestId: randomUUID() },
    });
  });

  const staleAfterMs = options.staleAfterMs ?? 15 * 60_000;
  async function prune(): Promise<number> {
    let removed = 0;
    for (const dir of [restores, scratch]) {
      for (const name of await readdir(dir)) {
        const path = join(dir, name);
        const info = await stat(path).catch(() => undefined);
        if (info && Date.now() - info.mtimeMs > staleAfterMs) {
          await rm(path, { recursive: true, force: true });
          removed += 1;
        }
      }
    }
    pruned.inc(removed);
    return removed;
  }
  const timer = setInterval(() => {
    prune().then(
      () => pruneRuns.inc({ result: 'success' }),
      (error: unknown) => {
        pruneRuns.inc({ result: 'error' });
        log.warn({ err: error }, 'pruning stale restores failed');
      },
    );
  }, 60_000);
  timer.unref();
  return { app, runscVersion, prune, stop: () => clearInterval(timer) };
}

/** Copies the wrapper into place atomically: the shim may run it at any moment. */
async function installWrapper(source: string, target: string): Promise<void> {
  await mkdir(join(target, '..'), { recursive: true });
  const temporary = `${target}.${process.pid}.tmp`;
  await copyFile(source, temporary);
  await chmod(temporary, 0o755);
  await rename(temporary, target);
}

/**
 * `manifest.json`, `checkpoint/` and the workspace as `workspace/`, gzipped (fast): the workspace
 * part is what a filesystem-level restore reads, on any provider. The stream fails if tar does.
 */
function packTar(dir: string, workspace: string | undefined): Readable {
  const args = ['--create', '--file=-', '--use-compress-program=gzip -1', '--numeric-owner', '--directory', dir, 'manifest.json', 'checkpoint'];
  // Only the workspace's own entries start with '.': they become workspace/….
  if (workspace) args.push('--directory', workspace, '--transform', 's,^\\.,workspace,', '.');
  const tar = spawn('tar', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  tar.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise<number | null>((resolve) => tar.on('close', resolve));
  const checked = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      done(null, chunk);
    },
    flush(done) {
      void exited.then((code) => done(code === 0 ? null : new Error(`tar failed (exit ${code}): ${stderr.trim()}`)));
    },
  });
  checked.on('close', () => {
    if (tar.exitCode === null) tar.kill('SIGKILL');
  });
  pipeline(tar.stdout!, checked).catch(() => undefined);
  return checked;
}

/** Extracts a gzipped tar from `source` into `dir`; fails if the stream or tar does. */
async function extractTar(source: Readable, dir: string): Promise<void> {
  const tar = spawn('tar', ['--extract', '--gzip', '--file=-', '--numeric-owner', '--same-permissions', '--directory', dir], { stdio: ['pipe', 'ignore', 'pipe'] });
  let stderr = '';
  tar.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise<number | null>((resolve) => tar.on('close', resolve));
  try {
    await pipeline(source, tar.stdin!);
  } catch (error) {
    tar.kill('SIGKILL');
    await exited;
    throw new NodeAgentError(400, 'bad_request', `reading the archive failed: ${(error as Error).message}`);
  }
  const code = await exited;
  if (code !== 0) throw new NodeAgentError(422, 'unprocessable_entity', `the archive could not be extracted (tar exit ${code}): ${stderr.trim()}`);
}

function run(command: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(stdout) : reject(new Error(`${command} ${args.join(' ')} failed (${code}): ${stderr.trim().slice(-2000)}`))));
  });
}
