import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { launcherArgs, launcherFailure, viaLauncher } from './launcher.js';

describe('the launcher', () => {
  const [bash, flag, command, source] = launcherArgs();

  it('runs under its own name, and its command line never says python (pkill -f python passes it by)', () => {
    expect([bash, flag, command]).toEqual(['/bin/bash', '-c', 'exec -a berth-launcher python3 -I -S -c "$0"']);
    expect(source).not.toMatch(/python/i);
  });

  it('is valid python', () => {
    execFileSync('python3', ['-c', 'import ast, sys; ast.parse(sys.stdin.read())'], { input: source });
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
