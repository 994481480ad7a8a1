import { PortClosedError, type Principal } from '@berth/common';
import { guestSource } from '@berth/providers';
import { Counter, Histogram, type Registry } from 'prom-client';
import type { AgentService } from '../services/agents.js';

/**
 * The code interpreter of the E2B-compatible surface (ADR 44): a sandbox of the template
 * `code-interpreter-v1` (what `@e2b/code-interpreter` creates) runs the python compute, and its
 * create starts `sandbox-images/guest/code_interpreter.py` in it as a background process of the
 * launcher. That server speaks E2B's code interpreter protocol (`/execute`, `/contexts`) on port
 * 49999 of the sandbox's loopback; the SDK reaches it as any port (`E2b-Sandbox-Port: 49999` or
 * `49999-<sandboxId>.<domain>`), through the launcher's port tunnel: the sandbox keeps no
 * network. Being the launcher's, the server and its kernels outlive a pause and resume.
 */

export const CODE_INTERPRETER_TEMPLATE = 'code-interpreter-v1';
export const CODE_INTERPRETER_PORT = 49999;
/** How long a create waits for the server to listen (a python start and its first kernel, in gVisor). */
const START_TIMEOUT_MS = 30_000;
/** Between two tries of the port while the server starts. */
const PROBE_INTERVAL_MS = 50;

export class CodeInterpreterStartError extends Error {}

export function createCodeInterpreterStarter(deps: { agents: AgentService; metrics: Registry; startTimeoutMs?: number }) {
  const starts = new Counter({ name: 'berth_e2b_code_interpreter_starts_total', help: 'Code interpreter servers started by E2B creates, by result', labelNames: ['result'], registers: [deps.metrics] });
  const startSeconds = new Histogram({
    name: 'berth_e2b_code_interpreter_start_seconds',
    help: 'From starting the code interpreter server in a sandbox to its port answering',
    buckets: [0.1, 0.25, 0.5, 1, 2, 5, 10, 30],
    registers: [deps.metrics],
  });
  const startTimeoutMs = deps.startTimeoutMs ?? START_TIMEOUT_MS;

  /** Starts the server in the agent's sandbox and returns once its port takes connections. */
  return async function startCodeInterpreter(principal: Principal, agentId: string): Promise<void> {
    const started = Date.now();
    const server = await deps.agents.startBackground(principal, agentId, { language: 'python', code: guestSource('code_interpreter.py') });
    const { sandbox, provider } = await deps.agents.ready(principal, agentId, 'the code interpreter');
    if (!provider.openPort || !provider.waitBackground || !provider.backgroundOutput) {
      starts.inc({ result: 'unsupported' });
      throw new CodeInterpreterStartError(`provider "${provider.name}" cannot reach ports in its sandboxes: the code interpreter needs it`);
    }
    for (;;) {
      try {
        const connection = await provider.openPort(sandbox, CODE_INTERPRETER_PORT);
        connection.destroy();
        starts.inc({ result: 'started' });
        startSeconds.observe((Date.now() - started) / 1000);
        return;
      } catch (error) {
        if (!(error instanceof PortClosedError)) throw error;
      }
      // Not listening yet: the server either still starts (the wait lasts the probe interval) or ended.
      const state = await provider.waitBackground(sandbox, server.pid, PROBE_INTERVAL_MS);
      if (state.status !== 'running' || Date.now() - started > startTimeoutMs) {
        const output = await provider.backgroundOutput(sandbox, server.pid);
        starts.inc({ result: 'failed' });
        const said = output.stderr.trim().split('\n').slice(-3).join(' | ');
        throw new CodeInterpreterStartError(
          state.status === 'running' ? `the code interpreter did not listen on port ${CODE_INTERPRETER_PORT} within ${startTimeoutMs / 1000} s` : `the code interpreter ended as it started${said ? `: ${said}` : ''}`,
        );
      }
    }
  };
}

export type CodeInterpreterStarter = ReturnType<typeof createCodeInterpreterStarter>;
