import type pg from 'pg';

/** pg's client class, with a way to cut every connection it opened that is still open. */
export type BoundedClientClass = typeof pg.Client & { cutAll(): void; ended(): Promise<void> };

/** pg's message for a statement that outlived `query_timeout`. */
export const STATEMENT_TIMEOUT_MESSAGE = 'Query read timeout';

/**
 * How long agentd waits on PostgreSQL: a database that stops answering without refusing (a
 * frozen server, a network path that drops packets) would otherwise hold each request until TCP
 * gives up, minutes later. 0 is no bound.
 */
export interface PgBounds {
  /** For a pooled connection to come free, or a new one to open (AGENTD_PG_CONNECT_TIMEOUT_MS). */
  connectTimeoutMs: number;
  /** For one statement's answer (AGENTD_PG_STATEMENT_TIMEOUT_MS). */
  statementTimeoutMs: number;
}

/**
 * Idle time before the first TCP keepalive probe (Node then probes every second, ten times): a
 * connection whose network path went away is found dead in about 20 s, rather than the two hours
 * of Linux's default. The listening connection is idle for hours and would otherwise go
 * deaf unnoticed.
 */
const KEEPALIVE_IDLE_MS = 10_000;

/** pg.Client's or pg.Pool's settings for `url` under `bounds`. */
export function boundedSettings(url: string, bounds: PgBounds | undefined) {
  return {
    connectionString: url,
    keepAlive: true,
    keepAliveInitialDelayMillis: KEEPALIVE_IDLE_MS,
    ...(bounds?.connectTimeoutMs ? { connectionTimeoutMillis: bounds.connectTimeoutMs } : {}),
    ...(bounds?.statementTimeoutMs ? { query_timeout: bounds.statementTimeoutMs } : {}),
  };
}

/**
 * pg's client, which gives its connection up once a statement outlives `query_timeout`. pg fails
 * such a statement but leaves it running on the connection: the next statement would queue behind
 * it, and pg-pool would take the connection back as idle, since Kysely releases its connections
 * without an error. Ended, the client is `_ending`, which pg-pool drops on release, and its socket
 * is destroyed at once (pg does so for a client ended with a statement still running).
 *
 * A statement asked of it later (a transaction's rollback) fails with an error caused by the
 * timeout, so a transaction cut off by it is reported as that, not as a closed connection. The
 * server may still run the statement to its end: set a `statement_timeout` on agentd's role to
 * stop it there too (docs/deployment.md).
 */
export function boundedClient(Client: typeof pg.Client): BoundedClientClass {
  const live = new Set<pg.Client>();
  return class BoundedClient extends Client {
    #gaveUp: Error | undefined;

    /**
     * Cuts every connection still open, for a close the database does not answer: pg ends a
     * connection by waiting for the server's side of the goodbye, which a frozen server never
     * sends, and the process would not stop.
     */
    static cutAll(): void {
      for (const client of live) client.connection.stream.destroy();
    }

    /** Resolves once every connection open now has ended: pg-pool's `end` does not wait for that. */
    static ended(): Promise<void> {
      return Promise.all([...live].map((client) => new Promise((resolve) => client.once('end', resolve)))).then(() => undefined);
    }

    constructor(...args: ConstructorParameters<typeof pg.Client>) {
      super(...args);
      live.add(this);
      this.once('end', () => live.delete(this));
    }

    override query(...args: unknown[]): any {
      const submit = super.query as (...args: unknown[]) => unknown;
      // A callback is pg-pool's own `pool.query`, which releases the client with the error and so
      // drops it; a submittable (a cursor) agentd does not use.
      if (typeof args.at(-1) === 'function' || typeof (args[0] as { submit?: unknown } | null)?.submit === 'function') return submit.apply(this, args);
      if (this.#gaveUp) return Promise.reject(new Error('the connection was given up after a statement on it got no answer in time', { cause: this.#gaveUp }));
      return (submit.apply(this, args) as Promise<unknown>).catch((error: unknown) => {
        if (error instanceof Error && error.message === STATEMENT_TIMEOUT_MESSAGE && !this.#gaveUp) {
          this.#gaveUp = error;
          this.end().catch(() => {});
        }
        throw error;
      });
    }
  };
}
