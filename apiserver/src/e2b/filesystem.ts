import type { IncomingMessage, ServerResponse } from 'node:http';
import { posix } from 'node:path';
import { PassThrough, type Readable } from 'node:stream';
import { once } from 'node:events';
import { pipeline } from 'node:stream/promises';
import { randomUUID } from 'node:crypto';
import { ApiError, ProviderError, WORKSPACE_ROOT, type FileChange, type FileInfo, type FileWatch, type Principal } from '@berth/common';
import { Gauge, type Registry } from 'prom-client';
import { z } from 'zod';
import type { FileService } from '../services/files.js';
import { ConnectError, sendUnary, ServerStream, toConnectError, type ConnectCode } from './connect.js';

/**
 * envd's `filesystem` service (spec/envd/filesystem/filesystem.proto of e2b-dev/E2B, Apache-2.0)
 * and its `GET/POST /files`, over Berth's files capability (ADR 40, ADR 44). Berth confines files
 * to /workspace; E2B's SDKs use absolute paths with the default user's home, /home/user. So:
 * /home/user (and paths under it) and relative paths name /workspace (and paths under it),
 * /workspace names itself, any other path is refused with `permission_denied` (403 on /files).
 * Answers name /workspace's entries under /home/user again, so a path written is the path read.
 */

export const E2B_HOME = '/home/user';
/** The deepest ListDir answered (each level is one listing of every directory in it). */
export const MAX_LIST_DEPTH = 10;
/** Entries of one ListDir at most, across its levels. */
export const MAX_LIST_ENTRIES = 10_000;
/** Changes a polling watcher (CreateWatcher) keeps until GetWatcherEvents takes them; past that the sandbox holds the rest. */
export const MAX_WATCHER_EVENTS = 10_000;
/** A polling watcher nobody asked for its changes this long is removed (a client that never calls RemoveWatcher). */
export const WATCHER_IDLE_MS = 10 * 60 * 1000;
/** Polling watchers open at once in this process, over every sandbox. */
export const MAX_WATCHERS = 1_000;

/** An E2B path as the sandbox's path under /workspace, or a refusal naming the rule. */
export function sandboxPathOf(e2bPath: string): string {
  if (e2bPath.includes('\0')) throw new ConnectError('invalid_argument', 'path: must not contain NUL');
  const absolute = posix.resolve(E2B_HOME, e2bPath);
  if (absolute === E2B_HOME || absolute.startsWith(`${E2B_HOME}/`)) return WORKSPACE_ROOT + absolute.slice(E2B_HOME.length);
  if (absolute === WORKSPACE_ROOT || absolute.startsWith(`${WORKSPACE_ROOT}/`)) return absolute;
  throw new ConnectError(
    'permission_denied',
    `path "${e2bPath}" (${absolute}) is outside the sandbox's files here: use ${E2B_HOME} (the workspace), a path under it, or a relative path`,
  );
}

/** A sandbox path under /workspace as the SDK sees it, under /home/user. */
export function e2bPathOf(sandboxPath: string): string {
  if (sandboxPath === WORKSPACE_ROOT) return E2B_HOME;
  if (sandboxPath.startsWith(`${WORKSPACE_ROOT}/`)) return E2B_HOME + sandboxPath.slice(WORKSPACE_ROOT.length);
  return sandboxPath;
}

const TYPE_NAMES = { file: 'FILE_TYPE_FILE', directory: 'FILE_TYPE_DIRECTORY', symlink: 'FILE_TYPE_SYMLINK', other: 'FILE_TYPE_UNSPECIFIED' } as const;

/** Go's os.FileMode.String() of an entry (`drwxr-xr-x`), as envd answers `permissions`. */
export function permissionsOf(info: Pick<FileInfo, 'type' | 'mode'>): string {
  const kind = info.type === 'directory' ? 'd' : info.type === 'symlink' ? 'L' : info.type === 'other' ? '?' : '-';
  const bits = 'rwxrwxrwx';
  let text = '';
  for (let i = 0; i < 9; i += 1) text += info.mode & (1 << (8 - i)) ? bits[i] : '-';
  return kind + text;
}

