import { BerthStreamError } from './errors.js';
import type { RawBody, RequestOptions, Transport } from './http.js';
import { readEvents } from './sse.js';
import type { ResponseOf } from './types.js';

const path = (id: string, rest: string) => `/v1/agents/${encodeURIComponent(id)}${rest}`;

/** One entry of a sandbox's filesystem: its type, size, permission bits, modification time. */
export type FileInfo = ResponseOf<'/v1/agents/{id}/files/stat', 'get', 200>;
/** A directory's entries (at most 5000; `omitted` counts the rest). */
export type FileListing = ResponseOf<'/v1/agents/{id}/files/list', 'get', 200>;
/** A port exposed through the API server's proxy. */
export type ExposedPort = ResponseOf<'/v1/agents/{id}/ports', 'get', 200>['data'][number];
/** A token for browsers, and the URL that turns it into a cookie. */
export type PortToken = ResponseOf<'/v1/agents/{id}/ports/{port}/token', 'post', 201>;

/** A change in a watched directory: `name` relative to it; a rename is the old name's `rename` and the new name's `create`. */
export interface FileChange {
  seq: number;
  name: string;
  type: 'create' | 'write' | 'remove' | 'rename' | 'chmod';
}

/** What a file is written from: its bytes whole, or a stream (a web ReadableStream, a Node Readable) sent as it is read. */
export type FileData = RawBody;

export interface WriteFileOptions extends RequestOptions {
  /** Permission bits, a number (`0o755`) or octal text (`'755'`); default 644. */
  mode?: number | string;
  /** Make the missing directories above it. */
  parents?: boolean;
}

/** An upload may take as long as its bytes do: the time limit of one is an hour unless given. */
const UPLOAD_TIMEOUT_MS = 60 * 60 * 1000;

function octal(mode: number | string): string {
  return typeof mode === 'number' ? mode.toString(8) : mode;
}

/**
 * The files of one agent's sandbox (`agent.files`). Paths are relative to /workspace or absolute
 * under it; the API refuses one that leaves it. An agent paused by its idle policy is woken by
 * any of these calls.
 */
export class Files {
  constructor(
    private readonly transport: Transport,
    private readonly agentId: string,
  ) {}

  /** Writes `data` to `path` (replacing a file there): whole or not at all, streamed when `data` is a stream. */
  write(filePath: string, data: FileData, options: WriteFileOptions = {}): Promise<FileInfo> {
    const { mode, parents, ...request } = options;
    return this.transport.request<FileInfo>({
      method: 'PUT',
      path: path(this.agentId, '/files'),
      query: { path: filePath, ...(mode !== undefined ? { mode: octal(mode) } : {}), ...(parents !== undefined ? { parents } : {}) },
      rawBody: data,
      timeoutMs: UPLOAD_TIMEOUT_MS,
      ...request,
    });
  }

  /** The file's bytes as a stream, read as they come from the sandbox (the time limit covers only its start). */
  async read(filePath: string, options: RequestOptions = {}): Promise<ReadableStream<Uint8Array>> {
    const response = await this.transport.open({ method: 'GET', path: path(this.agentId, '/files'), query: { path: filePath }, accept: 'application/octet-stream', ...options });
    return response.body!;
  }

  /** The file's bytes, whole. */
  async readBytes(filePath: string, options: RequestOptions = {}): Promise<Uint8Array> {
    return new Uint8Array(await new Response(await this.read(filePath, options)).arrayBuffer());
  }

  /** The file as UTF-8 text. */
  async readText(filePath: string, options: RequestOptions = {}): Promise<string> {
    return new Response(await this.read(filePath, options)).text();
  }

  /** A directory's entries by name (default /workspace). */
  list(directory?: string, options: RequestOptions = {}): Promise<FileListing> {
    return this.transport.request<FileListing>({ method: 'GET', path: path(this.agentId, '/files/list'), query: { path: directory }, ...options });
  }

  /** One entry (symlinks followed). */
  stat(filePath: string, options: RequestOptions = {}): Promise<FileInfo> {
    return this.transport.request<FileInfo>({ method: 'GET', path: path(this.agentId, '/files/stat'), query: { path: filePath }, ...options });
  }

  /** Makes a directory; with `parents` the ones above it too (and an existing one is no error). */
  mkdir(directory: string, options: RequestOptions & { parents?: boolean } = {}): Promise<FileInfo> {
    const { parents, ...request } = options;
    return this.transport.request<FileInfo>({ method: 'POST', path: path(this.agentId, '/files/mkdir'), body: { path: directory, ...(parents !== undefined ? { parents } : {}) }, ...request });
  }

