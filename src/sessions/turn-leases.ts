import { randomUUID } from 'node:crypto';
import type { Config } from '../config.ts';
import { AppError } from '../errors.ts';
import type { Store } from '../store/db.ts';
import type { Lease } from '../store/leases.ts';
import { outageLog, type OutageLog } from '../store/outage-log.ts';
import type { LiveTurn } from './live-turn.ts';
import { CANCELLED, LEASE_LOST } from './stop-reasons.ts';

interface LeaseDeps {
  store: Store;
  config: Config;
  log: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void };
}

/**
 * The session leases of this process's turns: taken before a turn is set up, renewed while it
 * runs, and the leases of dead replicas swept. Apart from the turns themselves because the lease
 * is the one-live-turn rule across replicas, kept on a clock of its own.
 */
export class TurnLeases {
  /** Names this process on the leases it holds. */
  readonly holder = randomUUID();
  /** Turns whose leases this process renews, all in one statement each period (`renew`). */
  private readonly held = new Map<string, LiveTurn>();
  private renewals: NodeJS.Timeout | undefined;
  private readonly renewFailures: OutageLog;
  private readonly deps: LeaseDeps;

  constructor(deps: LeaseDeps) {
    this.deps = deps;
    this.renewFailures = outageLog(deps.log, 'renew the session leases');
  }

  /**
   * Takes the session for `turnId`. A forced take stops the turn holding it: `stopOwn` stops one of
   * this process's own at once, another process's is asked to through its lease.
   */
  async take(plan: { projectId: string; sessionId: string; force?: boolean | undefined }, turnId: string, stopOwn: (lease: Lease, reason: Error) => Promise<LiveTurn | undefined>): Promise<void> {
    const { store, config } = this.deps;
    const { projectId, sessionId } = plan;
    const deadline = Date.now() + config.leaseTtlMs + 2_000;
    for (;;) {
      const got = await store.leases.acquire({ projectId, sessionId, turnId, holder: this.holder, ttlMs: config.leaseTtlMs });
      if (got.acquired) {
        // The process that held this lease died with its turn still recorded as running.
        if (got.expired) await store.turns.finish(got.expired.turn_id, { status: 'interrupted', stop_reason: 'interrupted' });
        return;
      }
      const current = got.current.turn_id;
      if (!plan.force || Date.now() > deadline) {
        throw new AppError(
          'session-busy',
          plan.force
            ? `session "${sessionId}" is still held by turn "${current}", which did not stop in time; try again`
            : `session "${sessionId}" is running turn "${current}"; wait for it to end, or send x-ag-session-control: force to take over`,
        );
      }
      // This process's own turn, even one still being set up, is stopped here and now.
      const local = got.current.holder === this.holder ? await stopOwn(got.current, CANCELLED) : undefined;
      if (!local) {
        // Its holder sees the request at its next renewal and stops the turn.
        await store.leases.requestCancel(projectId, sessionId, current);
        await new Promise((resolve) => setTimeout(resolve, Math.min(200, config.leaseTtlMs / 6)));
      }
    }
  }

  /** A turn's lease joins those this process renews while the turn runs. */
  hold(turn: LiveTurn): void {
    this.held.set(turn.id, turn);
    if (this.renewals) return;
    this.renewals = setInterval(() => void this.renew(), this.deps.config.leaseTtlMs / 3);
    this.renewals.unref();
  }

  letGo(turn: LiveTurn): void {
    this.held.delete(turn.id);
    if (this.held.size > 0 || !this.renewals) return;
    clearInterval(this.renewals);
    this.renewals = undefined;
  }

  /**
   * Renews every lease this process holds, in one statement however many turns it runs. A turn
   * whose lease comes back with a cancel request (a takeover from another process) stops; one
   * whose lease does not come back was declared dead by another process, so it stops rather than
   * run beside its successor.
   */
  private async renew(): Promise<void> {
    const { store, config } = this.deps;
    const turns = [...this.held.values()];
    let renewed: Lease[];
    try {
      renewed = await store.leases.renewHeld(this.holder, turns.map((turn) => turn.id), config.leaseTtlMs);
      this.renewFailures.succeeded();
    } catch (error) {
      this.renewFailures.failed(error, { turns: turns.length });
      return;
    }
    const byTurn = new Map(renewed.map((lease) => [lease.turn_id, lease]));
    for (const turn of turns) {
      // Ended meanwhile: its lease was let go and released, so it could not come back.
      if (!this.held.has(turn.id)) continue;
      const lease = byTurn.get(turn.id);
      if (!lease) turn.controller.abort(LEASE_LOST);
      else if (lease.cancel_requested) turn.controller.abort(CANCELLED);
    }
  }

  /**
   * Replicas on one database cannot clear each other's leases at start; instead each one, every
   * `intervalMs`, frees the sessions whose holders died (their leases lapsed) and records the turns
   * they were running as interrupted. Returns the function that stops sweeping.
   */
  sweepExpired(intervalMs: number): () => void {
    const { store, log } = this.deps;
    const sweep = async () => {
      for (const lease of await store.leases.listExpired()) {
        if (await store.leases.releaseExpired(lease)) await store.turns.markRunningAsInterrupted([lease.turn_id]);
      }
    };
    const failures = outageLog(log, 'sweep expired session leases');
    const run = () =>
      void sweep().then(
        () => failures.succeeded(),
        (error: unknown) => failures.failed(error),
      );
    run();
    const timer = setInterval(run, intervalMs);
    timer.unref();
    return () => clearInterval(timer);
  }

  /** No lease is renewed after this. */
  close(): void {
    clearInterval(this.renewals);
  }
}
