import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

/**
 * The runsc wrapper (apiserver/node-agent/runsc-restore.sh) on its own, with a stand-in for runsc
 * that records how it was called and answers `state` as runsc does (indented JSON with the spec's
 * annotations). The node tier runs it as the real shim's runsc.
 */
const WRAPPER = join(import.meta.dirname, '..', '..', 'node-agent', 'runsc-restore.sh');
const UID = '0b6c3f1e-2a4d-4c8e-9f10-1234567890ab';

describe('the runsc restore wrapper', () => {
  let dir: string;
  let restores: string;
  let calls: string;
  let state: string;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'berth-wrapper-'));
    restores = join(dir, 'restores');
    mkdirSync(restores);
    calls = join(dir, 'calls');
    state = join(dir, 'state.json');
    writeFileSync(
      join(dir, 'runsc'),
      `#!/bin/bash\nfor a; do [ "$a" = state ] && exec cat ${JSON.stringify(state)}; done\nprintf '%s\\n' "$*" >> ${JSON.stringify(calls)}\n`,
    );
    chmodSync(join(dir, 'runsc'), 0o755);
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const wrapper = (...args: string[]) => {
    execFileSync('bash', [WRAPPER, ...args], { env: { ...process.env, BERTH_RUNSC_BINARY: join(dir, 'runsc'), BERTH_NODE_RESTORES: restores } });
    return readFileSync(calls, 'utf8').trim().split('\n').at(-1);
  };
  /** runsc state of a container of the pod UID, of CRI type `sandbox` or `container`. */
  const containerState = (type: string, bundle = join(dir, 'bundle')) =>
    writeFileSync(
      state,
      JSON.stringify(
        { ociVersion: '1.0.2', id: 'c1', status: 'created', bundle, annotations: { 'io.kubernetes.cri.container-type': type, 'io.kubernetes.cri.sandbox-uid': UID } },
        null,
        '  ',
      ),
    );
  const stage = () => {
    mkdirSync(join(restores, UID, 'image'), { recursive: true });
    mkdirSync(join(restores, UID, 'workspace', 'notes'), { recursive: true });
    writeFileSync(join(restores, UID, 'workspace', 'notes', 'kept.txt'), 'kept');
    writeFileSync(join(restores, UID, 'ready'), '');
  };

  it('passes every call through unchanged when nothing is staged for the pod', () => {
    containerState('sandbox');
    expect(wrapper('--root=/run/r', '--log=/l', 'list', '--format=json')).toBe('--root=/run/r --log=/l list --format=json');
    expect(wrapper('--root=/run/r', 'start', 'c1')).toBe('--root=/run/r start c1');
    mkdirSync(join(restores, UID));
    // Staged but not complete (no ready marker): still a plain start.
    expect(wrapper('--root=/run/r', 'start', 'c1')).toBe('--root=/run/r start c1');
  });

  it('restores the pod sandbox from the staged image instead of starting it', () => {
    stage();
    containerState('sandbox');
    expect(wrapper('--root=/run/r', '--log-format=json', 'start', 'c1')).toBe(
      `--root=/run/r --log-format=json restore --detach --image-path=${join(restores, UID, 'image')} c1`,
    );
  });

  it("puts the staged workspace into the app container's /workspace volume before restoring it", () => {
    stage();
    const bundle = join(dir, 'bundle');
    const volume = join(dir, 'pods', UID, 'volumes', 'kubernetes.io~empty-dir', 'workspace');
    mkdirSync(bundle);
    mkdirSync(volume, { recursive: true });
    // containerd writes config.json compact, an OCI mount as Go marshals it.
    writeFileSync(join(bundle, 'config.json'), JSON.stringify({ mounts: [{ destination: '/tmp', type: 'bind', source: '/elsewhere' }, { destination: '/workspace', type: 'bind', source: volume, options: ['rbind'] }] }));
    containerState('container', bundle);
    expect(wrapper('--root=/run/r', 'start', 'c2')).toBe(`--root=/run/r restore --detach --image-path=${join(restores, UID, 'image')} c2`);
    expect(readFileSync(join(volume, 'notes', 'kept.txt'), 'utf8')).toBe('kept');
  });

  it("creates a staged pod's containers with restore validation that only warns, and others as asked", () => {
    const bundle = join(dir, 'bundle');
    mkdirSync(bundle);
    writeFileSync(join(bundle, 'config.json'), JSON.stringify({ annotations: { 'io.kubernetes.cri.sandbox-uid': UID } }));
    expect(wrapper('--root=/run/r', 'create', '--bundle', bundle, 'c1')).toBe(`--root=/run/r create --bundle ${bundle} c1`);
    stage();
    expect(wrapper('--root=/run/r', 'create', `--bundle=${bundle}`, 'c1')).toBe(`--root=/run/r --restore-spec-validation=warning create --bundle=${bundle} c1`);
  });
});