  /** Renames `from` to `to`; refused when `to` exists, unless `overwrite`. */
  move(from: string, to: string, options: RequestOptions & { overwrite?: boolean } = {}): Promise<FileInfo> {
    const { overwrite, ...request } = options;
    return this.transport.request<FileInfo>({ method: 'POST', path: path(this.agentId, '/files/move'), body: { from, to, ...(overwrite !== undefined ? { overwrite } : {}) }, ...request });
  }

  /** Removes a file, a symlink (never what it points to) or a directory (one with entries needs `recursive`). */
  async remove(filePath: string, options: RequestOptions & { recursive?: boolean } = {}): Promise<void> {
    const { recursive, ...request } = options;
    await this.transport.request({ method: 'DELETE', path: path(this.agentId, '/files'), query: { path: filePath, ...(recursive !== undefined ? { recursive } : {}) }, ...request });
  }

  /**
   * A directory's changes (default /workspace) as they happen in the sandbox, until the loop is
   * left (which closes the watch) or `signal` aborts it; `recursive` watches every directory under
   * it too. A watch ends with the agent's pause or end: a BerthStreamError (`provider_error`), as
   * when the directory itself is removed (`not_found`).
   */
  async *watch(directory?: string, options: RequestOptions & { recursive?: boolean } = {}): AsyncGenerator<FileChange> {
    const { recursive, signal, ...request } = options;
    const controller = new AbortController();
    const onAbort = () => controller.abort(signal!.reason);
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const response = await this.transport.open({
        method: 'GET',
        path: path(this.agentId, '/files/watch'),
        query: { path: directory, ...(recursive !== undefined ? { recursive } : {}) },
        accept: 'text/event-stream',
        signal: controller.signal,
        ...request,
      });
      for await (const message of readEvents(response.body!)) {
        if (message.event === 'heartbeat') continue;
        const data = JSON.parse(message.data) as Record<string, unknown>;
        if (message.event === 'error') throw new BerthStreamError(String(data.code), String(data.message), data);
        if (message.event === 'change') yield data as unknown as FileChange;
      }
    } finally {
      signal?.removeEventListener('abort', onAbort);
      controller.abort();
    }
  }

  /** A directory (default /workspace) as an uncompressed tar stream, members `./…`, made as it is read. */
  async archive(directory?: string, options: RequestOptions = {}): Promise<ReadableStream<Uint8Array>> {
    const response = await this.transport.open({ method: 'GET', path: path(this.agentId, '/files/archive'), query: { path: directory }, accept: 'application/x-tar', ...options });
    return response.body!;
  }
}

/**
 * The ports of one agent's sandbox (`agent.ports`): closed until exposed, then reachable at `url`
 * through the API server with the API key (`ports.fetch` sends it), or in a browser with a token.
 */
export class Ports {
  constructor(
    private readonly transport: Transport,
    private readonly agentId: string,
  ) {}

  /** Exposes `port` (a program in the sandbox listens on it); exposing one already exposed answers it again. */
  expose(port: number, options: RequestOptions = {}): Promise<ExposedPort> {
    return this.transport.request<ExposedPort>({ method: 'POST', path: path(this.agentId, '/ports'), body: { port }, idempotent: true, ...options });
  }

  async list(options: RequestOptions = {}): Promise<ExposedPort[]> {
    return (await this.transport.request<{ data: ExposedPort[] }>({ method: 'GET', path: path(this.agentId, '/ports'), ...options })).data;
  }

  /** Closes it: the proxy refuses it again (a WebSocket already open runs until it ends). */
  async close(port: number, options: RequestOptions = {}): Promise<void> {
    await this.transport.request({ method: 'DELETE', path: path(this.agentId, `/ports/${port}`), ...options });
  }

  /** A token valid one hour, for a browser: open its `url` (it becomes a cookie for the port's path). */
  token(port: number, options: RequestOptions = {}): Promise<PortToken> {
    return this.transport.request<PortToken>({ method: 'POST', path: path(this.agentId, `/ports/${port}/token`), body: {}, ...options });
  }

  /** The proxy URL of `port` (and of `rest` below it), as the server names it; requests to it need the API key. */
  url(port: number, rest = ''): string {
    return `${this.transport.baseUrl}${path(this.agentId, `/ports/${port}/proxy/`)}${rest.replace(/^\/+/, '')}`;
  }

  /** A request to the program on `port` through the proxy, with the API key; its answer as the program gave it. */
  fetch(port: number, rest = '', init: RequestInit = {}): Promise<Response> {
    return this.transport.fetchUrl(this.url(port, rest), init);
  }
}
