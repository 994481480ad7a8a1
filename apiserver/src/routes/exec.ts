import { ApiError, PROCESS_SIGNALS } from '@berth/common';
import { z } from 'zod';
import { toApiError } from '../http/errors.js';
import { defineRoute, type RouteTable } from '../http/route.js';
import { openEventStream } from '../http/sse.js';
import type { TerminalTokens } from '../http/terminal.js';
import type { AgentService } from '../services/agents.js';
import { backgroundOutputSchema, backgroundProcessSchema, execStreamBody, idParam } from './schemas.js';

/**
 * Exec beside the spec's synchronous route (ADR 39): streamed over SSE, background processes,
 * and a terminal over WebSocket (its upgrade is served by http/terminal.ts; the GET here documents
 * it and answers a request that is not an upgrade).
 */

const pidParams = z
  .object({
    id: z.string().min(1).max(128).describe('agent id (`agt_…`)'),
    pid: z
      .string()
      .regex(/^[0-9]{1,9}$/, 'a process id in decimal digits')
      .transform(Number)
      .describe('the process id that `background: true` answered'),
  })
  .strict();

const processExample = {
  pid: 7,
  argv: ['python3', '-u', '/run/berth/exec/0b7c3e52-2d5f-4a3e-9d0e-5f4c1b2a3d4e.py'],
  startedAt: '2026-11-23T16:58:02.412Z',
  status: 'running' as const,
  exitCode: null,
  endedAt: null,
};
const endedExample = { ...processExample, status: 'exited' as const, exitCode: 0, endedAt: '2026-11-23T16:58:09.101Z' };

export const STREAM_EVENTS_DESCRIPTION =
  'Events: `stdout` and `stderr` (`{seq, data}`: a chunk as it came, `seq` counting every chunk of both streams from 1, also the SSE id), ' +
  '`exit` (`{exitCode, durationMs}`, the last event), `error` (`{code, message}` in the error envelope\'s terms, e.g. `timeout` at the limit, then the stream ends), and `heartbeat` every 15 s. ' +
  'Closing the connection kills the program (use `background: true` on the exec route for one that must outlive its client).';

