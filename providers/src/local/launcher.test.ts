import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GUEST_DIR } from '../guest.js';
import { launcherArgs, launcherLimit, parseOutcome, viaLauncher, type ExecOutcome } from './launcher.js';

describe('the launcher', () => {
  const [bash, flag, command, script] = launcherArgs();

  it('runs under its own name from the guest mount, and its command line never says python (pkill -f python passes it by)', () => {
    expect([bash, flag, command, script]).toEqual(['/bin/bash', '-c', 'exec -a berth-launcher python3 -I -S "$0" "$@"', '/run/berth/guest/launcher.py']);
    expect(launcherArgs(512)).toEqual([bash, flag, command, script, '512']);
    expect(launcherArgs(512, { egressRelay: true })).toEqual([bash, flag, command, script, '--egress-relay', '512']);
    expect(script).not.toMatch(/python/i);
  });
});

describe('viaLauncher', () => {
  it('has a perl client run the program given after --', () => {
    const argv = viaLauncher(['timeout', '5', 'python3', '/run/berth/exec/a.py']);
    expect(argv.slice(0, 2)).toEqual(['perl', '-e']);
    expect(argv.slice(3)).toEqual(['--', 'timeout', '5', 'python3', '/run/berth/exec/a.py']);
    execFileSync('perl', ['-c', '-e', argv[2]!], { stdio: 'pipe' });
  });
});

describe('parseOutcome', () => {
  const frame = (json: string) => Buffer.from(`${Buffer.byteLength(json)}\n${json}`);

  it('reads the one record the client wrote', () => {
    expect(parseOutcome(frame('{"outcome": "exited", "exitCode": 124}'))).toEqual({ outcome: 'exited', exitCode: 124 });
    expect(parseOutcome(frame('{"outcome": "timedOut", "signal": 9, "exitCode": 137}'))).toEqual({ outcome: 'timedOut', signal: 9, exitCode: 137 });
    expect(parseOutcome(frame('{"outcome": "failed", "error": "the sandbox\'s launcher is not running"}'))).toEqual({
      outcome: 'failed',
      error: "the sandbox's launcher is not running",
    });
  });

  it('has no outcome for nothing, a record cut short or one of another shape', () => {
    expect(parseOutcome(Buffer.alloc(0))).toBeUndefined();
    expect(parseOutcome(frame('{"outcome": "exited", "exitCode": 1}').subarray(0, 10))).toBeUndefined();
    expect(parseOutcome(Buffer.from('{"outcome": "exited", "exitCode": 1}'))).toBeUndefined();
    expect(parseOutcome(frame('{"outcome": "exited"}'))).toBeUndefined();
    expect(parseOutcome(frame('{"outcome": "vanished", "exitCode": 1}'))).toBeUndefined();
  });
});

describe('the launcher and its client on this host', () => {
  // Outside gVisor the launcher is an ordinary process; its abstract socket is this host's, so it
  // gets a name of its own (another test run may have a launcher listening).
  const socket = `berth-launcher-test-${process.pid}`;
  let launcher: ChildProcess;
  beforeAll(async () => {
    const [bash, flag, command] = launcherArgs();
    launcher = spawn(bash!, [flag!, command!, `${GUEST_DIR}/launcher.py`], { stdio: 'ignore', env: { ...process.env, BERTH_LAUNCHER_SOCKET: socket } });
    await new Promise((resolve) => setTimeout(resolve, 300));
  });
  afterAll(() => {
    launcher.kill('SIGKILL'); // it ignores the signals that would end it, as PID 1 must
  });

  const run = (program: string[], limitMs: number, socketName = socket) => {
    const started = Date.now();
    const [perl, ...args] = viaLauncher(program);
    const result = spawnSync(perl!, args, {
      env: { ...process.env, ...launcherLimit(limitMs), BERTH_LAUNCHER_SOCKET: socketName },
      stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
    });
    const channel = result.output[3] as Buffer;
    return {
      clientExit: result.status,
      outcome: parseOutcome(channel) as ExecOutcome | undefined,
      channel: channel.toString(),
      stdout: result.stdout.toString(),
      stderr: result.stderr.toString(),
      ms: Date.now() - started,
    };
  };

  it("reports the program's exit status on descriptor 3, and nothing of its own in the program's output", () => {
    const notice = "timeout: sending signal TERM to command 'x'";
    const result = run(['bash', '-c', `echo out; echo "${notice}" >&2; exit 124`], 5_000);
    expect(result).toMatchObject({ clientExit: 0, outcome: { outcome: 'exited', exitCode: 124 }, stdout: 'out\n', stderr: `${notice}\n` });
    expect(result.channel).toBe('38\n{"outcome": "exited", "exitCode": 124}');
  });

  it('says which signal ended a program', () => {
    expect(run(['bash', '-c', 'kill -KILL $$'], 5_000).outcome).toEqual({ outcome: 'signaled', signal: 9, exitCode: 137 });
  });

  it('reports a program that cannot start as a shell would (127, its reason on stderr)', () => {
    const result = run(['no-such-program-here'], 5_000);
    expect(result.outcome).toEqual({ outcome: 'exited', exitCode: 127 });
    expect(result.stderr).toMatch(/^no-such-program-here: No such file or directory/);
  });

  it('stops a program over its limit with TERM and reports it timed out', () => {
    const result = run(['sleep', '30'], 500);
    expect(result.outcome).toEqual({ outcome: 'timedOut', signal: 15, exitCode: 143 });
    expect(result.stderr).toBe('');
    expect(result.ms).toBeGreaterThanOrEqual(500);
    expect(result.ms).toBeLessThan(2_500);
  });

  it('kills one that ignores TERM two seconds later', () => {
    const result = run(['bash', '-c', 'trap "" TERM; echo started; sleep 30 & wait'], 300);
    expect(result.stdout).toBe('started\n');
    expect(result.outcome).toEqual({ outcome: 'timedOut', signal: 9, exitCode: 137 });
    expect(result.ms).toBeGreaterThanOrEqual(2_300);
    expect(result.ms).toBeLessThan(5_000);
  });

  it('leaves a program within its limit alone, and does not pass the limit on to it', () => {
    const result = run(['bash', '-c', 'echo "limit=${BERTH_EXEC_LIMIT_MS:-unset}"'], 5_000);
    expect(result).toMatchObject({ outcome: { outcome: 'exited', exitCode: 0 }, stdout: 'limit=unset\n', stderr: '' });
  });

  it('reports a launcher it cannot reach as a failure, after two seconds of retries', () => {
    const result = run(['true'], 5_000, `${socket}-nobody`);
    expect(result.clientExit).toBe(255);
    expect(result.outcome).toEqual({ outcome: 'failed', error: expect.stringMatching(/^the sandbox's launcher is not running \(/) });
  });
});
