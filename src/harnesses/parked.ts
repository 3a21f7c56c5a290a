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

/** The session's parked process when it was started as `fingerprint` asks; any other is ended. */
export function takeParked(session: string, fingerprint: string): HarnessConnection | undefined {
  const found = parked.get(session);
  if (!found) return undefined;
  parked.delete(session);
  clearTimeout(found.timer);
  if (found.fingerprint === fingerprint && found.connection.child.exitCode === null && found.connection.child.signalCode === null) return found.connection;
  void found.connection.retire();
  return undefined;
}

/** Ends the session's parked process, if it has one: a deleted session's folder is gone from under it. */
export function drop(session: string): void {
  takeParked(session, DROP);
}

/** A fingerprint no start has, so taking with it always ends what it finds. */
const DROP = '';

/** Keeps the process for the session's next turn, for `ttlMs`; with no room (`max` 0, no TTL), ends it. */
export function park(session: string, fingerprint: string, connection: HarnessConnection, limits: { ttlMs: number; max: number }): void {
  drop(session);
  if (limits.max <= 0 || limits.ttlMs <= 0) {
    void connection.retire();
    return;
  }
  for (const oldest of parked.keys()) {
    if (parked.size < limits.max) break;
    drop(oldest);
  }
  const timer = setTimeout(() => drop(session), limits.ttlMs);
  timer.unref();
  parked.set(session, { connection, fingerprint, timer });
  // A parked process that dies by itself is simply gone.
  void connection.exited.then(() => parked.get(session)?.connection === connection && parked.delete(session));
}

/** Ends every parked process: the server is stopping. */
export async function endParked(): Promise<void> {
  const all = [...parked.values()].map((p) => p.connection);
  for (const session of [...parked.keys()]) drop(session);
  await Promise.all(all.map((connection) => connection.exited));
}
