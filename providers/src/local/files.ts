/**
 * A sandbox's files and ports through its launcher's channel (ADR 40): FILE requests answered by a
 * REPLY, reads, tars and writes as streams under windows, and TUNNEL to a port on the sandbox's
 * loopback. Paths are resolved and confined to /workspace by the launcher, inside the sandbox.
 */

import type { Duplex, Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { SandboxRef } from '@berth/crds';
import { z } from 'zod';
import {
  FILE_CHANGE_TYPES,
  FILE_ERROR_CODES,
  PortClosedError,
  ProviderError,
  SandboxFileError,
  type FileChange,
  type FileErrorCode,
  type FileInfo,
  type FileWatch,
  type SandboxFiles,
} from '@berth/common';
import { ChannelLostError, PROTOCOL_WITH_ADR_51, StreamRefusedError, type ChannelStream, type Connection } from './channel.js';

/** How long the launcher has to answer a file request or a tunnel's connect. */
const FILE_WAIT_MS = 15_000;

const fileInfoSchema = z.object({
  name: z.string(),
  path: z.string(),
  type: z.enum(['file', 'directory', 'symlink', 'other']),
  size: z.number().int().nonnegative(),
  mode: z.number().int().nonnegative(),
  modifiedAt: z.number(),
  target: z.string().optional(),
});

function fileInfo(record: z.infer<typeof fileInfoSchema>): FileInfo {
  return { ...record, modifiedAt: new Date(record.modifiedAt).toISOString() };
}

const infoReply = z.object({ info: fileInfoSchema });
const listReply = z.object({ entries: z.array(fileInfoSchema), omitted: z.number().int() });
const refusedReply = z.object({ error: z.string(), message: z.string() });
const changeSchema = z.object({ name: z.string().min(1), type: z.enum(FILE_CHANGE_TYPES as [FileChange['type'], ...FileChange['type'][]]) });

/** The launcher's refusal in the provider's terms: a file error for the API, else a provider error. */
function launcherFailure(provider: string, error: unknown, ref: SandboxRef, path: string): Error {
  if (error instanceof StreamRefusedError) {
    const code = (FILE_ERROR_CODES as readonly string[]).includes(error.code) ? (error.code as FileErrorCode) : 'io_error';
    return new SandboxFileError(code, error.message, path);
  }
  if (error instanceof ChannelLostError) return new ProviderError(provider, error.message, { sandbox: ref.id });
  return error as Error;
}

/**
 * A directory watch by the launcher of `connection` (ADR 51): its changes, one JSON line each on
 * the stream. `onEnd` is called once when the watch ends, by close or not.
 */
export async function launcherWatch(provider: string, connection: Connection, ref: SandboxRef, path: string, options: { recursive?: boolean }, onEnd = () => undefined as void): Promise<FileWatch> {
  connection.requireProtocol(PROTOCOL_WITH_ADR_51, 'files.watch (watching a directory)', 'files.watch');
  let opened: { reply: Record<string, unknown>; stream: ChannelStream };
  try {
    opened = await connection.openStream('file', { op: 'watch', path, recursive: options.recursive ?? false }, FILE_WAIT_MS);
  } catch (error) {
    throw launcherFailure(provider, error, ref, path);
  }
  const { reply, stream } = opened;
  let closed = false;
  let ended = false;
  const end = () => {
    if (!ended) onEnd();
    ended = true;
  };
  async function* changes(): AsyncGenerator<FileChange> {
    // The stream's room is given back to the launcher as the changes are read.
    let partial = '';
    try {
      for await (const chunk of stream as AsyncIterable<Buffer>) {
        const lines = (partial + chunk.toString('utf8')).split('\n');
        partial = lines.pop()!;
        for (const line of lines) {
          const change = changeSchema.safeParse(safeParse(line));
          if (!change.success) throw new ProviderError(provider, `the launcher sent a change ${line.slice(0, 200)}`, { sandbox: ref.id });
          yield change.data;
        }
      }
    } catch (error) {
      if (closed) return;
      throw launcherFailure(provider, error, ref, path);
    } finally {
      stream.destroy();
      end();
    }
    // The launcher ends a watch only with an error; a stream that just ended lost its sandbox.
    if (!closed) throw new ProviderError(provider, 'the watch ended with its sandbox', { sandbox: ref.id });
  }
  return {
    info: fileInfo(infoReply.parse(reply).info),
    changes: changes(),
    close: () => {
      closed = true;
      stream.destroy();
      end();
    },
  };
}

export function launcherFiles(provider: string, connectionOf: (ref: SandboxRef) => Promise<Connection>): SandboxFiles {
  const failure = (error: unknown, ref: SandboxRef, path: string): Error => launcherFailure(provider, error, ref, path);
  const ask = async <T extends z.ZodType>(ref: SandboxRef, request: Record<string, unknown> & { path: string }, schema: T): Promise<z.output<T>> => {
    const connection = await connectionOf(ref);
    let answer: unknown;
    try {
      answer = await connection.file(request, FILE_WAIT_MS);
    } catch (error) {
      throw failure(error, ref, request.path);
    }
    const refused = refusedReply.safeParse(answer);
    if (refused.success) throw failure(new StreamRefusedError(refused.data.error, refused.data.message), ref, request.path);
    const parsed = schema.safeParse(answer);
    if (!parsed.success) throw new ProviderError(provider, `the launcher answered ${JSON.stringify(answer).slice(0, 200)}`, { sandbox: ref.id });
    return parsed.data;
  };
  const stream = async (ref: SandboxRef, request: Record<string, unknown> & { path: string }): Promise<{ info: FileInfo; body: Readable }> => {
    const connection = await connectionOf(ref);
    try {
      const { reply, stream } = await connection.openStream('file', request, FILE_WAIT_MS);
      return { info: fileInfo(infoReply.parse(reply).info), body: stream };
    } catch (error) {
      throw failure(error, ref, request.path);
    }
  };
  return {
    stat: async (ref, path) => fileInfo((await ask(ref, { op: 'stat', path }, infoReply)).info),
    list: async (ref, path) => {
      const { entries, omitted } = await ask(ref, { op: 'list', path }, listReply);
      return { entries: entries.map(fileInfo), omitted };
    },
    read: (ref, path) => stream(ref, { op: 'read', path }),
    archive: (ref, path) => stream(ref, { op: 'tar', path }),
    write: async (ref, path, body, options) => {
      const connection = await connectionOf(ref);
      try {
        const { stream } = await connection.openStream('file', { op: 'write', path, ...(options.mode !== undefined ? { mode: options.mode } : {}), parents: options.parents ?? false }, FILE_WAIT_MS);
        await pipeline(body, stream);
        return fileInfo(infoReply.parse(await stream.ended).info);
      } catch (error) {
        throw failure(error, ref, path);
      }
    },
    mkdir: async (ref, path, options) => fileInfo((await ask(ref, { op: 'mkdir', path, parents: options.parents ?? false }, infoReply)).info),
    remove: async (ref, path, options) => {
      await ask(ref, { op: 'remove', path, recursive: options.recursive ?? false }, z.object({}));
    },
    move: async (ref, from, to, options) => fileInfo((await ask(ref, { op: 'move', path: from, to, overwrite: options.overwrite ?? false }, infoReply)).info),
    watch: async (ref, path, options) => launcherWatch(provider, await connectionOf(ref), ref, path, options),
  };
}

function safeParse(line: string): unknown {
  try {
    return JSON.parse(line);
  } catch {
    return undefined;
  }
}

/** A TCP connection to `port` on the sandbox's loopback, made by its launcher. */
export async function launcherTunnel(provider: string, connection: Connection, ref: SandboxRef, port: number): Promise<Duplex> {
  try {
    return (await connection.openStream('tunnel', { port }, FILE_WAIT_MS)).stream;
  } catch (error) {
    if (error instanceof StreamRefusedError && error.code === 'refused') throw new PortClosedError(port, error.message);
    if (error instanceof StreamRefusedError || error instanceof ChannelLostError) throw new ProviderError(provider, error.message, { sandbox: ref.id, port });
    throw error;
  }
}
