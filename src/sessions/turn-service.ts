import type { Config } from '../config.ts';
import type { AgentEvent, EventOf, RanRevision } from '../contract/events.ts';
import { collectCalls, type HistoryCall } from '../agent/history.ts';
import type { Placement } from '../agent/engine.ts';
import type { EffectiveTemplate } from '../agent/template.ts';
import { AppError, isAppError } from '../errors.ts';
import { newId } from '../ids.ts';
import { earlierAnswers, readInBandAnswers, type EarlierAnswers } from '../interactions/in-band.ts';
import type { Store } from '../store/db.ts';
import type { Lease } from '../store/leases.ts';
import { makeEventRedactor } from '../telemetry/redact.ts';
import type { ServiceMetrics } from '../telemetry/metrics.ts';
import type { Tracing } from '../telemetry/tracing.ts';
import { within } from '../within.ts';
import { endedTurn } from './ended-turn.ts';
import { planInvoke, type StartTurn, type TurnPlan } from './invoke-plan.ts';
import { LiveTurn } from './live-turn.ts';
import type { PausedState } from './paused-state.ts';
import { openProjectConnection } from './project-connection.ts';
import { INTERRUPTED, STOPPED } from './stop-reasons.ts';
import { TurnDriver } from './turn-drive.ts';
import { TurnEngines } from './turn-engines.ts';
import { TurnLeases } from './turn-leases.ts';
import { answerFollowers, followRemoteTurn } from './turn-relay.ts';
import { TurnSetup } from './turn-setup.ts';

export interface TurnServiceDeps {
  store: Store;
  config: Config;
  log: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void; error(obj: object, msg: string): void };
  /** Where each turn's span goes, when OpenTelemetry export is configured. */
  spans?: Tracing | undefined;
  /** The operator's metrics, when `/metrics` is on. */
  metrics?: ServiceMetrics | undefined;
}

/**
 * Starts turns and owns them while they run. A turn runs detached from whoever asked for it:
 * readers follow its events, and a reader leaving never stops it. Its session is taken through
 * turn-leases.ts, the turn set up by turn-setup.ts and run to its end by turn-drive.ts.
 */
export class TurnService {
  readonly live = new Map<string, LiveTurn>();
  private readonly bySession = new Map<string, LiveTurn>();
  /**
   * Turns taking their session and being set up, by turn id: a reader that finds one's lease waits
   * for it, and a stop or a takeover stops it where it is, through its controller (its MCP servers
   * may be connecting). By turn and not by session, because two may be starting on one session at
   * once (an answer's continuation and a re-post), and the one that gets the lease may be either.
   */
  private readonly starting = new Map<string, { turn: Promise<LiveTurn>; controller: AbortController }>();
  private readonly deps: TurnServiceDeps;
  private readonly engines: TurnEngines;
  private readonly leases: TurnLeases;
  private readonly setup: TurnSetup;
  private readonly driver: TurnDriver;

  constructor(deps: TurnServiceDeps) {
    this.deps = deps;
    this.engines = new TurnEngines(deps.config);
    this.leases = new TurnLeases(deps);
    this.setup = new TurnSetup({ ...deps, engines: this.engines });
    this.driver = new TurnDriver({ ...deps, leases: this.leases, live: this.live });
  }

  /** Where this process's turns ran: on the server's thread, or on a turn thread. */
  get placement(): Placement {
    return this.engines.placement;
  }

  /** Turn threads started now. */
  get threadsRunning(): number {
    return this.engines.threadsRunning;
  }

