import { randomUUID, timingSafeEqual } from 'node:crypto';
import { pipeline } from 'node:stream/promises';
import {
  ArchiveNotFoundError,
  EXEC_LANGUAGES,
  EXEC_OPTIONS,
  ExecTimeoutError,
  ProviderError,
  SandboxNotReadyError,
  UnsupportedRequestError,
  type Logger,
  type SandboxProvider,
  type SnapshotStorage,
} from '@berth/common';
import { computeSchema } from '@berth/crds';
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import { z } from 'zod';

/**
 * The remote provider protocol, served: any Berth install (the operator in a cluster, `berth up`
 * on a host) runs the sandboxes another install asks for, on its own default provider. See
 * docs/remote-provider-protocol.md. Archives of checkpoints and restores pass through
 * `scratch` storage, streamed.
 */
export interface RemoteServerOptions {
  provider: SandboxProvider;
  /** Bearer tokens accepted (BERTH_PROVIDER_TOKENS). */
  tokens: string[];
  scratch: SnapshotStorage;
  log: Logger;
}

const provisionBody = z
  .object({
    agentId: z.string().regex(/^agt_[0-9a-z]{26}$/),
    sessionId: z.string().min(1).max(64),
    timeoutSeconds: z.number().int().positive().max(86_400),
    compute: computeSchema,
    browser: z.boolean().default(false),
    gpu: z.string().optional(),
    env: z.record(z.string(), z.string()).default({}),
    restore: z
      .object({ key: z.string().min(1), sha256: z.string().regex(/^[0-9a-f]{64}$/), sizeBytes: z.number().int().nonnegative(), level: z.enum(['native', 'filesystem']) })
      .strict()
      .optional(),
  })
  .strict();

const execBody = z
  .object({
    language: z.enum(EXEC_LANGUAGES),
    code: z.string(),
    timeoutMs: z.number().int().positive().max(3_600_000),
    // ADR 39's options, for a provider that honours them (its `execOptions` in /capabilities).
    env: z.record(z.string(), z.string()).optional(),
    cwd: z.string().regex(/^\/workspace(\/.*)?$/, 'an absolute path under /workspace').optional(),
    stdin: z.string().base64().optional(),
  })
  .strict();
const checkpointBody = z.object({ native: z.boolean() }).strict();
const ARCHIVE_KEY = /^[A-Za-z0-9_.-]{1,128}$/;

class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

function authorized(header: string | undefined, tokens: string[]): boolean {
  const given = Buffer.from(/^Bearer (.+)$/.exec(header ?? '')?.[1] ?? '');
  return tokens.some((token) => {
    const expected = Buffer.from(token);
    return expected.length === given.length && timingSafeEqual(expected, given);
  });
}

function parse<T>(schema: z.ZodType<T>, value: unknown): T {
  const result = schema.safeParse(value);
  if (!result.success) throw new HttpError(422, 'unprocessable_entity', result.error.issues.map((issue) => `${issue.path.join('.') || 'body'}: ${issue.message}`).join('; '));
  return result.data;
}

