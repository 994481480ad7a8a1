import { findApiKeysByIdOrPrefix, systemClock, type ApiKeyRecord, type AuditActor, type Pool } from '@berth/common';
import type { Mode } from '@berth/crds';
import { createApiKeyService } from '../services/api-keys.js';
import { bootstrap } from './bootstrap.js';

/** How the command line appears in the audit log and as a key's creator. */
const CLI_ACTOR: AuditActor = { type: 'system', id: 'berth keys' };

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
  const keys = createApiKeyService({ pool, clock: systemClock });
  switch (args.action) {
    case 'create': {
      const mode = (args.mode ?? 'live') as Mode;
      if (mode !== 'live' && mode !== 'test') throw new CliError('--mode must be live or test');
      const { key, record } = await keys.create(organization.id, CLI_ACTOR, { mode, label: args.label ?? '' });
      out(`created ${record.id} (${mode})`);
      out(`key: ${key}`);
      out('This is the only time the full key is shown; store it safely.');
      return;
    }
    case 'list': {
      out(`ID${' '.repeat(28)}  PREFIX            MODE  STATE${' '.repeat(28)} CREATED${' '.repeat(18)}LABEL`);
      for (const key of await keys.list(organization.id)) out(row(key));
      return;
    }
    case 'revoke': {
      if (!args.target) throw new CliError('usage: berth keys revoke <key id or prefix>');
      // The keys of the install's first organization, the ones `list` shows.
      const matches = (await findApiKeysByIdOrPrefix(pool, args.target.replace(/…$/, ''))).filter((key) => key.organizationId === organization.id);
      if (matches.length === 0) throw new CliError(`no key has the id or prefix ${args.target}`);
      if (matches.length > 1) throw new CliError(`${matches.length} keys have the prefix ${args.target}; revoke by id`);
      const revoked = await keys.revoke(organization.id, CLI_ACTOR, matches[0]!.id);
      out(`revoked ${row(revoked)}`);
      return;
    }
    default:
      throw new CliError('usage: berth keys create [--mode live|test] [--label text] | list | revoke <id or prefix>');
  }
}
