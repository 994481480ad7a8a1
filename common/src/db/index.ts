import pg from 'pg';
import type { Logger } from '../log.js';

/** Anything that runs a query: the pool, or a client inside a transaction. */
export type Queryable = Pick<pg.Pool, 'query'> | pg.PoolClient;
export type Pool = pg.Pool;
export type PoolClient = pg.PoolClient;

export function createPool(connectionString: string, log?: Logger): pg.Pool {
  const pool = new pg.Pool({ connectionString, max: 10, idleTimeoutMillis: 30_000 });
  // An idle client that loses its server must not crash the process; the next checkout reconnects.
  pool.on('error', (error) => log?.warn({ err: error }, 'idle database connection failed'));
  return pool;
}

/** Runs `work` in one transaction: all of it is written or none of it. */
export async function withTransaction<T>(pool: pg.Pool, work: (tx: pg.PoolClient) => Promise<T>): Promise<T> {
  const tx = await beginTransaction(pool);
  try {
    const result = await work(tx.client);
    await tx.commit();
    return result;
  } catch (error) {
    await tx.rollback();
    throw error;
  }
}

/**
 * A transaction begun and not yet ended, for work that spans more than one function (a warm claim
 * whose commit is the agent's status write, ADR 45). Exactly one of `commit` and `rollback` ends
 * it and gives its connection back; `rollback` never throws, and after either both do nothing.
 */
export interface OpenTransaction {
  readonly client: pg.PoolClient;
  readonly ended: boolean;
  commit(): Promise<void>;
  rollback(): Promise<void>;
}

export async function beginTransaction(pool: pg.Pool): Promise<OpenTransaction> {
  const client = await pool.connect();
  // A connection that ends mid-transaction (a server restart, a terminated backend) fails the
  // statement in flight; without a listener its 'error' event would also end the process.
  const onError = () => undefined;
  client.on('error', onError);
  let ended = false;
  const end = (broken: boolean) => {
    ended = true;
    client.off('error', onError);
    // A connection that could not even roll back is discarded rather than handed out again.
    client.release(broken);
  };
  try {
    await client.query('BEGIN');
  } catch (error) {
    end(true);
    throw error;
  }
  return {
    client,
    get ended() {
      return ended;
    },
    async commit() {
      if (ended) return;
      try {
        await client.query('COMMIT');
      } catch (error) {
        await client.query('ROLLBACK').catch(() => undefined);
        end(true);
        throw error;
      }
      end(false);
    },
    async rollback() {
      if (ended) return;
      let broken = false;
      await client.query('ROLLBACK').catch(() => (broken = true));
      end(broken);
    },
  };
}

export function isUniqueViolation(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: string }).code === '23505';
}
