import { BerthConnectionError, BerthError, BerthStreamError } from './errors.js';
import type { Transport } from './http.js';

/** What the SDK needs of a WebSocket: the WHATWG interface (the global one, or the `ws` package's). */
export interface WebSocketLike {
  binaryType: string;
  send(data: string | Uint8Array): void;
  close(code?: number, reason?: string): void;
  onopen: ((event: unknown) => void) | null;
  onmessage: ((event: { data: unknown }) => void) | null;
  onclose: ((event: { code: number; reason: unknown }) => void) | null;
  onerror: ((event: unknown) => void) | null;
}

export type WebSocketConstructor = new (url: string) => WebSocketLike;

export interface TerminalOptions {
  /** The program and its arguments (default bash). */
  argv?: string[];
  rows?: number;
  cols?: number;
  /** Working directory, as for exec. */
  cwd?: string;
  /** A WebSocket class; default the global one (Node 22+, browsers). On Node 20 pass `ws`'s. */
  WebSocket?: WebSocketConstructor;
  /** Called with each piece of the terminal's output, from the first. */
  onData?: (data: Uint8Array) => void;
}

/** A terminal in the sandbox (`GET /v1/agents/{id}/pty`): bytes in and out, resizable. */
export interface Terminal {
  write(data: string | Uint8Array): void;
  resize(rows: number, cols: number): void;
  /** Closes the connection, which ends the program. */
  close(): void;
  /** Resolves with the program's exit code; rejects when the terminal failed or the connection was lost. */
  readonly exit: Promise<{ exitCode: number }>;
}

function toBytes(data: unknown): Uint8Array {
  if (data instanceof Uint8Array) return data;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  throw new BerthError('unexpected WebSocket message');
}

/**
 * Opens a terminal with a one-use token (`POST /v1/agents/{id}/pty/token`), so the API key never
 * travels in a URL and the same code works where WebSockets cannot carry headers.
 */
export async function openTerminal(transport: Transport, agentId: string, options: TerminalOptions): Promise<Terminal> {
  const Socket = options.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
  if (!Socket) throw new BerthError('no WebSocket in this runtime: pass { WebSocket } (e.g. from the ws package)');
  const { path } = await transport.request<{ path: string }>({ method: 'POST', path: `/v1/agents/${encodeURIComponent(agentId)}/pty/token`, body: {}, idempotent: true });
  const url = new URL(`${transport.baseUrl}${path}`);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  for (const arg of options.argv ?? []) url.searchParams.append('argv', arg);
  if (options.rows !== undefined) url.searchParams.set('rows', String(options.rows));
  if (options.cols !== undefined) url.searchParams.set('cols', String(options.cols));
  if (options.cwd !== undefined) url.searchParams.set('cwd', options.cwd);

  const socket = new Socket(url.toString());
  socket.binaryType = 'arraybuffer';
  let settle!: { resolve: (value: { exitCode: number }) => void; reject: (error: Error) => void };
  const exit = new Promise<{ exitCode: number }>((resolve, reject) => (settle = { resolve, reject }));
  exit.catch(() => undefined); // observed by whoever awaits it; never an unhandled rejection
  let ended = false;
  const finish = (outcome: { exitCode: number } | Error) => {
    if (ended) return;
    ended = true;
    if (outcome instanceof Error) settle.reject(outcome);
    else settle.resolve(outcome);
  };
  socket.onmessage = ({ data }) => {
    if (typeof data === 'string') {
      const control = JSON.parse(data) as { type: string; exitCode?: number; code?: string; message?: string };
      if (control.type === 'exit') finish({ exitCode: control.exitCode ?? -1 });
      else if (control.type === 'error') finish(new BerthStreamError(control.code ?? 'terminal_error', control.message ?? 'the terminal failed'));
      return;
    }
    options.onData?.(toBytes(data));
  };
  await new Promise<void>((resolve, reject) => {
    socket.onopen = () => resolve();
    socket.onerror = () => reject(new BerthConnectionError(`the terminal of ${agentId} was refused or could not connect`));
  });
  socket.onerror = () => finish(new BerthConnectionError(`the terminal connection of ${agentId} failed`));
  socket.onclose = ({ code }) => finish(new BerthConnectionError(`the terminal connection of ${agentId} closed (${code}) before the program exited`));
  return {
    write: (data) => socket.send(typeof data === 'string' ? new TextEncoder().encode(data) : data),
    resize: (rows, cols) => socket.send(JSON.stringify({ type: 'resize', rows, cols })),
    close: () => socket.close(1000),
    exit,
  };
}
