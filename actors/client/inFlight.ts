/**
 * A count of things under way (listener batches of a queue, a consumer's listener calls, its
 * send-backs), and bounded waits for it to come down to 0: a hand-over or a close waits for what is
 * running, but never longer than it can afford.
 */
export class InFlight {
  private n = 0;
  private waiters: (() => void)[] = [];

  get count(): number {
    return this.n;
  }

  begin(): void {
    this.n++;
  }

  /** One ended: the last one wakes every waiter. */
  end(): void {
    if (--this.n === 0 && this.waiters.length > 0) for (const w of this.waiters.splice(0)) w();
  }

  /** Resolves true once nothing is under way, or false after `maxWaitMs`. */
  idle(maxWaitMs: number): Promise<boolean> {
    if (this.n === 0) return Promise.resolve(true);
    return new Promise<boolean>((resolve) => {
      const done = (): void => {
        clearTimeout(t);
        resolve(true);
      };
      const t = setTimeout(() => {
        const i = this.waiters.indexOf(done);
        if (i >= 0) this.waiters.splice(i, 1);
        resolve(false);
      }, maxWaitMs);
      this.waiters.push(done);
    });
  }
}