export function remoteProviderRouter(options: RemoteServerOptions): Router {
  const { provider, scratch, log } = options;
  const router = express.Router();
  const ref = (id: string) => ({ provider: provider.name, id });
  const sandboxId = (req: Request) => {
    const id = String(req.params.id);
    if (!/^agt_[0-9a-z]{26}$/.test(id)) throw new HttpError(404, 'not_found', `no sandbox ${id}`);
    return id;
  };
  const handle = (work: (req: Request, res: Response) => Promise<void>) => (req: Request, res: Response, next: NextFunction) => {
    work(req, res).catch(next);
  };

  router.use((req, res, next) => {
    if (options.tokens.length === 0 || !authorized(req.get('authorization'), options.tokens)) {
      res.status(401).json({ error: { code: 'unauthorized', message: 'a valid bearer token of this provider is required' } });
      return;
    }
    next();
  });

  router.get(
    '/capabilities',
    handle(async (_req, res) => {
      res.json({ protocol: 1, provider: provider.name, capabilities: provider.capabilities, execOptions: provider.execOptions ?? [] });
    }),
  );

  router.put(
    '/archives/:key',
    handle(async (req, res) => {
      const key = String(req.params.key);
      if (!ARCHIVE_KEY.test(key)) throw new HttpError(422, 'unprocessable_entity', 'archive keys are letters, digits, _ . and -');
      const stored = await scratch.put(`incoming/${key}`, req);
      res.status(201).json({ key, sizeBytes: stored.sizeBytes, sha256: stored.sha256 });
    }),
  );

  router.delete(
    '/archives/:key',
    handle(async (req, res) => {
      await scratch.delete(`incoming/${String(req.params.key)}`);
      res.json({ ok: true });
    }),
  );

  router.post(
    '/sandboxes',
    express.json({ limit: '1mb' }),
    handle(async (req, res) => {
      const body = parse(provisionBody, req.body);
      const restore = body.restore
        ? { storage: scratch, key: `incoming/${body.restore.key}`, archive: { key: `incoming/${body.restore.key}`, sha256: body.restore.sha256, sizeBytes: body.restore.sizeBytes }, level: body.restore.level }
        : undefined;
      try {
        const sandbox = await provider.provision({
          agentId: body.agentId,
          sessionId: body.sessionId,
          timeoutSeconds: body.timeoutSeconds,
          compute: body.compute,
          browser: body.browser,
          ...(body.gpu ? { gpu: body.gpu } : {}),
          env: body.env,
          ...(restore ? { restore } : {}),
        });
        if (body.restore) await scratch.delete(`incoming/${body.restore.key}`).catch(() => undefined);
        res.status(201).json({ id: sandbox.id, state: 'running' });
      } catch (error) {
        if (error instanceof SandboxNotReadyError) {
          res.status(202).json({ id: body.agentId, state: 'pending', message: error.message, retryAfterMs: error.retryAfterMs });
          return;
        }
        throw error;
      }
    }),
  );

  router.get(
    '/sandboxes/:id',
    handle(async (req, res) => {
      const id = sandboxId(req);
      res.json({ id, state: await provider.state(ref(id)) });
    }),
  );

  router.post(
    '/sandboxes/:id/exec',
    express.json({ limit: '2mb' }),
    handle(async (req, res) => {
      const { stdin, ...body } = parse(execBody, req.body);
      for (const option of EXEC_OPTIONS) {
        if (body[option as 'env' | 'cwd'] !== undefined || (option === 'stdin' && stdin !== undefined)) {
          if (!provider.execOptions?.includes(option)) throw new HttpError(501, 'not_implemented', `${option}: this provider cannot take it`);
        }
      }
      res.json(await provider.exec(ref(sandboxId(req)), { ...body, ...(stdin !== undefined ? { stdin: Buffer.from(stdin, 'base64') } : {}) }));
    }),
  );

  router.post(
    '/sandboxes/:id/checkpoint',
    express.json({ limit: '1kb' }),
    handle(async (req, res) => {
      const id = sandboxId(req);
      const body = parse(checkpointBody, req.body);
      const key = `outgoing/${id}-${randomUUID()}`;
      const result = await provider.checkpoint(ref(id), { storage: scratch, key, native: body.native && provider.capabilities.checkpoint === 'native' });
      try {
        res.status(200);
        res.setHeader('content-type', 'application/octet-stream');
        res.setHeader('content-length', String(result.sizeBytes));
        res.setHeader('x-berth-level', result.level);
        res.setHeader('x-berth-sha256', result.sha256);
        await pipeline(await scratch.get(key), res);
      } finally {
        await scratch.delete(key).catch(() => undefined);
      }
    }),
  );

  router.delete(
    '/sandboxes/:id',
    handle(async (req, res) => {
      await provider.terminate(ref(sandboxId(req)));
      res.json({ ok: true });
    }),
  );

  router.use((error: unknown, req: Request, res: Response, _next: NextFunction) => {
    if (res.headersSent) {
      log.warn({ err: error, path: req.path }, 'remote provider request failed after its answer began');
      res.destroy();
      return;
    }
    const [status, code, message] =
      error instanceof HttpError
        ? [error.status, error.code, error.message]
        : error instanceof ExecTimeoutError
          ? [504, 'timeout', error.message]
          : error instanceof UnsupportedRequestError
            ? [422, 'unsupported_request', error.message]
            : error instanceof ArchiveNotFoundError
              ? [404, 'not_found', error.message]
              : error instanceof ProviderError
                ? [502, 'provider_error', error.message]
                : [500, 'internal_error', 'the provider failed; see its log'];
    if (status >= 500) log.warn({ err: error, path: req.path }, 'remote provider request failed');
    res.status(status).json({ error: { code, message, ...(error instanceof ProviderError ? { details: error.details } : {}) } });
  });
  return router;
}


