import type { z } from 'zod';
import { agentSpecSchema, agentStatusSchema } from './agent.js';
import { fleetSpecSchema, fleetStatusSchema } from './fleet.js';
import { scheduleSpecSchema, scheduleStatusSchema } from './schedule.js';
import { sessionSpecSchema, sessionStatusSchema } from './session.js';
import { snapshotSpecSchema, snapshotStatusSchema } from './snapshot.js';
import { warmPoolSpecSchema, warmPoolStatusSchema } from './warm-pool.js';

export const GROUP = 'berth.dev';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;

export interface PrinterColumn {
  name: string;
  type: 'string' | 'integer' | 'number' | 'boolean' | 'date';
  jsonPath: string;
  description?: string;
  priority?: number;
}

export interface KindDefinition {
  kind: string;
  plural: string;
  singular: string;
  shortNames: string[];
  description: string;
  spec: z.ZodType;
  status: z.ZodType;
  printerColumns: PrinterColumn[];
}

const age: PrinterColumn = { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' };

/**
 * Every resource kind of Berth, from which the CRDs, the chart's CRD templates and the
 * TypeScript types (`z.infer` of the same schemas) all come. Short names are the API id prefixes.
 */
export const KINDS = {
  Session: {
    kind: 'Session',
    plural: 'sessions',
    singular: 'session',
    shortNames: ['ses'],
    description: "One end-user of the customer's application; cost, limits and billing are scoped to it. Owns its Agents.",
    spec: sessionSpecSchema,
    status: sessionStatusSchema,
    printerColumns: [
      { name: 'User', type: 'string', jsonPath: '.spec.userId' },
      { name: 'Environment', type: 'string', jsonPath: '.spec.environment' },
      { name: 'Mode', type: 'string', jsonPath: '.spec.mode' },
      age,
    ],
  },
  Agent: {
    kind: 'Agent',
    plural: 'agents',
    singular: 'agent',
    shortNames: ['agt'],
    description: 'An agent and its sandbox: the operator provisions the sandbox, enforces its timeout and reports its phase.',
    spec: agentSpecSchema,
    status: agentStatusSchema,
    printerColumns: [
      { name: 'Session', type: 'string', jsonPath: '.spec.sessionId' },
      { name: 'Phase', type: 'string', jsonPath: '.status.phase' },
      { name: 'Compute', type: 'string', jsonPath: '.spec.compute' },
      { name: 'Provider', type: 'string', jsonPath: '.spec.provider' },
      { name: 'Cost', type: 'integer', jsonPath: '.status.cost.amount', description: 'spend so far, in cents' },
      age,
    ],
  },
  Snapshot: {
    kind: 'Snapshot',
    plural: 'snapshots',
    singular: 'snapshot',
    shortNames: ['snap'],
    description: "A checkpoint of an agent's sandbox, made on pause; resumable into a new agent while ready.",
    spec: snapshotSpecSchema,
    status: snapshotStatusSchema,
    printerColumns: [
      { name: 'Agent', type: 'string', jsonPath: '.spec.agentId' },
      { name: 'Type', type: 'string', jsonPath: '.spec.type' },
      { name: 'State', type: 'string', jsonPath: '.status.state' },
      { name: 'Size', type: 'integer', jsonPath: '.status.sizeBytes', description: 'bytes' },
      age,
    ],
  },
  Schedule: {
    kind: 'Schedule',
    plural: 'schedules',
    singular: 'schedule',
    shortNames: ['sched'],
    description: 'Runs an agent from a definition on a cron schedule, in a time zone; the operator fires each matching time once.',
    spec: scheduleSpecSchema,
    status: scheduleStatusSchema,
    printerColumns: [
      { name: 'Schedule-Name', type: 'string', jsonPath: '.spec.name', description: 'the name given to the schedule' },
      { name: 'Cron', type: 'string', jsonPath: '.spec.cron' },
      { name: 'Timezone', type: 'string', jsonPath: '.spec.timezone' },
      { name: 'Next-Run', type: 'string', jsonPath: '.status.nextRunAt', description: 'RFC 3339; a date column would show a future time as invalid' },
      { name: 'Last-Run', type: 'string', jsonPath: '.status.lastRunAt' },
      { name: 'Paused', type: 'boolean', jsonPath: '.spec.paused' },
      age,
    ],
  },
  Fleet: {
    kind: 'Fleet',
    plural: 'fleets',
    singular: 'fleet',
    shortNames: ['flt'],
    description: 'Many items through one agent definition, a bounded number at a time, under a cost cap.',
    spec: fleetSpecSchema,
    status: fleetStatusSchema,
    printerColumns: [
      { name: 'Phase', type: 'string', jsonPath: '.status.phase' },
      { name: 'Completed', type: 'integer', jsonPath: '.status.completed' },
      { name: 'Failed', type: 'integer', jsonPath: '.status.failed' },
      { name: 'Total', type: 'integer', jsonPath: '.spec.itemCount' },
      { name: 'Cost', type: 'integer', jsonPath: '.status.cost.amount', description: 'spend of its items so far, in cents' },
      age,
    ],
  },
  WarmPool: {
    kind: 'WarmPool',
    plural: 'warmpools',
    singular: 'warmpool',
    shortNames: ['wpl'],
    description: 'Sandboxes started ahead of the agents that claim them, per compute (and browser, and definition); refilled by the operator.',
    spec: warmPoolSpecSchema,
    status: warmPoolStatusSchema,
    printerColumns: [
      { name: 'Compute', type: 'string', jsonPath: '.spec.compute' },
      { name: 'Size', type: 'integer', jsonPath: '.spec.size' },
      { name: 'Ready', type: 'integer', jsonPath: '.status.ready' },
      { name: 'Claims', type: 'integer', jsonPath: '.status.claims' },
      age,
    ],
  },
} as const satisfies Record<string, KindDefinition>;

export type KindName = keyof typeof KINDS;