export function execRoutes(table: RouteTable, agents: AgentService, options: { terminalTokens: TerminalTokens; heartbeatMs?: number | undefined }): void {
  const agentParam = idParam('agt', 'agent');
  table.add(
    defineRoute({
      method: 'post',
      path: '/v1/agents/:id/exec/stream',
      operationId: 'execInAgentStreamed',
      tag: 'Exec',
      summary: 'Run code with its output streamed (SSE)',
      description:
        "The synchronous exec's request (`language`, `code`, `env`, `cwd`, `stdin`) with the output sent as it comes, as a `text/event-stream`. No 120 s cap: `timeout` (seconds) when given, else the agent's remaining lifetime. " +
        STREAM_EVENTS_DESCRIPTION +
        ' Errors before the stream starts are answered as JSON (404, 409 for an agent without a ready sandbox, 422, 501 for a provider without streaming).',
      params: agentParam,
      body: execStreamBody,
      requestExample: { language: 'python', code: 'import time\nfor i in range(5):\n    print(i, flush=True)\n    time.sleep(1)' },
      responses: {
        200: {
          description: 'an event stream',
          contentType: 'text/event-stream',
          schema: z.object({ id: z.string().optional(), event: z.enum(['stdout', 'stderr', 'exit', 'error', 'heartbeat']), data: z.string() }),
          example: { id: '3', event: 'stdout', data: '{"seq":3,"data":"2\\n"}' },
        },
      },
      errors: ['not_found', 'unprocessable_entity', 'conflict', 'session_limit_exceeded', 'not_implemented', 'provider_error'],
      handler: async ({ req, res, principal, params, body }) => {
        const abort = new AbortController();
        let stream: ReturnType<typeof openEventStream> | undefined;
        let seq = 0;
        const send = (name: 'stdout' | 'stderr', chunk: Buffer) => {
          seq += 1;
          stream?.write(name, { seq, data: chunk.toString('utf8') }, String(seq));
        };
        try {
          const result = await agents.execStream(principal, params.id, body, {
            onOutput: send,
            signal: abort.signal,
            onStart: () => {
              stream = openEventStream(req, res, options.heartbeatMs);
              // The response's close, not the request's: a POST's request is done once its body was read.
              res.once('close', () => abort.abort());
            },
          });
          stream?.write('exit', { exitCode: result.exitCode, durationMs: result.durationMs });
        } catch (error) {
          if (!stream) throw error; // before the stream: the JSON error envelope
          const apiError = toApiError(error, req.log);
          stream.write('error', { code: apiError.code, message: apiError.message });
        }
        stream?.end();
      },
    }),
    defineRoute({
      method: 'get',
      path: '/v1/agents/:id/processes',
      operationId: 'listProcesses',
      tag: 'Exec',
      summary: 'List background processes',
      description: 'Processes started with `background: true`, running and recently ended (the last 64 ended are remembered), oldest first. They survive a pause and resume on the local provider.',
      params: agentParam,
      responses: { 200: { description: 'the processes', schema: z.object({ data: z.array(backgroundProcessSchema) }), example: { data: [processExample] } } },
      errors: ['not_found', 'conflict', 'not_implemented', 'provider_error'],
      handler: async ({ principal, params }) => ({ status: 200, body: { data: await agents.listBackground(principal, params.id) } }),
    }),
    defineRoute({
      method: 'post',
      path: '/v1/agents/:id/processes/:pid/signal',
      operationId: 'signalProcess',
      tag: 'Exec',
      summary: 'Send a signal to a background process',
      description: `Sends \`signal\` (${PROCESS_SIGNALS.join(', ')}) to the process's whole process group; answers with the process as it is right after. Signalling an ended process changes nothing.`,
      params: pidParams,
      body: z.object({ signal: z.enum(PROCESS_SIGNALS).describe('without the SIG prefix') }).strict(),
      requestExample: { signal: 'TERM' },
      responses: { 200: { description: 'the process', schema: backgroundProcessSchema, example: processExample } },
      errors: ['not_found', 'unprocessable_entity', 'conflict', 'not_implemented', 'provider_error'],
      handler: async ({ principal, params, body }) => ({ status: 200, body: await agents.signalBackground(principal, params.id, params.pid, body.signal) }),
    }),
    defineRoute({
      method: 'post',
      path: '/v1/agents/:id/processes/:pid/wait',
      operationId: 'waitProcess',
      tag: 'Exec',
      summary: 'Wait for a background process to end',
      description: 'Answers when the process ends, or after `timeout` seconds (default 30, at most 120) with it still `running`: call again to wait longer.',
      params: pidParams,
      body: z.object({ timeout: z.number().int().min(0).max(120).default(30).describe('seconds to wait at most (0: answer at once)') }).strict(),
      requestExample: { timeout: 30 },
      responses: { 200: { description: 'the process, ended or still running', schema: backgroundProcessSchema, example: endedExample } },
      errors: ['not_found', 'unprocessable_entity', 'conflict', 'not_implemented', 'provider_error'],
      handler: async ({ principal, params, body }) => ({ status: 200, body: await agents.waitBackground(principal, params.id, params.pid, body.timeout * 1000) }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/agents/:id/processes/:pid/logs',
      operationId: 'readProcessOutput',
      tag: 'Exec',
      summary: "Read a background process's output",
      description: 'The last 1 MiB of each of its stdout and stderr (kept by the sandbox while it runs and after it ended), with the bytes dropped before them.',
      params: pidParams,
      responses: {
        200: {
          description: 'the output',
          schema: backgroundOutputSchema,
          example: { ...endedExample, stdout: 'epoch 1 loss 0.41\nepoch 2 loss 0.27\n', stderr: '', dropped: { stdout: 0, stderr: 0 } },
        },
      },
      errors: ['not_found', 'conflict', 'not_implemented', 'provider_error'],
      handler: async ({ principal, params }) => ({ status: 200, body: await agents.backgroundOutput(principal, params.id, params.pid) }),
    }),
    defineRoute({
      method: 'post',
      path: '/v1/agents/:id/pty/token',
      operationId: 'createTerminalToken',
      tag: 'Exec',
      summary: 'A short-lived token for the terminal WebSocket',
      description:
        'Browsers cannot set an Authorization header on a WebSocket: this answers a token for `GET /v1/agents/{id}/pty?token=…`, valid 60 s for this agent only, and for one connection. ' +
        'Other clients may send the API key as a bearer header on the upgrade instead.',
      params: agentParam,
      body: z.object({}).strict(),
      requestExample: {},
      responses: {
        201: {
          description: 'the token',
          schema: z.object({ token: z.string(), expiresAt: z.string().describe('ISO 8601'), path: z.string().describe('the WebSocket path, token included') }),
          example: { token: 'pty_eyJhIjoiYWd0XzAxIn0.c2ln', expiresAt: '2026-11-23T16:59:02.000Z', path: '/v1/agents/agt_01m80gqvefwgc4tgw5batt7zt1/pty?token=pty_eyJhIjoiYWd0XzAxIn0.c2ln' },
        },
      },
      errors: ['not_found', 'unprocessable_entity'],
      handler: async ({ principal, params }) => {
        await agents.find(principal, params.id);
        const issued = options.terminalTokens.issue(principal, params.id);
        return { status: 201, body: { ...issued, path: `/v1/agents/${encodeURIComponent(params.id)}/pty?token=${encodeURIComponent(issued.token)}` } };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/v1/agents/:id/pty',
      operationId: 'openTerminal',
      tag: 'Exec',
      summary: 'A terminal in the sandbox (WebSocket)',
      description:
        'A WebSocket upgrade (answered 101): a program (`argv`, default `bash`) on a terminal of its own in the sandbox, for a person at a console. Authenticated by `Authorization: Bearer <API key>` on the upgrade, or `?token=` from `POST /v1/agents/{id}/pty/token` (browsers). ' +
        'Client to server: binary messages are input bytes; text messages are JSON, `{"type":"input","data":"ls\\n"}` or `{"type":"resize","rows":40,"cols":120}`. ' +
        'Server to client: binary messages are terminal output; one text message `{"type":"exit","exitCode":0}` (or `{"type":"error","code","message"}`) before the server closes. ' +
        "Closing the socket kills the program; it also ends at the agent's timeout. A GET that is not a WebSocket upgrade is answered 400.",
      params: agentParam,
      query: z
        .object({
          token: z.string().max(1024).optional().describe('from POST /v1/agents/{id}/pty/token, instead of the Authorization header'),
          argv: z.union([z.string().min(1).max(4096), z.array(z.string().min(1).max(4096)).min(1).max(64)]).optional().describe('the program and its arguments, repeated (`argv=python3&argv=-q`); default bash'),
          rows: z.string().regex(/^[0-9]{1,4}$/).optional().describe('terminal rows, 1 to 1000 (default 24)'),
          cols: z.string().regex(/^[0-9]{1,4}$/).optional().describe('terminal columns, 1 to 1000 (default 80)'),
          cwd: z.string().max(4096).optional().describe('working directory, as for exec (default /workspace)'),
        })
        .strict(),
      responses: { 101: { description: 'switching to the WebSocket protocol', example: 'HTTP/1.1 101 Switching Protocols' } },
      errors: ['bad_request', 'not_found', 'unprocessable_entity', 'conflict', 'not_implemented', 'headers_too_large'],
      handler: async () => {
        throw new ApiError('bad_request', 'this route is a WebSocket: send a GET with "Connection: Upgrade" and "Upgrade: websocket"');
      },
    }),
  );
}
