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

/**
 * A pass run when asked (`wake`) and every `pollMs` besides: a wake during a pass asks for one
 * more after it, so any number of wakes coalesce into at most one pass under way and one to
 * follow. A pass that throws is logged; the next wake or tick tries again. `stop` waits for a
 * pass under way and ends the ticks; wakes after it do nothing.
 */
export class WakeablePass {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private ended = true;

  constructor(
    private readonly pass: () => Promise<unknown>,
    private readonly options: { pollMs: number; log: Logger; failure: string },
  ) {}

  /** Whether `stop` was called (a long pass may end early). */
  get stopped(): boolean {
    return this.ended;
  }

  start(): void {
    this.ended = false;
    this.timer = setInterval(() => this.wake(), this.options.pollMs);
    this.timer.unref();
    this.wake();
  }

  async stop(): Promise<void> {
    this.ended = true;
    clearInterval(this.timer);
    await this.running;
  }

  /** Asks for a pass soon; passes never overlap. */
  wake(): void {
    if (this.ended) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = (async () => {
      do {
        this.again = false;
        await this.pass().catch((error: unknown) => this.options.log.error({ err: error }, this.options.failure));
      } while (this.again && !this.ended);
      this.running = undefined;
    })();
  }
}
