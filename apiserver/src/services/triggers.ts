import {
  ApiError,
  TRIGGER_TOLERANCE_SECONDS,
  checkTriggerSignature,
  enqueueJob,
  generateTriggerSecret,
  isId,
  newId,
  recordEvent,
  triggerSecretPlace,
  withTransaction,
  type Clock,
  type Pool,
  type SecretBox,
  type SignatureProblem,
} from '@berth/common';
import type { Mode } from '@berth/crds';
import { Counter, type Registry } from 'prom-client';
import type { Principal } from '../http/context.js';
import { inspectInput } from '../http/input.js';
import type { AgentDefinitionService } from './agent-definitions.js';

export interface CreateTriggerInput {
  agent: string;
  userId: string;
  name?: string | undefined;
  type: 'webhook';
}

interface TriggerRow {
  id: string;
  organization_id: string;
  mode: Mode;
  name: string | null;
  user_id: string;
  definition_id: string;
  type: 'webhook';
  secret_key_id: string;
  secret_nonce: Buffer;
  secret_ciphertext: Buffer;
  secret_prefix: string;
  created_at: Date;
  last_fired_at: Date | null;
}

const TRIGGER_COLUMNS = `t.id, t.organization_id, t.mode, t.name, t.user_id, t.definition_id, t.type, t.secret_key_id, t.secret_nonce,
  t.secret_ciphertext, t.secret_prefix, t.created_at,
  (SELECT max(f.received_at) FROM trigger_fires f WHERE f.trigger_id = t.id) AS last_fired_at`;

/** How a fire ended, for `berth_trigger_fires_total`. */
type FireOutcome = 'accepted' | 'not_found' | SignatureProblem | 'replayed' | 'bad_body' | 'definition_archived';

const SIGNATURE_MESSAGES: Record<SignatureProblem, string> = {
  missing_signature: 'missing x-trigger-signature: send the hex HMAC-SHA256 of the raw body, keyed by the trigger secret',
  bad_signature: 'x-trigger-signature does not match: it must be the hex HMAC-SHA256 of the raw body (of "<x-trigger-timestamp>.<raw body>" when a timestamp is sent), keyed by the trigger secret',
  bad_timestamp: 'x-trigger-timestamp must be a Unix time in seconds',
  stale_timestamp: `x-trigger-timestamp is more than ${TRIGGER_TOLERANCE_SECONDS} s away from the server's time: sign each request when it is sent`,
};

/** Where the public fire URL of a trigger is: under the install's public URL, or the origin the request came to. */
export const fireUrl = (baseUrl: string | undefined, id: string) => `${baseUrl ?? ''}/triggers/${id}/fire`;

