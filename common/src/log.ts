import { pino, type Logger, type LevelWithSilent } from 'pino';

export type { Logger };

/**
 * Structured logs, one JSON object a line, on stderr so that stdout stays for the command's own output.
 * Written synchronously: the lines just before an exit are the ones that matter most.
 */
export function createLogger(options: { level?: LevelWithSilent; name?: string } = {}): Logger {
  return pino(
    {
      level: options.level ?? 'info',
      base: options.name ? { name: options.name } : null,
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    pino.destination({ fd: 2, sync: true }),
  );
}

/** Writes nothing, and (unlike pino's default destination) opens no stream and hooks no process exit when it is made. */
export const silentLogger: Logger = pino({ level: 'silent' }, { write: () => undefined });