  /**
   * Starts the turn an invoke asks for, or attaches to the live one (force with no input). A
   * re-post that only repeats answers given through the API gets their continuation instead: it
   * runs it when nothing has yet, and follows it when it has (see `earlierAnswers`).
   */
  async start(params: StartTurn): Promise<LiveTurn> {
    const planned = await planInvoke(params, { config: this.deps.config, configs: this.deps.store.configs });
    if ('attach' in planned) return this.attach(params.projectId, planned.attach.sessionId);
    const { plan } = planned;
    const { trailing } = collectCalls(plan.messages);
    const earlier = await earlierAnswers(this.deps.store, plan.projectId, plan.sessionId, trailing);
    if (earlier) return this.follow(plan, earlier, trailing);
    // A forced re-post whose answers were given already is refused before it takes the session:
    // the turn it would cancel may be the one those answers started.
    if (plan.force && trailing.length) await readInBandAnswers(this.deps.store, plan.projectId, plan.sessionId, plan.messages, trailing);
    try {
      return await this.run(plan);
    } catch (error) {
      // The same answers given through the API at the same instant (on another replica, say) got
      // there first: their continuation holds the session, or took the answers up already.
      const raced = isAppError(error) && (error.type === 'session-busy' || error.type === 'interaction-not-pending');
      const now = raced && trailing.length ? await earlierAnswers(this.deps.store, plan.projectId, plan.sessionId, trailing) : undefined;
      if (!now) throw error;
      return this.follow(plan, now, trailing);
    }
  }

  /** Goes on from answers given through the API: their continuation, or one run to take them up. */
  private follow(plan: TurnPlan, earlier: EarlierAnswers, trailing: HistoryCall[]): Promise<LiveTurn> {
    return 'continuation' in earlier ? this.continuation(plan, earlier.continuation) : this.takeUp(plan, earlier.responded, trailing);
  }

  /**
   * Runs the continuation of answers given through the API, or follows the one they started. The
   * run does not force at first, even for a re-post that asks to: the turn holding the session may
   * be the one these very answers started, between the look and the run, and a takeover would
   * cancel it. Only a turn that is not theirs is taken over.
   */
  private async takeUp(plan: TurnPlan, answered: ReadonlySet<string>, trailing: HistoryCall[]): Promise<LiveTurn> {
    const taking = async () => {
      const live = await this.liveTurn(plan.projectId, plan.sessionId);
      return live && [...answered].some((id) => live.takesUp.has(id)) ? live : undefined;
    };
    const running = async (force: boolean): Promise<LiveTurn> => {
      try {
        return await this.run({ ...plan, force, outOfBand: answered });
      } catch (error) {
        if (!isAppError(error)) throw error;
        // That continuation took the session between the look and the run…
        if (error.type === 'session-busy') {
          const live = await taking();
          if (live) return live;
          if (plan.force && !force) return running(true);
        }
        // …or took the answers up, and may have ended, before this run could claim them.
        if (error.type === 'interaction-not-pending') {
          const now = await earlierAnswers(this.deps.store, plan.projectId, plan.sessionId, trailing);
          if (now && 'continuation' in now) return this.continuation(plan, now.continuation);
        }
        throw error;
      }
    };
    return (await taking()) ?? running(false);
  }

  /** The turn that took up answers given through the API: live, or as it ended. */
  private async continuation(plan: TurnPlan, turnId: string): Promise<LiveTurn> {
    const live = await this.liveTurn(plan.projectId, plan.sessionId);
    if (live?.id === turnId) return live;
    const ended = await this.deps.store.turns.get(plan.projectId, turnId);
    if (!ended) throw new AppError('interaction-not-pending', `these answers were taken up by turn "${turnId}", which is gone; send a new message to go on`);
    return endedTurn(ended, plan.continues);
  }

  /** Attach (force with no input): the session's live turn, which must exist. */
  private async attach(projectId: string, sessionId: string): Promise<LiveTurn> {
    const live = await this.liveTurn(projectId, sessionId);
    if (live) return live;
    throw new AppError('not-found', `session "${sessionId}" has no live turn to attach to; send data.inputs.messages to start one`);
  }

  /**
   * The session's live turn, to follow from its start: this process's own, or, on a database
   * shared by replicas, the one another replica runs, relayed from there. Undefined when none runs.
   */
  async liveTurn(projectId: string, sessionId: string): Promise<LiveTurn | undefined> {
    const live = this.bySession.get(`${projectId}\u0000${sessionId}`);
    if (live) return live;
    const { store, config } = this.deps;
    const lease = await store.leases.get(projectId, sessionId);
    if (lease?.live) {
      if (lease.holder === this.leases.holder) return this.ownTurn(lease);
      if (store.notifications) {
        return followRemoteTurn(store.notifications, { projectId, sessionId, turnId: lease.turn_id, leases: store.leases, turns: store.turns, leaseTtlMs: config.leaseTtlMs });
      }
      throw new AppError('session-busy', `session "${sessionId}" runs turn "${lease.turn_id}" in another agentd process; attach to it there`);
    }
    return undefined;
  }

