import { createHash, randomUUID } from 'node:crypto';
import pg from 'pg';
import { boundedSettings, type PgBounds } from './pg-bounds.ts';

/**
 * Messages between the processes that share one PostgreSQL database (LISTEN/NOTIFY), for what
 * must reach another replica now rather than at its next poll: a live turn's events. Delivery is
 * at most once and only to processes listening at the time; a message is never stored.
 */
export interface Notifications {
  /** Calls `onMessage` with every message sent on `channel` from now on; resolves to the way to stop. */
  listen(channel: string, onMessage: (message: string) => void): Promise<() => Promise<void>>;
  /** Sends `message` (any length) on `channel`; messages one caller sends in turn arrive in that order. */
  send(channel: string, message: string): Promise<void>;
  /** NOTIFY statements sent and notifications received since start (a message is one or more of each), for the metrics. */
  counts(): { sent: number; received: number };
  close(): Promise<void>;
}

const RECONNECT_MS = 1_000;

/** PostgreSQL refuses payloads of 8000 bytes or more; a UTF-16 unit is at most 3 UTF-8 bytes. */
const PART_UNITS = 2_600;

/** Splits a message into parts that each fit one NOTIFY, never between the halves of a surrogate pair. */
export function splitMessage(message: string): string[] {
  const parts: string[] = [];
  let start = 0;
  do {
    let end = Math.min(start + PART_UNITS, message.length);
    const last = message.charCodeAt(end - 1);
    if (end < message.length && last >= 0xd800 && last <= 0xdbff) end -= 1;
    parts.push(message.slice(start, end));
    start = end;
  } while (start < message.length);
  return parts;
}

/**
 * Channels are global to the PostgreSQL server, so their names carry a digest of the schema: two
 * deployments (or two test runs) in different schemas of one database never hear each other.
 */
export function channelPrefix(schema: string): string {
  return `agentd_${createHash('sha256').update(schema).digest('hex').slice(0, 12)}_`;
}

/**
 * One dedicated connection listens (a pooled one would be handed to other queries); sends go
 * through the pool. Each part is `<message id> <index> <count> <text>`, reassembled on arrival.
 */
export function createPgNotifications(options: {
  connectionString: string;
  pool: pg.Pool;
  prefix: string;
  /** The pool's bounds and client class (pg-bounds.ts), so a listener whose database went silent is dropped and opened again rather than left deaf. */
  bounds?: PgBounds | undefined;
  Client?: typeof pg.Client;
}): Notifications {
  const handlers = new Map<string, Set<(message: string) => void>>();
  /**
   * Parts of messages not yet whole, by channel and message id. Kept only while the channel is
   * listened to: a part whose rest never comes (its sender died, or the listener stopped between
   * two parts) would otherwise stay for the life of the process, one per follower.
   */
  const partial = new Map<string, Map<string, string[]>>();
  const counts = { sent: 0, received: 0 };
  let listener: Promise<pg.Client> | undefined;
  let closed = false;

  const deliver = (channel: string, payload: string) => {
    counts.received++;
    // Notifications sent before an UNLISTEN took effect still arrive after it.
    const listening = handlers.get(channel);
    if (!listening) return;
    const [id, index, count] = payload.split(' ', 3) as [string, string, string];
    const text = payload.slice(id.length + index.length + count.length + 3);
    let message = text;
    if (count !== '1') {
      let held = partial.get(channel);
      if (!held) partial.set(channel, (held = new Map()));
      const parts = held.get(id) ?? [];
      parts[Number(index)] = text;
      if (parts.filter((p) => p !== undefined).length < Number(count)) {
        held.set(id, parts);
        return;
      }
      held.delete(id);
      if (held.size === 0) partial.delete(channel);
      message = parts.join('');
    }
    for (const handler of listening) handler(message);
  };

  let retry: NodeJS.Timeout | undefined;
  const connect = (): Promise<pg.Client> => {
    // Named, so an operator can tell it apart in pg_stat_activity.
    const client = new (options.Client ?? pg.Client)({ ...boundedSettings(options.connectionString, options.bounds), application_name: 'agentd-listener' });
    const ready = client.connect().then(async () => {
      for (const channel of handlers.keys()) await client.query(`LISTEN "${channel}"`);
      return client;
    });
    client.on('notification', (n) => n.payload !== undefined && deliver(n.channel, n.payload));
    // A dropped connection (a database restart) is opened again, with its channels, a moment
    // later; what was sent meanwhile is lost, which every user of these messages tolerates (they
    // watch the lease too).
    const drop = () => {
      if (listener !== ready) return;
      listener = undefined;
      partial.clear();
      if (closed || retry) return;
      retry = setTimeout(() => {
        retry = undefined;
        if (!closed && !listener && handlers.size) listener = connect();
      }, RECONNECT_MS);
      retry.unref();
    };
    client.on('error', drop);
    client.on('end', drop);
    ready.catch(drop);
    return ready;
  };

  const channelName = (channel: string) => {
    const name = `${options.prefix}${channel}`;
    if (!/^[a-z0-9_]{1,63}$/.test(name)) throw new Error(`invalid notification channel "${name}"`);
    return name;
  };

  return {
    async listen(channel, onMessage) {
      if (closed) throw new Error('notifications are closed');
      const name = channelName(channel);
      let set = handlers.get(name);
      const first = !set;
      if (!set) handlers.set(name, (set = new Set()));
      set.add(onMessage);
      const stop = async () => {
        set.delete(onMessage);
        if (set.size || handlers.get(name) !== set) return;
        handlers.delete(name);
        partial.delete(name);
        await listener?.then((c) => c.query(`UNLISTEN "${name}"`)).catch(() => {});
      };
      try {
        listener ??= connect();
        const client = await listener;
        if (first) await client.query(`LISTEN "${name}"`);
      } catch (error) {
        // Not listening after all: nothing is left behind for a reconnect to listen for.
        await stop();
        throw error;
      }
      return stop;
    },
    async send(channel, message) {
      const name = channelName(channel);
      const id = randomUUID();
      const parts = splitMessage(message);
      for (const [index, part] of parts.entries()) {
        await options.pool.query('select pg_notify($1, $2)', [name, `${id} ${index} ${parts.length} ${part}`]);
        counts.sent++;
      }
    },
    counts: () => ({ ...counts }),
    async close() {
      closed = true;
      clearTimeout(retry);
      handlers.clear();
      partial.clear();
      const client = await listener?.catch(() => undefined);
      listener = undefined;
      await client?.end().catch(() => {});
    },
  };
}