export function createTriggerService(deps: {
  pool: Pool;
  clock: Clock;
  box: SecretBox;
  definitions: Pick<AgentDefinitionService, 'resolve'>;
  metrics: Registry;
}) {
  const { pool, clock, box } = deps;
  const fires = new Counter({
    name: 'berth_trigger_fires_total',
    help: 'Requests to trigger fire URLs by outcome: accepted, or why they were refused',
    labelNames: ['outcome'],
    registers: [deps.metrics],
  });

  const view = (row: TriggerRow, baseUrl: string | undefined, secret: string | undefined) => ({
    id: row.id,
    name: row.name,
    type: row.type,
    agent: row.definition_id,
    userId: row.user_id,
    url: fireUrl(baseUrl, row.id),
    secret: secret ?? `${row.secret_prefix}…`,
    createdAt: row.created_at.toISOString(),
    lastFiredAt: row.last_fired_at?.toISOString() ?? null,
  });

  async function find(principal: Principal, id: string): Promise<TriggerRow> {
    const { rows } = isId(id, 'trg')
      ? await pool.query<TriggerRow>(
          `SELECT ${TRIGGER_COLUMNS} FROM triggers t WHERE t.id = $1 AND t.organization_id = $2 AND t.mode = $3 AND t.deleted_at IS NULL`,
          [id, principal.organizationId, principal.mode],
        )
      : { rows: [] };
    if (!rows[0]) throw new ApiError('not_found', `trigger ${id} does not exist`, { id });
    return rows[0];
  }

  function refuse(outcome: FireOutcome, error: ApiError): never {
    fires.inc({ outcome });
    throw error;
  }

  /** The run's input: the body as JSON, checked like every request body (no NUL, no lone surrogate, bounded nesting). */
  function fireInput(raw: Buffer): unknown {
    let input: unknown;
    try {
      input = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(raw));
    } catch {
      refuse(
        'bad_body',
        new ApiError('unprocessable_entity', 'the request body must be JSON in UTF-8 (it is the run\'s input; send {} for none)', {
          fields: { body: ['not valid JSON'] },
        }),
      );
    }
    try {
      inspectInput(input, 'body');
    } catch (error) {
      refuse('bad_body', error as ApiError);
    }
    return input;
  }

  return {
    async create(principal: Principal, input: CreateTriggerInput, baseUrl: string | undefined) {
      const definition = await deps.definitions.resolve(principal, input.agent, 'agent');
      const now = clock.now();
      const id = newId('trg', now);
      const secret = generateTriggerSecret();
      const sealed = box.seal(triggerSecretPlace({ organizationId: principal.organizationId, mode: principal.mode, id }), secret);
      const row: TriggerRow = {
        id,
        organization_id: principal.organizationId,
        mode: principal.mode,
        name: input.name ?? null,
        user_id: input.userId,
        definition_id: definition.id,
        type: input.type,
        secret_key_id: sealed.keyId,
        secret_nonce: sealed.nonce,
        secret_ciphertext: sealed.ciphertext,
        secret_prefix: secret.slice(0, 8),
        created_at: now,
        last_fired_at: null,
      };
      await pool.query(
        `INSERT INTO triggers (id, organization_id, mode, name, user_id, definition_id, type, secret_key_id, secret_nonce, secret_ciphertext, secret_prefix, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
        [row.id, row.organization_id, row.mode, row.name, row.user_id, row.definition_id, row.type, row.secret_key_id, row.secret_nonce, row.secret_ciphertext, row.secret_prefix, now],
      );
      return view(row, baseUrl, secret);
    },

    async list(principal: Principal, baseUrl: string | undefined) {
      const { rows } = await pool.query<TriggerRow>(
        `SELECT ${TRIGGER_COLUMNS} FROM triggers t WHERE t.organization_id = $1 AND t.mode = $2 AND t.deleted_at IS NULL
         ORDER BY t.created_at DESC, t.id DESC`,
        [principal.organizationId, principal.mode],
      );
      return { data: rows.map((row) => view(row, baseUrl, undefined)) };
    },

    async get(principal: Principal, id: string, baseUrl: string | undefined) {
      return view(await find(principal, id), baseUrl, undefined);
    },

    /**
     * The URL stops accepting at once: a fire holds the trigger's row (FOR SHARE) while it
     * enqueues, so this waits for fires under way and every later one finds the trigger gone.
     * Jobs accepted before stay and run.
     */
    async delete(principal: Principal, id: string) {
      const trigger = await find(principal, id);
      await pool.query('UPDATE triggers SET deleted_at = $2 WHERE id = $1 AND deleted_at IS NULL', [trigger.id, clock.now()]);
      return { ok: true as const };
    },

    /**
     * A request to the fire URL: the trigger must exist, the signature must be the HMAC of the
     * raw body (and of the timestamp, when one is signed), then the body must be JSON. The job,
     * the fire record (which refuses a replayed signed request) and `trigger.fired` are written
     * in one transaction before the answer, so an accepted fire runs even if this process dies
     * right after answering.
     */
    async fire(id: string, raw: Buffer, headers: { signature: string | undefined; timestamp: string | undefined }) {
      const notFound = () => refuse('not_found', new ApiError('not_found', `trigger ${id} does not exist`, { id }));
      if (!isId(id, 'trg')) notFound();
      const { rows } = await pool.query<TriggerRow>(`SELECT ${TRIGGER_COLUMNS} FROM triggers t WHERE t.id = $1 AND t.deleted_at IS NULL`, [id]);
      const trigger = rows[0] ?? notFound();
      const place = triggerSecretPlace({ organizationId: trigger.organization_id, mode: trigger.mode, id: trigger.id });
      const secret = box.open(place, { keyId: trigger.secret_key_id, nonce: trigger.secret_nonce, ciphertext: trigger.secret_ciphertext });
      const receivedAt = clock.now();
      const check = checkTriggerSignature(secret, raw, headers, receivedAt);
      if (!check.ok) {
        refuse(check.problem, new ApiError('unauthorized', SIGNATURE_MESSAGES[check.problem], {
          reason: check.problem,
          ...(check.problem === 'stale_timestamp' ? { toleranceSeconds: TRIGGER_TOLERANCE_SECONDS } : {}),
        }));
      }
      const input = fireInput(raw);

      const jobId = await withTransaction(pool, async (tx) => {
        const { rows: live } = await tx.query<{ archived_at: Date | null }>(
          `SELECT d.archived_at FROM triggers t JOIN agent_definitions d ON d.id = t.definition_id
           WHERE t.id = $1 AND t.deleted_at IS NULL FOR SHARE OF t`,
          [trigger.id],
        );
        const current = live[0] ?? notFound();
        if (current.archived_at) {
          refuse('definition_archived', new ApiError('conflict', `the agent definition ${trigger.definition_id} of trigger ${trigger.id} is archived: it starts no new agents`, {
            definitionId: trigger.definition_id,
          }));
        }
        const job = await enqueueJob(
          tx,
          {
            organizationId: trigger.organization_id,
            mode: trigger.mode,
            source: 'trigger',
            sourceId: trigger.id,
            userId: trigger.user_id,
            definitionId: trigger.definition_id,
            input,
          },
          receivedAt,
        );
        const recorded = await tx.query(
          `INSERT INTO trigger_fires (job_id, trigger_id, received_at, signed_at, signature) VALUES ($1, $2, $3, $4, $5)
           ON CONFLICT (trigger_id, signature) WHERE signature IS NOT NULL DO NOTHING`,
          [job.id, trigger.id, receivedAt, check.signedAt ?? null, check.signedAt ? check.digest : null],
        );
        if (recorded.rowCount === 0) {
          refuse('replayed', new ApiError('conflict', 'this signed request was accepted before: a replay is not run again (sign each request with its own x-trigger-timestamp)', {
            reason: 'replayed',
          }));
        }
        await recordEvent(
          tx,
          {
            type: 'trigger.fired',
            organizationId: trigger.organization_id,
            mode: trigger.mode,
            subjectId: trigger.id,
            occurrence: `${job.id}/trigger.fired`,
            data: {
              triggerId: trigger.id,
              name: trigger.name,
              jobId: job.id,
              agent: trigger.definition_id,
              userId: trigger.user_id,
              signedAt: check.signedAt?.toISOString() ?? null,
            },
          },
          receivedAt,
        );
        return job.id;
      });
      fires.inc({ outcome: 'accepted' });
      return { ok: true as const, jobId };
    },
  };
}

export type TriggerService = ReturnType<typeof createTriggerService>;