  /**
   * Stops the session's live turn because someone asked (a console's Stop): it ends `cancelled`,
   * as a turn a takeover cancels does. A turn another replica runs is asked to stop through its
   * lease and stops at its next renewal. The id of the turn asked to stop; undefined when none ran.
   */
  async stop(projectId: string, sessionId: string): Promise<string | undefined> {
    const live = this.bySession.get(`${projectId}\u0000${sessionId}`);
    if (live) {
      live.controller.abort(STOPPED);
      await live.done;
      return live.id;
    }
    const { store } = this.deps;
    const lease = await store.leases.get(projectId, sessionId);
    if (!lease?.live || lease.turn_id.startsWith('delete-')) return undefined;
    if (lease.holder === this.leases.holder) return (await this.stopOwn(lease, STOPPED))?.id;
    return (await store.leases.requestCancel(projectId, sessionId, lease.turn_id)) ? lease.turn_id : undefined;
  }

  /**
   * The turn of this process that holds `lease`: running, or still being set up, which is waited
   * for (a turn's session is taken before it is set up). Undefined once it has ended.
   */
  private async ownTurn(lease: Lease): Promise<LiveTurn | undefined> {
    return this.live.get(lease.turn_id) ?? (await this.starting.get(lease.turn_id)?.turn.catch(() => undefined));
  }

  /**
   * Stops this process's turn that holds `lease`, one still being set up at once too, and resolves
   * once it has ended. Undefined when it had ended, or was refused before it started.
   */
  private async stopOwn(lease: Lease, reason: Error): Promise<LiveTurn | undefined> {
    (this.live.get(lease.turn_id)?.controller ?? this.starting.get(lease.turn_id)?.controller)?.abort(reason);
    const turn = await this.ownTurn(lease);
    await turn?.done;
    return turn;
  }

  /**
   * Lets other replicas attach to the turns this process runs (PostgreSQL only). Resolves to the
   * way to stop taking new followers.
   */
  answerFollowers(): Promise<() => Promise<void>> {
    const { store, log } = this.deps;
    if (!store.notifications) return Promise.resolve(async () => {});
    return answerFollowers(store.notifications, (turnId) => this.live.get(turnId), log);
  }

  /** Runs a planned turn once the session is ours: the one-live-turn rule is the store's lease. */
  async run(plan: TurnPlan): Promise<LiveTurn> {
    const turnId = newId();
    // The turn's, from its setup on: a stop while it is set up ends what the setup waits on.
    const controller = new AbortController();
    const turn = plan.privateSession ? this.begin(plan, turnId, controller) : this.takeAndBegin(plan, turnId, controller);
    if (plan.signal) forwardAbort(plan.signal, controller, turn);
    if (plan.privateSession) return turn;
    // Known here from before the lease is asked for: a reader that finds the lease meanwhile waits.
    this.starting.set(turnId, { turn, controller });
    void turn.catch(() => undefined).finally(() => this.starting.delete(turnId));
    return turn;
  }

  private async takeAndBegin(plan: TurnPlan, turnId: string, controller: AbortController): Promise<LiveTurn> {
    await this.leases.take(plan, turnId, (lease, reason) => this.stopOwn(lease, reason));
    try {
      return await this.begin(plan, turnId, controller);
    } catch (error) {
      await this.deps.store.leases.release(plan.projectId, plan.sessionId, turnId);
      throw error;
    }
  }

  /**
   * Throws what starting `template` would throw without a request's secrets, which are never
   * stored: a turn continued after an answer through the API runs with the server's own keys.
   */
  async checkRunsWithoutSecrets(projectId: string, template: EffectiveTemplate): Promise<void> {
    this.engines.checkRunsWithoutSecrets(template, await openProjectConnection(this.deps.store, projectId, template.llm));
  }

