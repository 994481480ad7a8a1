import type { Logger } from '@berth/common';

/**
 * Runs `pass` at once and then every `pollMs`, never two at a time (a pass that takes longer
 * than the interval delays the next); a pass that throws is logged and the next one tries again.
 * `stop` waits for a pass under way.
 */
export class PassLoop {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> = Promise.resolve();
  private stopped = false;

  constructor(
    private readonly pass: () => Promise<unknown>,
    private readonly options: { pollMs: number; log: Logger; failure: string },
  ) {}

  start(): void {
    this.stopped = false;
    const run = () => {
      this.running = this.pass().catch((error: unknown) => this.options.log.error({ err: error }, this.options.failure));
    };
    run();
    this.timer = setInterval(() => void this.running.then(() => !this.stopped && run()), this.options.pollMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.running;
  }
}
