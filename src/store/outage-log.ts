import { databaseUnavailable } from './unavailable.ts';

interface Log {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

export interface OutageLog {
  /** One attempt failed: logged in full, unless it is a repeat of an outage already logged. */
  failed(error: unknown, fields?: object): void;
  /** One attempt worked: ends an outage, saying how long it lasted. */
  succeeded(): void;
}

/**
 * The failures of a background loop that runs every second or so (lease renewals and sweeps,
 * looking for evaluation runs). While the database is down each attempt fails the same way, and a
 * warning with a stack each time would bury everything else in the log: an outage is logged once,
 * without a driver's stack, and once more when the loop works again. Any other failure is a bug
 * worth every line, and is logged in full each time.
 */
export function outageLog(log: Log, what: string): OutageLog {
  let since: number | undefined;
  let failures = 0;
  return {
    failed(error, fields) {
      const down = databaseUnavailable(error, 'agentd tries again until it answers, and logs once more then');
      if (!down) {
        log.warn({ ...fields, err: error }, `could not ${what}`);
        return;
      }
      failures++;
      if (since !== undefined) return;
      since = Date.now();
      log.warn({ ...fields, error: { type: down.type, message: down.message } }, `could not ${what}`);
    },
    succeeded() {
      if (since === undefined) return;
      log.info({ failed_attempts: failures, unavailable_ms: Date.now() - since }, `the database answers again: agentd can ${what}`);
      since = undefined;
      failures = 0;
    },
  };
}