  private async begin(given: TurnPlan, turnId: string, controller: AbortController): Promise<LiveTurn> {
    const { config } = this.deps;
    const setup = await this.setup.run(given, turnId, controller);
    const { plan, engine, prepared, history, skills, trace, redact, secretValues } = setup;
    const { projectId, sessionId } = plan;
    // Replayed to readers other than its sender, the continued message is masked as the events are.
    const continues = plan.continues && redact(plan.continues);
    const turn = new LiveTurn({ id: turnId, projectId, sessionId, traceId: trace.traceId, spanId: trace.spanId, continues, takesUp: setup.outOfBand, revision: plan.record.revision as RanRevision | undefined, controller });
    const key = `${projectId}\u0000${sessionId}`;
    this.live.set(turnId, turn);
    this.bySession.set(key, turn);
    const started = prepared
      ? prepared.start({ turnId, sessionId, traceId: trace.traceId, history, ...(skills ? { notes: [skills] } : {}), streaming: plan.streaming, secretValues }, controller.signal)
      : stoppedBefore(controller.signal);
    const events = plan.told?.length ? tellingFirst(started, plan.told) : started;
    const state: PausedState = {
      template: plan.template,
      history,
      references: plan.record.references,
      revision: plan.record.revision,
      ...(continues ? { continues } : {}),
    };
    // Built only when spans are exported and the caller's trace is sampled: nothing on the path otherwise.
    const span = this.deps.spans && trace.sampled ? await this.setup.span(this.deps.spans, setup) : undefined;
    const metrics = this.deps.metrics?.turn(engine.kind, engine.template.llm.provider ?? 'unknown');
    const how = { redact, redactEvent: makeEventRedactor(secretValues), state, unrecorded: plan.privateSession ? setup.record : undefined, span, metrics };
    const deadline = setTimeout(() => {
      turn.controller.abort(new AppError('turn-timeout', `the turn ran longer than ${config.turnTimeoutMs} ms (AGENTD_TURN_TIMEOUT_MS) and was stopped`));
    }, config.turnTimeoutMs);
    deadline.unref();
    void this.driver.drive(turn, events, how).finally(async () => {
      clearTimeout(deadline);
      if (this.bySession.get(key) === turn) this.bySession.delete(key);
      await prepared?.release();
    });
    return turn;
  }

  /** Frees, every `intervalMs`, the sessions of replicas that died (`TurnLeases.sweepExpired`); returns the way to stop. */
  sweepExpiredLeases(intervalMs: number): () => void {
    return this.leases.sweepExpired(intervalMs);
  }

  /** Turn worker threads end once their turns have; no turn starts after this. Parked harness processes write their sessions down and end. */
  async close(): Promise<void> {
    this.leases.close();
    await this.engines.close(this.deps.log);
  }

  /**
   * Graceful stop: live turns get `graceMs` to end by themselves, then are aborted and recorded as
   * interrupted, as are turns still being set up then.
   */
  async shutdown(graceMs: number): Promise<void> {
    const all = () => Promise.all([...this.live.values()].map((t) => t.done));
    await within(all(), graceMs);
    // One still being set up (its MCP servers connecting) is interrupted there, or it would go on
    // after the store is closed.
    const starting = [...this.starting.values()];
    for (const { controller } of starting) controller.abort(INTERRUPTED);
    await Promise.all(starting.map(({ turn }) => turn.catch(() => undefined)));
    for (const turn of this.live.values()) turn.controller.abort(INTERRUPTED);
    await all();
  }
}

/** Aborts `controller` when `signal` aborts, until `turn` has ended: one signal outlives many turns. */
function forwardAbort(signal: AbortSignal, controller: AbortController, turn: Promise<LiveTurn>): void {
  const abort = () => controller.abort(signal.reason);
  if (signal.aborted) return abort();
  signal.addEventListener('abort', abort, { once: true });
  void turn.then((live) => live.done, () => undefined).finally(() => signal.removeEventListener('abort', abort));
}

/** The events of a turn stopped before it started: none, then why it was stopped. */
async function* stoppedBefore(signal: AbortSignal): AsyncGenerator<AgentEvent> {
  throw signal.reason;
}

/** The engine's events with `told` results right after its `turn_start`, as results of this turn. */
async function* tellingFirst(events: AsyncGenerator<AgentEvent>, told: readonly EventOf<'tool_result'>['data'][]): AsyncGenerator<AgentEvent> {
  let started = false;
  for await (const event of events) {
    yield event;
    if (started) continue;
    started = true;
    for (const data of told) yield { type: 'tool_result', data };
  }
}
