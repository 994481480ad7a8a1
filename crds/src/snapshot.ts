import { z } from 'zod';
import { conditionSchema, modeSchema } from './common.js';

export const SNAPSHOT_KIND = 'Snapshot';

export const snapshotStateSchema = z.enum(['creating', 'ready', 'failed', 'deleting']);

/** A saved sandbox: made when an agent is paused (type `pause`), resumable into a new agent. */
export const snapshotSpecSchema = z.object({
  organizationId: z.string(),
  mode: modeSchema,
  agentId: z.string(),
  sessionId: z.string(),
  /** The provider that made it; resuming there can be native, elsewhere filesystem-level. */
  provider: z.string(),
  type: z.enum(['pause', 'manual']),
});
export type SnapshotSpec = z.infer<typeof snapshotSpecSchema>;

export const snapshotStatusSchema = z.object({
  state: snapshotStateSchema,
  observedGeneration: z.number().int(),
  conditions: z.array(conditionSchema),
  /** What the checkpoint holds: processes and memory too (`native`), or the workspace files. */
  level: z.enum(['native', 'filesystem']).optional(),
  sizeBytes: z.number().int().nonnegative().optional(),
  /** Where the snapshot storage keeps it (a path or an object key). */
  location: z.string().optional(),
  /** SHA-256 of the archive, checked on every restore. */
  sha256: z.string().optional(),
  readyAt: z.string().optional(),
  error: z.object({ code: z.string(), message: z.string() }).optional(),
});
export type SnapshotStatus = z.infer<typeof snapshotStatusSchema>;
