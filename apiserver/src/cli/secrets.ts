import { existsSync } from 'node:fs';
import { chmod, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { SecretBox, SecretKeyError, generateSecretKey, parseSecretKey, reencryptChannelCredentials, reencryptSecrets, reencryptTriggerSecrets, withTransaction, type BerthConfig, type Pool } from '@berth/common';
import { CliError } from './keys.js';

/** Where embedded mode keeps the key it generated. */
export const secretsKeyFile = (dataDir: string) => join(dataDir, 'secrets.key');

/**
 * The key that encrypts secrets: BERTH_SECRETS_KEY, else (embedded mode) the one kept in the
 * data directory, generated on first use and readable by its owner only. Cluster mode has no
 * data directory to keep one in: there, the key is required.
 */
export async function loadSecretBox(config: BerthConfig, options: { generate: boolean }): Promise<SecretBox> {
  try {
    const previous = config.secretsPreviousKeys.map((key, index) => parseSecretKey(key, `BERTH_SECRETS_PREVIOUS_KEYS[${index}]`));
    if (config.secretsKey) return new SecretBox(parseSecretKey(config.secretsKey, 'BERTH_SECRETS_KEY'), previous);
    const file = secretsKeyFile(config.dataDir);
    if (!existsSync(file)) {
      if (!options.generate) throw new CliError('BERTH_SECRETS_KEY is not set: cluster mode needs the key that encrypts secrets (the Helm chart provides it)');
      const temporary = `${file}.${process.pid}.tmp`;
      await writeFile(temporary, `${generateSecretKey()}\n`, { mode: 0o600 });
      await rename(temporary, file);
    }
    await chmod(file, 0o600);
    return new SecretBox(parseSecretKey(await readFile(file, 'utf8'), file), previous);
  } catch (error) {
    if (error instanceof SecretKeyError) throw new CliError(error.message);
    throw error;
  }
}

/** `berth secrets rotate`: re-encrypts every value under the current key: secrets, the signing secrets of triggers and the credentials of channels. */
export async function secretsCommand(pool: Pool, box: SecretBox, action: string | undefined, out: (line: string) => void): Promise<void> {
  if (action !== 'rotate') throw new CliError('usage: berth secrets rotate   (after setting the new BERTH_SECRETS_KEY and the old one in BERTH_SECRETS_PREVIOUS_KEYS)');
  const { secrets, triggers, channels } = await withTransaction(pool, async (tx) => ({
    secrets: await reencryptSecrets(tx, box),
    triggers: await reencryptTriggerSecrets(tx, box),
    channels: await reencryptChannelCredentials(tx, box),
  }));
  out(
    `re-encrypted ${secrets} secret value${secrets === 1 ? '' : 's'} and ${triggers} trigger secret${triggers === 1 ? '' : 's'} ` +
      `(and the credentials of ${channels} channel${channels === 1 ? '' : 's'}) under key ${box.keyId}; the previous keys are no longer needed`,
  );
}