/** envd's EntryInfo in proto3 JSON (int64 as a string, the timestamp as RFC 3339). */
export function entryInfoOf(info: FileInfo) {
  return {
    name: info.name,
    type: TYPE_NAMES[info.type],
    path: e2bPathOf(info.path),
    size: String(info.size),
    mode: info.mode & 0o7777,
    permissions: permissionsOf(info),
    // Programs run as the sandbox's one user, root inside its gVisor sandbox (ADR 44).
    owner: 'root',
    group: 'root',
    modifiedTime: info.modifiedAt,
    ...(info.target !== undefined ? { symlinkTarget: info.target } : {}),
  };
}

/** Why the files capability refused (ApiError details.reason of the file service) in Connect's terms. */
const REASON_CODES: Record<string, ConnectCode> = {
  outside: 'permission_denied',
  forbidden: 'permission_denied',
  not_found: 'not_found',
  exists: 'already_exists',
  not_directory: 'invalid_argument',
  is_directory: 'invalid_argument',
  bad_request: 'invalid_argument',
  not_empty: 'failed_precondition',
  no_space: 'resource_exhausted',
  io_error: 'internal',
};

export function fileConnectError(error: unknown): unknown {
  if (error instanceof ApiError && typeof error.details.reason === 'string' && REASON_CODES[error.details.reason]) {
    return new ConnectError(REASON_CODES[error.details.reason]!, error.message);
  }
  return error instanceof ApiError ? toConnectError(error) : error;
}

/** The HTTP status of a Connect code on `/files` (envd's REST routes answer `{code, message}`). */
const HTTP_STATUS: Partial<Record<ConnectCode, number>> = {
  invalid_argument: 400,
  not_found: 404,
  already_exists: 409,
  permission_denied: 403,
  failed_precondition: 400,
  resource_exhausted: 507,
  unauthenticated: 401,
  unimplemented: 501,
  unavailable: 503,
};
export function httpStatusOf(error: ConnectError): number {
  return HTTP_STATUS[error.code] ?? 500;
}

const pathSchema = z.string().min(1).max(4096);
const statSchema = z.object({ path: pathSchema }).strict();
const makeDirSchema = z.object({ path: pathSchema }).strict();
const removeSchema = z.object({ path: pathSchema }).strict();
const moveSchema = z.object({ source: pathSchema, destination: pathSchema }).strict();
const listDirSchema = z.object({ path: pathSchema, depth: z.number().int().min(0).max(MAX_LIST_DEPTH).optional() }).strict();
/** WatchDirRequest and CreateWatcherRequest: envd 0.6.3's includeEntry is refused (an entry per event is not offered); no path is a network mount here. */
const watchSchema = z.object({ path: pathSchema, recursive: z.boolean().optional(), includeEntry: z.boolean().optional(), allowNetworkMounts: z.boolean().optional() }).strict();
const watcherSchema = z.object({ watcherId: z.string().min(1).max(200) }).strict();

/** A message with its snake_case keys in proto3 JSON's lowerCamelCase (a parser takes both). */
export function camelCased(message: unknown): unknown {
  if (typeof message !== 'object' || message === null || Array.isArray(message)) return message;
  return Object.fromEntries(Object.entries(message).map(([key, value]) => [key.replace(/_([a-z])/g, (_, letter: string) => letter.toUpperCase()), value]));
}

const EVENT_TYPES = { create: 'EVENT_TYPE_CREATE', write: 'EVENT_TYPE_WRITE', remove: 'EVENT_TYPE_REMOVE', rename: 'EVENT_TYPE_RENAME', chmod: 'EVENT_TYPE_CHMOD' } as const;

