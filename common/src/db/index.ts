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
  const client = await pool.connect();
  // A connection that ends mid-transaction (a server restart, a terminated backend) fails the
  // statement in flight; without a listener its 'error' event would also end the process.
  const onError = () => undefined;
  client.on('error', onError);
  let broken = false;
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => (broken = true));
    throw error;
  } finally {
    client.off('error', onError);
    // A connection that could not even roll back is discarded rather than handed out again.
    client.release(broken);
  }
}

export function isUniqueViolation(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: string }).code === '23505';
}
