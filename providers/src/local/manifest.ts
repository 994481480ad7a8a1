import type { SnapshotLevel } from '@berth/common';
import { COMPUTE_ANNOTATION, IMAGE_ANNOTATION, withoutSecretValues } from './bundle.js';

/**
 * A snapshot archive is a compressed tar (see archive.ts) of `manifest.json` (first, so that a reader finds it early),
 * `workspace/` (the agent's /workspace) and, at native level, `checkpoint/` (runsc's image of the
 * sandbox's processes and memory).
 */
export const MANIFEST_FILE = 'manifest.json';
export const WORKSPACE_DIR = 'workspace';
export const CHECKPOINT_DIR = 'checkpoint';

/** The archive layout's version; a reader refuses a newer one rather than misreading it. */
export const MANIFEST_FORMAT = 1;

/** What a local sandbox ran, which a native restore needs again: the same root filesystem and runsc. */
export interface SandboxRecord {
  image?: string;
  compute?: string;
  /** The image's root filesystem on this host; an image rebuilt since lives elsewhere. */
  rootfs: string;
  /** `runsc --version` of the runsc that checkpointed it: images are not portable across versions. */
  runtime: string;
  /**
   * The OCI spec it ran with, without the values of its secrets; a restore runs the same one with
   * the secrets' current values (see `restoreSpec`).
   */
  spec: Record<string, unknown>;
}

export interface SnapshotManifest {
  formatVersion: number;
  provider: string;
  level: SnapshotLevel;
  agentId: string;
  createdAt: string;
  sandbox?: SandboxRecord;
}

/**
 * The manifest of a local sandbox's snapshot, from the spec it ran with. Secrets' values stay out
 * of it: an archive may be kept, copied and read long after the secret was rotated. Pure.
 */
export function localManifest(input: {
  level: SnapshotLevel;
  agentId: string;
  spec: Record<string, unknown>;
  runtime: string;
  createdAt: Date;
}): SnapshotManifest {
  const { spec } = input;
  const annotations = (spec.annotations ?? {}) as Record<string, string>;
  const root = spec.root as { path: string };
  return {
    formatVersion: MANIFEST_FORMAT,
    provider: 'local',
    level: input.level,
    agentId: input.agentId,
    createdAt: input.createdAt.toISOString(),
    sandbox: {
      image: annotations[IMAGE_ANNOTATION],
      compute: annotations[COMPUTE_ANNOTATION],
      rootfs: root.path,
      runtime: input.runtime,
      spec: withoutSecretValues(spec),
    },
  };
}

/** Reads `manifest.json`; throws with what is wrong when it is not one this Berth can use. */
export function parseManifest(text: string): SnapshotManifest {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new Error(`${MANIFEST_FILE} is not JSON`);
  }
  if (!isObject(value)) throw new Error(`${MANIFEST_FILE} is not an object`);
  if (typeof value.formatVersion !== 'number' || value.formatVersion > MANIFEST_FORMAT) {
    throw new Error(`${MANIFEST_FILE} has format ${String(value.formatVersion)}; this Berth reads format ${MANIFEST_FORMAT}`);
  }
  for (const field of ['provider', 'agentId', 'createdAt'] as const) {
    if (typeof value[field] !== 'string') throw new Error(`${MANIFEST_FILE} has no ${field}`);
  }
  if (value.level !== 'native' && value.level !== 'filesystem') throw new Error(`${MANIFEST_FILE} has no level`);
  const sandbox = value.sandbox;
  if (sandbox !== undefined) {
    if (!isObject(sandbox) || typeof sandbox.rootfs !== 'string' || typeof sandbox.runtime !== 'string' || !isObject(sandbox.spec)) {
      throw new Error(`${MANIFEST_FILE} has an incomplete sandbox record`);
    }
  }
  return value as unknown as SnapshotManifest;
}

/** What this host has for a native restore. */
export interface NativeRestoreFacts {
  /** The archive held `checkpoint/`. */
  hasCheckpoint: boolean;
  rootfsExists: boolean;
  /** `runsc --version` here. */
  runtime: string;
}

/**
 * Why the snapshot cannot have its processes restored here, or undefined when it can. An archive
 * without a manifest (other providers may write the workspace only) holds files. Pure.
 */
export function whyNotNative(manifest: SnapshotManifest | undefined, facts: NativeRestoreFacts): string | undefined {
  if (!manifest) return `it has no ${MANIFEST_FILE}: files only`;
  if (manifest.provider !== 'local') return `it was made by provider "${manifest.provider}"`;
  if (manifest.level !== 'native' || !manifest.sandbox || !facts.hasCheckpoint) return 'it holds files only';
  if (!facts.rootfsExists) return `the root filesystem it ran on (${manifest.sandbox.rootfs}) is gone: its image was rebuilt since`;
  if (manifest.sandbox.runtime !== facts.runtime) {
    return `it was made by ${manifest.sandbox.runtime}, and this host runs ${facts.runtime}`;
  }
  return undefined;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