/** envd's FilesystemEvent in proto3 JSON: the name relative to the watched directory, as envd gives it. */
export function filesystemEventOf(change: FileChange) {
  return { name: change.name, type: EVENT_TYPES[change.type] };
}

function parse<T>(schema: z.ZodType<T>, message: unknown): T {
  const result = schema.safeParse(message);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    throw new ConnectError('invalid_argument', `${issue.path.join('.') || 'message'}: ${issue.message}`);
  }
  return result.data;
}

/** The boundary of a `multipart/form-data` body, or undefined for another content type. */
export function boundaryOf(contentType: string | undefined): string | undefined {
  const match = /^multipart\/form-data\s*;.*\bboundary=(?:"([^"]+)"|([^;\s]+))/i.exec(contentType ?? '');
  return match ? (match[1] ?? match[2]) : undefined;
}

/** A part's file name (`Content-Disposition: form-data; name="file"; filename="…"`). */
function filenameOf(headers: string): string | undefined {
  const match = /content-disposition:[^\r\n]*\bfilename="((?:[^"\\]|\\.)*)"/i.exec(headers);
  return match ? match[1]!.replace(/\\(.)/g, '$1') : undefined;
}

/**
 * The parts of a multipart body as they stream in: each part's headers, then its bytes through
 * `onPart`'s stream, which the caller consumes before the next part is read (only a window of the
 * body is ever held here).
 */
export async function readMultipart(body: AsyncIterable<Buffer>, boundary: string, onPart: (headers: string, data: Readable) => Promise<void>): Promise<number> {
  const delimiter = Buffer.from(`\r\n--${boundary}`);
  // The body starts with `--boundary` (no CRLF before it): prefix one so every delimiter looks alike.
  let buffer = Buffer.from('\r\n');
  let state = 'preamble' as 'preamble' | 'headers' | 'data' | 'done';
  let part: { stream: PassThrough; done: Promise<void> } | undefined;
  let parts = 0;
  const feed = async (chunk: Buffer) => {
    if (chunk.length === 0 || !part) return;
    if (!part.stream.write(chunk)) await Promise.race([once(part.stream, 'drain'), part.done]);
  };
  const step = async (): Promise<boolean> => {
    if (state === 'preamble' || state === 'data') {
      const at = buffer.indexOf(delimiter);
      if (at < 0) {
        // Keep what could be the start of a delimiter; the rest is the part's.
        const keep = Math.min(buffer.length, delimiter.length - 1);
        if (state === 'data') await feed(buffer.subarray(0, buffer.length - keep));
        buffer = buffer.subarray(buffer.length - keep);
        return false;
      }
      const after = buffer.subarray(at + delimiter.length);
      // What follows the delimiter (`--` for the last, else CRLF) is not here yet.
      if (after.length < 2) return false;
      if (state === 'data') {
        await feed(buffer.subarray(0, at));
        part!.stream.end();
        await part!.done;
        part = undefined;
      }
      if (after.subarray(0, 2).toString() === '--') {
        state = 'done';
        return false;
      }
      buffer = after;
      state = 'headers';
      return true;
    }
    if (state === 'headers') {
      const end = buffer.indexOf('\r\n\r\n');
      if (end < 0) {
        if (buffer.length > 16 * 1024) throw new ConnectError('invalid_argument', 'a multipart part has headers longer than 16 KiB');
        return false;
      }
      const headers = buffer.subarray(0, end).toString('utf8');
      buffer = buffer.subarray(end + 4);
      const stream = new PassThrough();
      // A part ended by a failure (destroyed with it) whose writer had already refused has no reader left.
      stream.on('error', () => undefined);
      parts += 1;
      part = { stream, done: onPart(headers, stream) };
      // A refusal before the part's bytes are read ends the upload with it.
      part.done.catch(() => undefined);
      state = 'data';
      return true;
    }
    return false;
  };
  try {
    for await (const chunk of body) {
      if (state === 'done') continue;
      buffer = Buffer.concat([buffer, chunk]);
      while (await step());
    }
    if (state !== 'done') throw new ConnectError('invalid_argument', 'the multipart body ended before its closing boundary');
  } catch (error) {
    part?.stream.destroy(error as Error);
    if (part) await part.done.catch(() => undefined);
    throw error;
  }
  return parts;
}

