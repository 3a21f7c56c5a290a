import type { HarnessConnection } from './harness-connection.ts';

/**
 * Harness processes waiting for their session's next turn, started and initialized, their harness
 * session open (the harnesses write it down as they go: any process may load it meanwhile). The
 * next turn of the session reuses one and prompts that session: no start and no load, nearly all
 * of a cold turn's time (BENCHMARKS.md). One per session, under a TTL, and
 * no more than `max` per process: the oldest goes first. Only a process started the same way (its
 * sandbox, environment, model and key) is reused; a pause never parks (its process ends, so the
 * answer works anywhere).
 */

interface Parked {
  connection: HarnessConnection;
  /** How it was started; reused only by a turn that would start it the same way. */
  fingerprint: string;
  timer: NodeJS.Timeout;
}

const parked = new Map<string, Parked>();

function unpark(session: string): Parked | undefined {
  const found = parked.get(session);
  if (!found) return undefined;
  parked.delete(session);
  clearTimeout(found.timer);
  return found;
}

/**
 * The session's parked process when it was started as `fingerprint` asks. Any other is retired
 * first, its session closed: it has the session open, which the turn is about to load.
 */
export async function takeParked(session: string, fingerprint: string): Promise<HarnessConnection | undefined> {
  const found = unpark(session);
  if (!found) return undefined;
  if (found.fingerprint === fingerprint && found.connection.child.exitCode === null && found.connection.child.signalCode === null) return found.connection;
  await found.connection.retire();
  return undefined;
}

/** Retires the session's parked process, if it has one: its time is up, or another needs its room. */
function retire(session: string): void {
  void unpark(session)?.connection.retire();
}

/** Ends the session's parked process at once, and waits for it: the session is being deleted from under it. */
export async function discardParked(session: string): Promise<void> {
  await unpark(session)?.connection.end();
}

/** Keeps the process for the session's next turn, for `ttlMs` (more than 0, as `max` is). */
export function park(session: string, fingerprint: string, connection: HarnessConnection, limits: { ttlMs: number; max: number }): void {
  retire(session);
  for (const oldest of parked.keys()) {
    if (parked.size < limits.max) break;
    retire(oldest);
  }
  const timer = setTimeout(() => retire(session), limits.ttlMs);
  timer.unref();
  parked.set(session, { connection, fingerprint, timer });
  // A parked process that dies by itself is simply gone.
  void connection.exited.then(() => parked.get(session)?.connection === connection && parked.delete(session));
}

/** Retires every parked process, and waits for them: the server is stopping. */
export async function endParked(): Promise<void> {
  await Promise.all([...parked.keys()].map((session) => unpark(session)!.connection.retire()));
}
