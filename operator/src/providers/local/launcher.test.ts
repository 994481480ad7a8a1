import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GUEST_DIR } from '../../guest.js';
import { launcherArgs, launcherFailure, launcherLimit, viaLauncher } from './launcher.js';

describe('the launcher', () => {
  const [bash, flag, command, script] = launcherArgs();

  it('runs under its own name from the guest mount, and its command line never says python (pkill -f python passes it by)', () => {
    expect([bash, flag, command, script]).toEqual(['/bin/bash', '-c', 'exec -a berth-launcher python3 -I -S "$0" "$@"', '/run/berth/guest/launcher.py']);
    expect(launcherArgs(512)).toEqual([bash, flag, command, script, '512']);
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

describe('launcherFailure', () => {
  it("reads the client's complaint on the last line of stderr with exit 255", () => {
    expect(launcherFailure({ exitCode: 255, stderr: "berth: the sandbox's launcher is not running (Connection refused)\n" })).toBe(
      "the sandbox's launcher is not running (Connection refused)",
    );
    const stderr = "partial output\nberth: the sandbox's launcher could not run it: it stopped answering\n";
    expect(launcherFailure({ exitCode: 255, stderr })).toBe(
      "the sandbox's launcher could not run it: it stopped answering",
    );
  });

  it("leaves a program's own exit 255 alone", () => {
    expect(launcherFailure({ exitCode: 255, stderr: 'Traceback: boom\n' })).toBeUndefined();
    expect(launcherFailure({ exitCode: 1, stderr: "berth: the sandbox's launcher is not running\n" })).toBeUndefined();
  });
});

describe('time limits, with the launcher and its client on this host', () => {
  // Outside gVisor the launcher is an ordinary process; its abstract socket is this host's.
  let launcher: ChildProcess;
  beforeAll(async () => {
    const [bash, flag, command] = launcherArgs();
    launcher = spawn(bash!, [flag!, command!, `${GUEST_DIR}/launcher.py`], { stdio: 'ignore' });
    await new Promise((resolve) => setTimeout(resolve, 300));
  });
  afterAll(() => {
    launcher.kill('SIGKILL'); // it ignores the signals that would end it, as PID 1 must
  });

  const run = (program: string[], limitMs: number) => {
    const started = Date.now();
    const [perl, ...args] = viaLauncher(program);
    const result = spawnSync(perl!, args, { env: { ...process.env, ...launcherLimit(limitMs) }, encoding: 'utf8' });
    return { exitCode: result.status, stderr: result.stderr, stdout: result.stdout, ms: Date.now() - started };
  };

  it('stops a program over its limit with TERM and exits as timeout(1) would', () => {
    const result = run(['sleep', '30'], 500);
    expect(result.exitCode).toBe(124);
    expect(result.stderr).toBe("timeout: sending signal TERM to command 'sleep'\n");
    expect(result.ms).toBeGreaterThanOrEqual(500);
    expect(result.ms).toBeLessThan(2_500);
  });

  it('kills one that ignores TERM two seconds later', () => {
    const result = run(['bash', '-c', 'trap "" TERM; echo started; sleep 30 & wait'], 300);
    expect(result.stdout).toBe('started\n');
    expect(result.exitCode).toBe(137);
    expect(result.ms).toBeGreaterThanOrEqual(2_300);
    expect(result.ms).toBeLessThan(5_000);
  });

  it('leaves a program within its limit alone, and does not pass the limit on to it', () => {
    const result = run(['bash', '-c', 'echo "limit=${BERTH_EXEC_LIMIT_MS:-unset}"'], 5_000);
    expect(result).toMatchObject({ exitCode: 0, stdout: 'limit=unset\n', stderr: '' });
  });
});
