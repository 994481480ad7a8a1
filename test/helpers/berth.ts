import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { apiClient, type ApiClient } from './http.js';

export const ROOT = join(import.meta.dirname, '..', '..');
export const BERTH_BIN = join(ROOT, 'apiserver', 'dist', 'cli', 'main.js');

export function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  chmodSync(dir, 0o755);
  return dir;
}

export interface BerthProcess {
  baseUrl: string;
  dataDir: string;
  /** Printed on first start only. */
  liveKey: string | undefined;
  testKey: string | undefined;
  stdout: () => string;
  stderr: () => string;
  child: ChildProcess;
  api(key: string | undefined): ApiClient;
  /** Sends the signal and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

export interface StartOptions {
  dataDir?: string;
  env?: Record<string, string>;
  /** Passed instead of `--port 0 --data-dir <dataDir>`. */
  args?: string[];
}

/** Starts a real `berth up` process on a free port and waits until it prints its base URL. */
export async function startBerth(options: StartOptions = {}): Promise<BerthProcess> {
  const dataDir = options.dataDir ?? tempDir('berth-data-');
  const args = options.args ?? ['--port', '0', '--data-dir', dataDir];
  const child = spawn(process.execPath, [BERTH_BIN, 'up', ...args], {
    env: { ...process.env, BERTH_LOG_LEVEL: 'info', ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));

  const baseUrl = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`berth did not start in 60 s:\n${stdout}\n${stderr.slice(-3000)}`)), 60_000);
    const onData = () => {
      const match = /Berth is running at (\S+)/.exec(stdout);
      // The banner is complete at the line that ends it.
      if (match && stdout.includes('Press Ctrl-C to stop.\n')) {
        clearTimeout(timer);
        child.stdout!.off('data', onData);
        resolve(match[1]!);
      }
    };
    child.stdout!.on('data', onData);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`berth exited with ${code} during start:\n${stdout}\n${stderr.slice(-3000)}`));
    });
  });

  return {
    baseUrl,
    dataDir,
    liveKey: /live key: (svc_live_\S+)/.exec(stdout)?.[1],
    testKey: /test key: (svc_test_\S+)/.exec(stdout)?.[1],
    stdout: () => stdout,
    stderr: () => stderr,
    child,
    api: (key) => apiClient(baseUrl, key),
    async stop(signal = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill(signal);
      return exited;
    },
  };
}

/** Runs the berth command line to completion. */
export function runBerth(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BERTH_BIN, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** Starts `berth runner` (runner workers only) and waits until it reports that it started. */
export async function startRunnerProcess(env: Record<string, string>, args: string[] = []): Promise<{ child: ChildProcess; output: () => string; stop(signal?: NodeJS.Signals): Promise<number | null> }> {
  const child = spawn(process.execPath, [BERTH_BIN, 'runner', ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`berth runner did not start:\n${output}`)), 30_000);
    child.stdout!.on('data', () => {
      if (output.includes('berth runner started')) {
        clearTimeout(timer);
        resolve();
      }
    });
    void exited.then((code) => reject(new Error(`berth runner exited with ${code}:\n${output}`)));
  });
  return {
    child,
    output: () => output,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill(signal);
      return exited;
    },
  };
}
