import { posix } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Response } from 'express';
import { WORKSPACE_ROOT } from '@berth/common';
import { z } from 'zod';
import { toApiError } from '../http/errors.js';
import { defineRoute, type RouteTable } from '../http/route.js';
import { openEventStream } from '../http/sse.js';
import type { FileService } from '../services/files.js';

/**
 * A sandbox's files (ADR 40): upload and download streamed, listing, stat, mkdir, delete, move, and
 * a directory as a tar archive. Paths are relative to /workspace or absolute under it: the API
 * refuses one that leaves it (`..`, `/etc`) and the sandbox refuses one whose symlinks do.
 */

export const filePathSchema = z
  .string()
  .min(1)
  .max(4096)
  .refine((value) => !value.includes('\0'), 'must not contain NUL')
  .transform((value, context) => {
    const path = posix.resolve(WORKSPACE_ROOT, value);
    if (path !== WORKSPACE_ROOT && !path.startsWith(`${WORKSPACE_ROOT}/`)) {
      context.addIssue({ code: 'custom', message: `must be inside ${WORKSPACE_ROOT} (relative to it, or absolute under it); "${value}" resolves to ${path}` });
      return z.NEVER;
    }
    return path;
  })
  .describe('a path relative to /workspace or absolute under it; one that leaves /workspace (`..`, another absolute path, a symlink pointing out) is refused with 422');

const booleanFlag = z
  .enum(['true', 'false'])
  .transform((value) => value === 'true')
  .optional();

export const fileInfoSchema = z
  .object({
    name: z.string(),
    path: z.string().describe('absolute, with the symlinks of the directories above it resolved'),
    type: z.enum(['file', 'directory', 'symlink', 'other']),
    size: z.number().int().describe('bytes'),
    mode: z.number().int().describe('permission bits (420 is 0o644)'),
    modifiedAt: z.string().describe('ISO 8601'),
    target: z.string().optional().describe("a symlink's target, as written"),
  })
  .strict();

const agentParam = z.object({ id: z.string().min(1).max(128).describe('agent id (`agt_…`)') }).strict();
const fileExample = { name: 'data.csv', path: '/workspace/data.csv', type: 'file' as const, size: 52428800, mode: 420, modifiedAt: '2026-11-23T17:02:11.000Z' };
// 431: a path of up to 4096 characters, percent-encoded in the query, can pass the 16 KiB header limit.
const FILE_ERRORS = ['not_found', 'conflict', 'not_implemented', 'provider_error', 'headers_too_large'] as const;

