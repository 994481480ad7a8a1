import * as e2b from 'e2b';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { eventually } from '../helpers/http.js';
import { kubectlJson, startBerthInCluster, startClusterProcess, waitForAgent, type BerthInCluster, type ClusterProcess } from '../cluster-tier/helpers.js';
import { nodeAgentSettings } from '../node/node-agent-settings.js';

/**
 * The launcher as a sandbox pod's main process (ADR 47), on the real node: execs and background
 * processes are the launcher's children, reached through the Kubernetes exec API and the pod's
 * channel (pod-channel.py), so a background process started before a native pause (ADR 38) is
 * still running, and counting, after the resume. The background-process routes and the
 * E2B-compatible `commands.run` (foreground and background) run on Kubernetes.
 */
const unavailable = inject('realNodeUnavailable');
const podName = (agentId: string) => agentId.replace('_', '-');

describe.skipIf(unavailable !== '')('the launcher in sandbox pods on a real node', () => {
  let berth: BerthInCluster;
  let nodeAgent: ClusterProcess | undefined;
  let sessionId: string;
  let agentId: string;

  beforeAll(async () => {
    const settings = await nodeAgentSettings(inject('runscRoot'));
    nodeAgent = await startClusterProcess('node', settings.env);
    berth = await startBerthInCluster({
      prefix: 'nodelaunch',
      env: { BERTH_NODE_AGENT_PORT: String(settings.port), BERTH_NODE_AGENT_TOKEN: settings.token, BERTH_E2B_DOMAIN: 'e2b.test' },
    });
    sessionId = (await berth.live.post('/v1/sessions', { userId: 'launcher-user' })).body.id;
    const agent = (await berth.live.post(`/v1/sessions/${sessionId}/agents`, {})).body;
    agentId = agent.id;
    await waitForAgent(berth.live, agentId, 'idle', 120_000);
  }, 240_000);
  afterAll(async () => {
    await berth?.stop();
    await nodeAgent?.stop();
  });

  it('runs the launcher as the pod main process, with the guest programs from a ConfigMap', async () => {
    const pod = await kubectlJson(['get', 'pod', podName(agentId), '-n', berth.namespace]);
    const guest = pod.spec.volumes.find((volume: { name: string }) => volume.name === 'guest');
    expect(guest.configMap.name).toMatch(/^berth-guest-[0-9a-f]{12}$/);
    const configMap = await kubectlJson(['get', 'configmap', guest.configMap.name, '-n', berth.namespace]);
    expect(configMap.immutable).toBe(true);
    expect(Object.keys(configMap.data).sort()).toEqual(['launcher.py', 'pod-channel.py', 'pod-program.sh']);
    const ps = await berth.live.post(`/v1/agents/${agentId}/exec`, { language: 'bash', code: 'cat /proc/1/comm; cat /proc/$PPID/comm; cat /proc/$(cut -d" " -f4 /proc/$PPID/stat)/comm' });
    expect(ps.body.exitCode, JSON.stringify(ps.body)).toBe(0);
    // PID 1 is the launcher, and the program's shell (pod-program.sh) is its child, not a child of runsc's exec.
    expect(ps.body.stdout).toBe('berth-launcher\nsh\nberth-launcher\n');
  });

  it('execs python, TypeScript and bash with env, cwd, stdin, exit codes and the time limit', async () => {
    expect((await berth.live.post(`/v1/agents/${agentId}/exec`, { language: 'bash', code: 'mkdir -p /workspace/sub' })).body.exitCode).toBe(0);
    const python = await berth.live.post(`/v1/agents/${agentId}/exec`, {
      language: 'python',
      code: 'import os, sys\nprint(os.environ["GREETING"], os.getcwd(), sys.stdin.read())\nprint("oops", file=sys.stderr)\nsys.exit(3)',
      env: { GREETING: 'hello' },
      cwd: 'sub',
      stdin: 'from stdin',
    });
    expect(python.body, JSON.stringify(python.body)).toMatchObject({ stdout: 'hello /workspace/sub from stdin\n', stderr: 'oops\n', exitCode: 3 });
    const typescript = await berth.live.post(`/v1/agents/${agentId}/exec`, { language: 'typescript', code: 'const n: number = 6 * 7;\nconsole.log(n);' });
    expect(typescript.body, JSON.stringify(typescript.body)).toMatchObject({ stdout: '42\n', exitCode: 0 });
    const limited = await berth.live.post(`/v1/agents/${agentId}/exec`, { language: 'bash', code: 'sleep 30', timeout: 2 });
    expect(limited.status, JSON.stringify(limited.body)).toBe(504);
  });

  it('keeps a background counter started before a native pause counting after the resume', async () => {
    const started = await berth.live.post(`/v1/agents/${agentId}/exec`, {
      language: 'python',
      code: 'import os, time\ntoken = os.urandom(8).hex()\nn = 0\nwhile True:\n    n += 1\n    print(token, n, flush=True)\n    time.sleep(0.1)',
      background: true,
    });
    expect(started.status, JSON.stringify(started.body)).toBe(202);
    const pid = started.body.pid as number;
    const lastLine = async () => {
      const logs = await berth.live.get(`/v1/agents/${agentId}/processes/${pid}/logs`);
      expect(logs.status, JSON.stringify(logs.body)).toBe(200);
      const [token, n] = (logs.body.stdout as string).trim().split('\n').at(-1)!.split(' ');
      return { token: token!, n: Number(n) };
    };
    const before = await eventually(async () => ((await lastLine()).n > 3 ? lastLine() : undefined), { what: 'the counter to count', timeoutMs: 20_000 });
    const firstUid = (await kubectlJson(['get', 'pod', podName(agentId), '-n', berth.namespace])).metadata.uid;

    const paused = await berth.live.post(`/v1/agents/${agentId}/pause`);
    expect(paused.body.status, JSON.stringify(paused.body)).toBe('paused');
    const [snapshot] = (await berth.live.get(`/v1/snapshots?agentId=${agentId}`)).body.data;
    expect(snapshot).toMatchObject({ provider: 'kubernetes', level: 'native' });
    const resumed = await berth.live.post(`/v1/agents/${agentId}/resume`);
    expect(resumed.body.status, JSON.stringify(resumed.body)).toBe('idle');
    const pod = await kubectlJson(['get', 'pod', podName(agentId), '-n', berth.namespace]);
    expect(pod.metadata.uid).not.toBe(firstUid);
    expect(pod.metadata.annotations['berth.dev/restore-level']).toBe('native');

    const listed = await berth.live.get(`/v1/agents/${agentId}/processes`);
    expect(listed.body.data.find((process: { pid: number }) => process.pid === pid), JSON.stringify(listed.body)).toMatchObject({ status: 'running' });
    // The same process (its token was drawn in its memory before the pause) counts on.
    const after = await lastLine();
    expect(after.token).toBe(before.token);
    const later = await eventually(async () => {
      const line = await lastLine();
      return line.n > after.n ? line : undefined;
    }, { what: 'the restored counter to go on counting', timeoutMs: 20_000 });
    expect(later.token).toBe(before.token);

    const signalled = await berth.live.post(`/v1/agents/${agentId}/processes/${pid}/signal`, { signal: 'TERM' });
    expect(signalled.status, JSON.stringify(signalled.body)).toBe(200);
    const waited = await berth.live.post(`/v1/agents/${agentId}/processes/${pid}/wait`, { timeout: 10 });
    expect(waited.body, JSON.stringify(waited.body)).toMatchObject({ pid, status: 'signaled' });
    const missing = await berth.live.get(`/v1/agents/${agentId}/processes/999999/logs`);
    expect(missing.status).toBe(404);
  });

  it('runs E2B-compatible commands in the pod: foreground with callbacks and exit codes, background and kill, stdin, a PTY', async () => {
    process.env.E2B_API_URL = `${berth.apiserver.url}/e2b`;
    process.env.E2B_SANDBOX_URL = berth.apiserver.url;
    process.env.E2B_API_KEY = `e2b_${berth.liveKey}`;
    const sandbox = await e2b.Sandbox.create({ metadata: { 'berth-user': 'e2b-on-kubernetes' }, timeoutMs: 600_000 });
    try {
      const out: string[] = [];
      const result = await sandbox.commands.run('echo to-out; echo to-err >&2; cat /proc/1/comm', { onStdout: (data) => void out.push(data) });
      expect(result).toMatchObject({ exitCode: 0, stdout: 'to-out\nberth-launcher\n', stderr: 'to-err\n' });
      expect(out.join('')).toBe('to-out\nberth-launcher\n');
      const failed = await sandbox.commands.run('exit 3').catch((error: unknown) => error);
      expect(failed).toBeInstanceOf(e2b.CommandExitError);
      expect((failed as e2b.CommandExitError).exitCode).toBe(3);

      const handle = await sandbox.commands.run('for i in 1 2 3; do echo tick-$i; sleep 0.2; done; sleep 300', { background: true });
      expect(handle.pid).toBeGreaterThan(0);
      expect((await sandbox.commands.list()).map((entry) => entry.pid)).toContain(handle.pid);
      await eventually(async () => (handle.stdout.includes('tick-3') ? true : undefined), { what: 'the background command output', timeoutMs: 20_000 });
      expect(await sandbox.commands.kill(handle.pid)).toBe(true);
      const ended = await handle.wait().catch((error: unknown) => error);
      expect(ended).toBeInstanceOf(e2b.CommandExitError);

      // stdin kept open (ADR 50): after the program's bytes in the pod's exec stdin (pod-program.sh).
      const reader = await sandbox.commands.run('cat; echo "eof $?"', { background: true, stdin: true });
      await sandbox.commands.sendStdin(reader.pid, 'to the pod\n');
      await reader.closeStdin();
      expect(await reader.wait()).toMatchObject({ exitCode: 0, stdout: 'to the pod\neof 0\n' });

      // A PTY: the launcher's terminal exec, in the pod.
      const output: Buffer[] = [];
      const terminal = await sandbox.pty.create({ cols: 80, rows: 24, onData: (data) => void output.push(Buffer.from(data)) });
      await sandbox.pty.resize(terminal.pid, { cols: 100, rows: 30 });
      await sandbox.pty.sendInput(terminal.pid, new TextEncoder().encode('stty size; echo pty-$((6*7))\nexit 0\n'));
      expect((await terminal.wait()).exitCode).toBe(0);
      const text = Buffer.concat(output).toString('utf8');
      expect(text).toContain('30 100');
      expect(text).toContain('pty-42');
    } finally {
      await sandbox.kill();
    }
  });
});
