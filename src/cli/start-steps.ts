/** How long a step of a start goes unremarked. */
export const QUIET_STEP_MS = 5_000;

/**
 * What a start is doing, said on stderr while one step of it takes longer than a few seconds:
 * a database that never answers (a pooler waiting for a server connection, an address that drops
 * packets) would otherwise hold `agentd serve` silent until something gives up, minutes later.
 */
export function startSteps(write: (line: string) => void = (line) => process.stderr.write(line)): { step(what: string): void; done(): void } {
  let timer: NodeJS.Timeout | undefined;
  const done = () => clearInterval(timer);
  return {
    step(what) {
      done();
      const since = Date.now();
      timer = setInterval(() => write(`agentd: still ${what} after ${Math.round((Date.now() - since) / 1000)} s\n`), QUIET_STEP_MS);
      timer.unref();
    },
    done,
  };
}