export function fileRoutes(table: RouteTable, files: FileService, options: { heartbeatMs?: number | undefined } = {}): void {
  table.add(
    defineRoute({
      method: 'put',
      path: '/v1/agents/:id/files',
      operationId: 'uploadFile',
      tag: 'Files',
      summary: 'Upload a file (streamed)',
      description:
        'Writes the request body to `path` in the sandbox, streamed through without being held in memory: any size up to the free space of the agent\'s workspace (413 past it). ' +
        'The file appears whole or not at all (it is written beside its path and renamed into place at the end); an existing file is replaced. ' +
        'An agent paused by its idle policy is woken first; 409 for an agent without a ready sandbox (paused for another reason, booting, ended), 404 when the directory does not exist (unless `parents=true`), 422 for a path outside /workspace or a directory.',
      params: agentParam,
      query: z
        .object({
          path: filePathSchema,
          mode: z.string().regex(/^[0-7]{3,4}$/, 'octal permission bits, e.g. 644').optional().describe('octal permission bits (default 644)'),
          parents: booleanFlag.describe('make missing directories above it (default false)'),
        })
        .strict(),
      streamBody: { description: "the file's bytes", contentTypes: ['application/octet-stream'], required: true, example: 'a,b\n1,2\n' },
      responses: { 201: { description: 'the file as written', schema: fileInfoSchema, example: fileExample } },
      errors: [...FILE_ERRORS, 'payload_too_large', 'forbidden'],
      handler: async ({ req, principal, params, query }) => {
        const info = await files.write(principal, params.id, query.path, req, {
          ...(query.mode !== undefined ? { mode: parseInt(query.mode, 8) } : {}),
          parents: query.parents ?? false,
        });
        return { status: 201, body: info };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/v1/agents/:id/files',
      operationId: 'downloadFile',
      tag: 'Files',
      summary: 'Download a file (streamed)',
      description: "The file's bytes as they are read in the sandbox (`application/octet-stream`), with its size in `X-File-Size`. A directory is refused with 422: download it with `/files/archive`.",
      params: agentParam,
      query: z.object({ path: filePathSchema }).strict(),
      responses: { 200: { description: "the file's bytes", contentType: 'application/octet-stream', example: 'a,b\n1,2\n' } },
      errors: [...FILE_ERRORS, 'forbidden'],
      handler: async ({ res, principal, params, query }) => {
        const { info, body } = await files.read(principal, params.id, query.path);
        res.status(200).set({ 'Content-Type': 'application/octet-stream', 'X-File-Size': String(info.size), 'Content-Disposition': contentDisposition(info.name) });
        await sendStream(body, res);
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/v1/agents/:id/files',
      operationId: 'deleteFile',
      tag: 'Files',
      summary: 'Delete a file or directory',
      description: 'Removes `path` (a symlink itself, never what it points to). A directory with entries needs `recursive=true` (409 otherwise). /workspace itself cannot be removed.',
      params: agentParam,
      query: z.object({ path: filePathSchema, recursive: booleanFlag.describe('remove a directory and everything in it (default false)') }).strict(),
      responses: { 204: { description: 'removed' } },
      errors: [...FILE_ERRORS, 'forbidden'],
      handler: async ({ res, principal, params, query }) => {
        await files.remove(principal, params.id, query.path, query.recursive ?? false);
        res.status(204).end();
      },
    }),
    defineRoute({
      method: 'get',
      path: '/v1/agents/:id/files/list',
      operationId: 'listFiles',
      tag: 'Files',
      summary: 'List a directory',
      description: 'The entries of a directory by name, each with its type, size, permission bits and modification time; at most 5000 (`omitted` counts the rest).',
      params: agentParam,
      query: z.object({ path: filePathSchema.optional().describe('the directory (default /workspace)') }).strict(),
      responses: {
        200: {
          description: 'the entries',
          schema: z.object({ path: z.string(), data: z.array(fileInfoSchema), omitted: z.number().int() }).strict(),
          example: { path: '/workspace', data: [fileExample, { name: 'out', path: '/workspace/out', type: 'directory', size: 4096, mode: 493, modifiedAt: '2026-11-23T17:01:40.000Z' }], omitted: 0 },
        },
      },
      errors: [...FILE_ERRORS, 'forbidden'],
      handler: async ({ principal, params, query }) => {
        const path = query.path ?? WORKSPACE_ROOT;
        const { entries, omitted } = await files.list(principal, params.id, path);
        return { status: 200, body: { path, data: entries, omitted } };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/v1/agents/:id/files/stat',
      operationId: 'statFile',
      tag: 'Files',
      summary: 'Describe a file or directory',
      description: 'Type, size, permission bits and modification time of `path` (symlinks followed; 422 when one points outside /workspace).',
      params: agentParam,
      query: z.object({ path: filePathSchema }).strict(),
      responses: { 200: { description: 'the entry', schema: fileInfoSchema, example: fileExample } },
      errors: [...FILE_ERRORS, 'forbidden'],
      handler: async ({ principal, params, query }) => ({ status: 200, body: await files.stat(principal, params.id, query.path) }),
    }),
    defineRoute({
      method: 'post',
      path: '/v1/agents/:id/files/mkdir',
      operationId: 'makeDirectory',
      tag: 'Files',
      summary: 'Make a directory',
      description: 'Makes `path`; with `parents` the directories above it too, and an existing directory is then no error. 409 when something exists there (without `parents`).',
      params: agentParam,
      body: z.object({ path: filePathSchema, parents: z.boolean().default(false).describe('make missing directories above it too') }).strict(),
      requestExample: { path: 'out/plots', parents: true },
      responses: { 201: { description: 'the directory', schema: fileInfoSchema, example: { name: 'plots', path: '/workspace/out/plots', type: 'directory', size: 4096, mode: 493, modifiedAt: '2026-11-23T17:03:00.000Z' } } },
      errors: [...FILE_ERRORS, 'forbidden'],
      handler: async ({ principal, params, body }) => ({ status: 201, body: await files.mkdir(principal, params.id, body.path, body.parents) }),
    }),
    defineRoute({
      method: 'post',
      path: '/v1/agents/:id/files/move',
      operationId: 'moveFile',
      tag: 'Files',
      summary: 'Move or rename a file or directory',
      description: 'Renames `from` to `to` (both inside /workspace); 409 when `to` exists, unless `overwrite`.',
      params: agentParam,
      body: z.object({ from: filePathSchema, to: filePathSchema, overwrite: z.boolean().default(false).describe('replace what is at `to`') }).strict(),
      requestExample: { from: 'draft.md', to: 'report.md' },
      responses: { 200: { description: 'the entry at its new path', schema: fileInfoSchema, example: { ...fileExample, name: 'report.md', path: '/workspace/report.md', size: 1804 } } },
      errors: [...FILE_ERRORS, 'forbidden'],
      handler: async ({ principal, params, body }) => ({ status: 200, body: await files.move(principal, params.id, body.from, body.to, body.overwrite) }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/agents/:id/files/archive',
      operationId: 'downloadDirectory',
      tag: 'Files',
      summary: 'Download a directory as a tar archive (streamed)',
      description: 'The directory and everything under it as an uncompressed tar (`application/x-tar`), member names relative to it (`./…`), made as it is sent. Symlinks are stored as symlinks.',
      params: agentParam,
      query: z.object({ path: filePathSchema.optional().describe('the directory (default /workspace)') }).strict(),
      responses: { 200: { description: 'a tar archive', contentType: 'application/x-tar', example: '(tar bytes)' } },
      errors: [...FILE_ERRORS, 'forbidden'],
      handler: async ({ res, principal, params, query }) => {
        const { info, body } = await files.archive(principal, params.id, query.path ?? WORKSPACE_ROOT);
        res.status(200).set({ 'Content-Type': 'application/x-tar', 'Content-Disposition': contentDisposition(`${info.name || 'workspace'}.tar`) });
        await sendStream(body, res);
      },
    }),
    defineRoute({
      method: 'get',
      path: '/v1/agents/:id/files/watch',
      operationId: 'watchDirectory',
      tag: 'Files',
      summary: 'Watch a directory for changes (SSE)',
      description:
        'The changes in a directory as they happen in the sandbox (ADR 51), as a `text/event-stream`. Events: `change` (`{seq, name, type}`: `name` relative to the directory, `type` one of `create`, `write`, `remove`, `rename`, `chmod`; a rename is the old name\'s `rename` and the new name\'s `create`; `seq` counts from 1, also the SSE id), ' +
        '`error` (`{code, message}` in the error envelope\'s terms, then the stream ends: `not_found` when the directory itself was removed or moved, `provider_error` when the sandbox was paused or ended), and `heartbeat` every 15 s. ' +
        'With `recursive=true` every directory under it is watched too, each new one as it appears (what was made in it before is told as created). The stream lasts until the client closes it; it does not keep the agent from being paused by its idle policy, and a pause ends it. ' +
        'Errors before the stream starts are answered as JSON (404, 409 for an agent without a ready sandbox, 422 for a path outside /workspace or not a directory, 501 for a provider that cannot watch).',
      params: agentParam,
      query: z
        .object({
          path: filePathSchema.optional().describe('the directory (default /workspace)'),
          recursive: booleanFlag.describe('watch every directory under it too (default false)'),
        })
        .strict(),
      responses: {
        200: {
          description: 'an event stream',
          contentType: 'text/event-stream',
          schema: z.object({ id: z.string().optional(), event: z.enum(['change', 'error', 'heartbeat']), data: z.string() }),
          example: { id: '1', event: 'change', data: '{"seq":1,"name":"out/result.csv","type":"create"}' },
        },
      },
      errors: [...FILE_ERRORS, 'forbidden'],
      handler: async ({ req, res, principal, params, query }) => {
        const watch = await files.watch(principal, params.id, query.path ?? WORKSPACE_ROOT, query.recursive ?? false);
        const stream = openEventStream(req, res, options.heartbeatMs);
        void stream.closed.then(() => watch.close());
        let seq = 0;
        try {
          for await (const change of watch.changes) {
            seq += 1;
            stream.write('change', { seq, ...change }, String(seq));
          }
        } catch (error) {
          const apiError = toApiError(error, req.log);
          stream.write('error', { code: apiError.code, message: apiError.message });
        }
        stream.end();
      },
    }),
  );
}

/**
 * Sends a body as it comes. A failure before its first byte is answered with the error envelope
 * (nothing was sent yet); after it, the response is cut (a client sees a body that did not end).
 */
async function sendStream(body: Readable, res: Response): Promise<void> {
  try {
    await pipeline(body, res);
  } catch (error) {
    if (!res.headersSent) {
      res.removeHeader('Content-Disposition');
      throw error;
    }
    res.destroy();
  }
}

/** An attachment's header, the name kept to safe characters. */
function contentDisposition(name: string): string {
  return `attachment; filename="${name.replace(/[^A-Za-z0-9._-]/g, '_')}"`;
}