/** Why a watch ended, in Connect's terms: its sandbox going away is `unavailable`, as envd's going away would be. */
function watchEndedError(error: unknown): ConnectError {
  if (error instanceof ProviderError) return new ConnectError('unavailable', `the watch ended: ${error.message}`);
  return toConnectError(fileConnectError(error));
}

/** A polling watcher (CreateWatcher): its changes gathered here until GetWatcherEvents takes them. */
interface Watcher {
  agentId: string;
  watch: FileWatch;
  events: FileChange[];
  /** Wakes the gathering once GetWatcherEvents made room. */
  room?: () => void;
  /** Why the watch ended, told by the next GetWatcherEvents after the changes before it. */
  failure?: ConnectError;
  idle: NodeJS.Timeout;
}

export function createFilesystemService(deps: { files: FileService; metrics: Registry }) {
  const { files } = deps;
  const watchers = new Map<string, Watcher>();
  new Gauge({
    name: 'berth_e2b_watchers_open',
    help: 'envd polling watchers (CreateWatcher) open now in this process',
    registers: [deps.metrics],
    collect() {
      this.set(watchers.size);
    },
  });

  async function run<T>(operation: () => Promise<T>): Promise<T> {
    try {
      return await operation();
    } catch (error) {
      throw fileConnectError(error);
    }
  }

  async function listDeep(principal: Principal, agentId: string, path: string, depth: number): Promise<FileInfo[]> {
    const found: FileInfo[] = [];
    let level = [path];
    for (let d = 0; d < depth && level.length > 0; d += 1) {
      const next: string[] = [];
      for (const directory of level) {
        const { entries } = await files.list(principal, agentId, directory);
        for (const entry of entries) {
          found.push(entry);
          if (found.length > MAX_LIST_ENTRIES) throw new ConnectError('resource_exhausted', `more than ${MAX_LIST_ENTRIES} entries: list with a smaller depth`);
          if (entry.type === 'directory') next.push(entry.path);
        }
      }
      level = next;
    }
    return found;
  }

  /** Opens a watch for WatchDir or CreateWatcher, from its request. */
  async function openWatch(principal: Principal, agentId: string, message: unknown): Promise<FileWatch> {
    const request = parse(watchSchema, camelCased(message));
    if (request.includeEntry) throw new ConnectError('unimplemented', 'includeEntry: events carry their name and type here, not the entry (Stat the name for it)');
    const path = sandboxPathOf(request.path);
    return run(() => files.watch(principal, agentId, path, request.recursive ?? false));
  }

  function removeWatcher(id: string): void {
    const watcher = watchers.get(id);
    if (!watcher) return;
    watchers.delete(id);
    clearTimeout(watcher.idle);
    watcher.watch.close();
    watcher.room?.();
  }

  function watcherOf(agentId: string, message: unknown): { id: string; watcher: Watcher } {
    const { watcherId } = parse(watcherSchema, camelCased(message));
    const watcher = watchers.get(watcherId);
    if (!watcher || watcher.agentId !== agentId) throw new ConnectError('not_found', `watcher "${watcherId}" not found (a watcher lives in the Berth process that created it, and ends unpolled after ${WATCHER_IDLE_MS / 60_000} minutes)`);
    return { id: watcherId, watcher };
  }

  /** Gathers a polling watcher's changes until it is removed or its watch ends. */
  async function gather(id: string, watcher: Watcher): Promise<void> {
    try {
      for await (const change of watcher.watch.changes) {
        watcher.events.push(change);
        while (watcher.events.length >= MAX_WATCHER_EVENTS && watchers.get(id) === watcher) await new Promise<void>((resolve) => (watcher.room = resolve));
        if (watchers.get(id) !== watcher) return;
      }
    } catch (error) {
      watcher.failure = watchEndedError(error);
    }
    watcher.failure ??= new ConnectError('unavailable', 'the watch ended with its sandbox');
  }

  return {
    /**
     * WatchDir: `start`, then each change as a `filesystem` event, with `keepalive` events between
     * (`Keepalive-Ping-Interval`); it ends when the client closes it, or with an error when the
     * directory itself went or the sandbox paused or ended.
     */
    async watchDir(res: ServerResponse, principal: Principal, agentId: string, message: unknown, keepaliveMs: number): Promise<void> {
      const watch = await openWatch(principal, agentId, message);
      const stream = new ServerStream(res);
      const keepalive = setInterval(() => stream.send({ keepalive: {} }), keepaliveMs);
      const stop = () => {
        clearInterval(keepalive);
        watch.close();
      };
      res.once('close', stop);
      // WatchDirResponse's oneof is the message's own field (a process stream's is inside `event`).
      stream.send({ start: {} });
      try {
        for await (const change of watch.changes) stream.send({ filesystem: filesystemEventOf(change) });
        stream.end(stream.open ? new ConnectError('unavailable', 'the watch ended with its sandbox') : undefined);
      } catch (error) {
        stream.end(watchEndedError(error));
      } finally {
        stop();
      }
    },

    /** A unary procedure of `filesystem.Filesystem`. */
    async call(res: ServerResponse, principal: Principal, agentId: string, method: string, message: unknown): Promise<void> {
      switch (method) {
        case 'Stat': {
          const { path } = parse(statSchema, message);
          const info = await run(() => files.stat(principal, agentId, sandboxPathOf(path)));
          sendUnary(res, { entry: entryInfoOf(info) });
          return;
        }
        case 'MakeDir': {
          // envd makes missing parents and answers already_exists when the directory is there.
          const path = sandboxPathOf(parse(makeDirSchema, message).path);
          const existing = await run(() => files.stat(principal, agentId, path)).catch((error: unknown) => {
            if (error instanceof ConnectError && error.code === 'not_found') return undefined;
            throw error;
          });
          if (existing) throw new ConnectError(existing.type === 'directory' ? 'already_exists' : 'invalid_argument', `${e2bPathOf(path)} exists already${existing.type === 'directory' ? '' : ' and is not a directory'}`);
          const info = await run(() => files.mkdir(principal, agentId, path, true));
          sendUnary(res, { entry: entryInfoOf(info) });
          return;
        }
        case 'Move': {
          const { source, destination } = parse(moveSchema, message);
          // As envd's rename: what is at the destination is replaced.
          const info = await run(() => files.move(principal, agentId, sandboxPathOf(source), sandboxPathOf(destination), true));
          sendUnary(res, { entry: entryInfoOf(info) });
          return;
        }
        case 'ListDir': {
          const request = parse(listDirSchema, message);
          const path = sandboxPathOf(request.path);
          const root = await run(() => files.stat(principal, agentId, path));
          if (root.type !== 'directory') throw new ConnectError('invalid_argument', `${request.path} is not a directory`);
          const entries = await run(() => listDeep(principal, agentId, root.path, Math.max(1, request.depth ?? 1)));
          sendUnary(res, { entries: entries.map(entryInfoOf) });
          return;
        }
        case 'Remove': {
          const path = sandboxPathOf(parse(removeSchema, message).path);
          if (path === WORKSPACE_ROOT) throw new ConnectError('permission_denied', `${E2B_HOME} (the workspace) itself cannot be removed`);
          // envd removes a directory with everything in it (os.RemoveAll).
          await run(() => files.remove(principal, agentId, path, true));
          sendUnary(res, {});
          return;
        }
        case 'WatchDir':
          throw new ConnectError('invalid_argument', 'filesystem.Filesystem/WatchDir is a server stream: send it as application/connect+json');
        case 'CreateWatcher': {
          if (watchers.size >= MAX_WATCHERS) throw new ConnectError('resource_exhausted', `${MAX_WATCHERS} watchers are open here: remove one (RemoveWatcher) first`);
          const watch = await openWatch(principal, agentId, message);
          const id = randomUUID();
          const watcher: Watcher = { agentId, watch, events: [], idle: setTimeout(() => removeWatcher(id), WATCHER_IDLE_MS) };
          watcher.idle.unref();
          watchers.set(id, watcher);
          void gather(id, watcher);
          sendUnary(res, { watcherId: id });
          return;
        }
        case 'GetWatcherEvents': {
          const { id, watcher } = watcherOf(agentId, message);
          watcher.idle.refresh();
          const events = watcher.events.splice(0);
          watcher.room?.();
          if (events.length === 0 && watcher.failure) {
            removeWatcher(id);
            throw watcher.failure;
          }
          sendUnary(res, { events: events.map(filesystemEventOf) });
          return;
        }
        case 'RemoveWatcher':
          removeWatcher(watcherOf(agentId, message).id);
          sendUnary(res, {});
          return;
        default:
          throw new ConnectError('unimplemented', `filesystem.Filesystem/${method} is not a method of envd's filesystem service`);
      }
    },

    /** `GET /files?path=`: the file's bytes, streamed. */
    async download(res: ServerResponse, principal: Principal, agentId: string, query: URLSearchParams): Promise<void> {
      const path = query.get('path');
      if (!path) throw new ConnectError('invalid_argument', 'path: required');
      const { info, body } = await run(() => files.read(principal, agentId, sandboxPathOf(path)));
      res.writeHead(200, {
        'content-type': 'application/octet-stream',
        'content-length': String(info.size),
        'content-disposition': `attachment; filename*=UTF-8''${encodeURIComponent(info.name)}`,
      });
      await pipeline(body, res);
    },

    /**
     * `POST /files` (multipart/form-data, as envd below 0.5.7 takes it, and as the SDKs send by
     * default): each part named `file` is written to `?path=`, or to its file name when no path
     * is given (a write of several files); answers the written entries `[{name, type, path}]`.
     */
    async upload(req: IncomingMessage, res: ServerResponse, principal: Principal, agentId: string, query: URLSearchParams): Promise<void> {
      const boundary = boundaryOf(req.headers['content-type']);
      if (!boundary) throw new ConnectError('invalid_argument', 'Content-Type: multipart/form-data with a boundary expected (envd 0.5.2 takes uploads as multipart)');
      if (req.headers['content-encoding'] !== undefined && req.headers['content-encoding'] !== 'identity') throw new ConnectError('invalid_argument', 'Content-Encoding: uploads are taken unencoded here');
      const target = query.get('path') ?? undefined;
      const written: { name: string; type: 'file'; path: string }[] = [];
      const parts = await readMultipart(req as AsyncIterable<Buffer>, boundary, async (headers, data) => {
        const name = filenameOf(headers);
        const path = target ?? name;
        if (!path) throw new ConnectError('invalid_argument', 'a part without a file name, and no ?path= to write it to');
        if (target !== undefined && written.length > 0) throw new ConnectError('invalid_argument', 'several files with one ?path=: send their paths as their file names');
        // envd makes the directories above a written file.
        const info = await run(() => files.write(principal, agentId, sandboxPathOf(path), data, { parents: true }));
        written.push({ name: info.name, type: 'file', path: e2bPathOf(info.path) });
      });
      if (parts === 0) throw new ConnectError('invalid_argument', 'no file in the multipart body');
      sendUnary(res, written);
    },
  };
}
export type FilesystemService = ReturnType<typeof createFilesystemService>;
