/**
 * The chart archive `helm package` makes, as a registry would receive it: its Chart.yaml carries
 * the version, appVersion and annotations, CHANGELOG.md has an entry for that version, and the
 * archive installs the same objects as the chart directory.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { CHART, NAMESPACE, RELEASE, run, WITH_URL } from './helm.js';
import { packageChart } from './package.js';

interface ChartFile {
  apiVersion: string;
  name: string;
  version: string;
  appVersion: string;
  kubeVersion: string;
  annotations: Record<string, string>;
}

let dir: string;
let archive: string;
const chartFile = parse(await readFile(join(CHART, 'Chart.yaml'), 'utf8')) as ChartFile;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'berth-chart-package-'));
  archive = await packageChart(dir);
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function tarList(path: string): Promise<string[]> {
  return new Promise((resolve, reject) =>
    execFile('tar', ['-tzf', path], (error, stdout, stderr) => (error ? reject(new Error(stderr)) : resolve(stdout.trim().split('\n')))),
  );
}

describe('helm package', () => {
  it('names the archive after the chart and its version, with the values schema, CRDs and changelog inside', async () => {
    expect(basename(archive)).toBe(`berth-${chartFile.version}.tgz`);
    const files = await tarList(archive);
    for (const file of ['Chart.yaml', 'values.yaml', 'values.schema.json', 'CHANGELOG.md', 'README.md', 'templates/crds/agents.yaml', 'templates/validate.yaml']) {
      expect(files, file).toContain(`berth/${file}`);
    }
  });

  it('keeps version, appVersion, kubeVersion and the registry annotations in the archive', async () => {
    const shown = await run(['show', 'chart', archive]);
    expect(shown.code, shown.stderr).toBe(0);
    const packaged = parse(shown.stdout) as ChartFile;
    expect(packaged).toMatchObject({ apiVersion: 'v2', name: 'berth', version: chartFile.version, appVersion: chartFile.appVersion, kubeVersion: '>=1.29.0-0' });
    // OCI registries take SemVer 2 versions only.
    expect(packaged.version).toMatch(/^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/);
    const changes = parse(packaged.annotations['artifacthub.io/changes']!) as { kind: string; description: string }[];
    expect(changes.length).toBeGreaterThan(0);
    for (const change of changes) expect(['added', 'changed', 'deprecated', 'removed', 'fixed', 'security']).toContain(change.kind);
    const images = parse(packaged.annotations['artifacthub.io/images']!) as { name: string; image: string }[];
    expect(images).toContainEqual({ name: 'berth', image: `berth/berth:${chartFile.appVersion}` });
  });

  it('has a changelog entry with upgrade notes for the packaged version', async () => {
    const changelog = await readFile(join(CHART, 'CHANGELOG.md'), 'utf8');
    const heading = `## ${chartFile.version}`;
    expect(changelog).toContain(heading);
    const entry = changelog.slice(changelog.indexOf(heading)).split(/\n## /)[0]!;
    expect(entry).toContain('### Upgrading');
  });

  it('renders the same objects from the archive as from the directory', async () => {
    const template = async (chart: string) => (await run(['template', RELEASE, chart, '--namespace', NAMESPACE, ...WITH_URL, '--set', 'secrets.existingSecret=berth-key'])).stdout;
    const fromArchive = await template(archive);
    expect(fromArchive.length).toBeGreaterThan(1000);
    expect(fromArchive).toBe(await template(CHART));
  });
});
