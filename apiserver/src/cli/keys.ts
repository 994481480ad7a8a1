import {
  createApiKey,
  findApiKeysByIdOrPrefix,
  listApiKeys,
  revokeApiKey,
  type ApiKeyRecord,
  type Pool,
} from '@berth/common';
import type { Mode } from '@berth/crds';
import { bootstrap } from './bootstrap.js';

export class CliError extends Error {
  override name = 'CliError';
}

function row(key: ApiKeyRecord): string {
  const state = key.revokedAt ? `revoked ${key.revokedAt}` : 'active';
  return `${key.id}  ${`${key.prefix}…`.padEnd(17)} ${key.mode.padEnd(4)}  ${state.padEnd(32)} ${key.createdAt}  ${key.label}`;
}

/** `berth keys create|list|revoke`: manages API keys from the shell. */
export async function keysCommand(
  pool: Pool,
  args: { action: string | undefined; target: string | undefined; mode: string | undefined; label: string | undefined },
  out: (line: string) => void,
): Promise<void> {
  const { organization } = await bootstrap(pool);
  switch (args.action) {
    case 'create': {
      const mode = (args.mode ?? 'live') as Mode;
      if (mode !== 'live' && mode !== 'test') throw new CliError('--mode must be live or test');
      const { key, record } = await createApiKey(pool, {
        organizationId: organization.id,
        mode,
        label: args.label ?? '',
        createdBy: 'berth keys create',
      });
      out(`created ${record.id} (${mode})`);
      out(`key: ${key}`);
      out('This is the only time the full key is shown; store it safely.');
      return;
    }
    case 'list': {
      const keys = await listApiKeys(pool, organization.id);
      out(`ID${' '.repeat(28)}  PREFIX            MODE  STATE${' '.repeat(28)} CREATED${' '.repeat(18)}LABEL`);
      for (const key of keys) out(row(key));
      return;
    }
    case 'revoke': {
      if (!args.target) throw new CliError('usage: berth keys revoke <key id or prefix>');
      const matches = await findApiKeysByIdOrPrefix(pool, args.target.replace(/…$/, ''));
      if (matches.length === 0) throw new CliError(`no key has the id or prefix ${args.target}`);
      if (matches.length > 1) throw new CliError(`${matches.length} keys have the prefix ${args.target}; revoke by id`);
      const revoked = await revokeApiKey(pool, matches[0]!.id, new Date());
      out(`revoked ${row(revoked!)}`);
      return;
    }
    default:
      throw new CliError('usage: berth keys create [--mode live|test] [--label text] | list | revoke <id or prefix>');
  }
}
