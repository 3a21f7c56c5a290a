import { randomUUID } from 'node:crypto';
import type { Config } from '../config.ts';
import { doneEvent, type AgentEvent, type EventOf } from '../contract/events.ts';
import { collectCalls, type HistoryCall } from '../agent/history.ts';
import type { RanRevision } from '../contract/events.ts';
import type { Message } from '../contract/messages.ts';
import type { Placement, PreparedTurn } from '../agent/engine.ts';
import { serverKeys } from '../agent/model.ts';
import { AppError, isAppError } from '../errors.ts';
import { newId } from '../ids.ts';
import { earlierAnswers, readInBandAnswers, type EarlierAnswers } from '../interactions/in-band.ts';
import type { Store } from '../store/db.ts';
import type { Lease } from '../store/leases.ts';
import type { NewTurn, TurnEnd } from '../store/turns.ts';
import { OPEN_INTERACTION_STATUSES } from '../store/interactions.ts';
import { outageLog, type OutageLog } from '../store/outage-log.ts';
import { databaseUnavailable } from '../store/unavailable.ts';
import { TurnFolder } from '../stream/fold.ts';
import { makeEventRedactor, makeRedactor, redactError } from '../telemetry/redact.ts';
import type { ServiceMetrics, TurnMetrics } from '../telemetry/metrics.ts';
import type { Tracing } from '../telemetry/tracing.ts';
import { startSpan } from '../telemetry/trace-context.ts';
import { requestAttributes, TurnSpan } from '../telemetry/turn-span.ts';
import { deliverAttachments } from './attachments.ts';
import { FolderSetup, harnessStateFolder, sessionFolder } from './folders.ts';
import { TurnEngines } from './turn-engines.ts';
import { installSkills } from '../agent/skills.ts';
import type { EffectiveTemplate } from '../agent/template.ts';
import { endedTurn } from './ended-turn.ts';
import { LiveTurn } from './live-turn.ts';
import type { PausedState } from './paused-state.ts';
import { planInvoke, type StartTurn, type TurnPlan } from './invoke-plan.ts';
import { openProjectConnection } from './project-connection.ts';
import { answerFollowers, followRemoteTurn } from './turn-relay.ts';

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
 * readers follow its events, and a reader leaving never stops it.
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
  /** Names this process on the leases it holds. */
  private readonly holder = randomUUID();
  /** The server's own provider keys: an upstream error or a model may echo them too. */
  private readonly serverSecrets: Array<string | undefined>;
  private readonly engines: TurnEngines;
  /** Turns whose leases this process renews, all in one statement each period (`renewLeases`). */
  private readonly leased = new Map<string, LiveTurn>();
  private renewals: NodeJS.Timeout | undefined;
  private readonly renewFailures: OutageLog;

  constructor(deps: TurnServiceDeps) {
    this.deps = deps;
    this.renewFailures = outageLog(deps.log, 'renew the session leases');
    this.engines = new TurnEngines(deps.config);
    this.serverSecrets = serverKeys(deps.config);
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
      if (lease.holder === this.holder) return this.ownTurn(lease);
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
    if (lease.holder === this.holder) return (await this.stopOwn(lease, STOPPED))?.id;
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
    if (plan.signal) follow(plan.signal, controller, turn);
    if (plan.privateSession) return turn;
    // Known here from before the lease is asked for: a reader that finds the lease meanwhile waits.
    this.starting.set(turnId, { turn, controller });
    void turn.catch(() => undefined).finally(() => this.starting.delete(turnId));
    return turn;
  }

  private async takeAndBegin(plan: TurnPlan, turnId: string, controller: AbortController): Promise<LiveTurn> {
    await this.takeSession(plan, turnId);
    try {
      return await this.begin(plan, turnId, controller);
    } catch (error) {
      await this.deps.store.leases.release(plan.projectId, plan.sessionId, turnId);
      throw error;
    }
  }

  private async takeSession(plan: TurnPlan, turnId: string): Promise<void> {
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
      const local = got.current.holder === this.holder ? await this.stopOwn(got.current, CANCELLED) : undefined;
      if (!local) {
        // Its holder sees the request at its next renewal and stops the turn.
        await store.leases.requestCancel(projectId, sessionId, current);
        await new Promise((resolve) => setTimeout(resolve, Math.min(200, config.leaseTtlMs / 6)));
      }
    }
  }

  /**
   * Throws what starting `template` would throw without a request's secrets, which are never
   * stored: a turn continued after an answer through the API runs with the server's own keys.
   */
  async checkRunsWithoutSecrets(projectId: string, template: EffectiveTemplate): Promise<void> {
    this.engines.checkRunsWithoutSecrets(template, await openProjectConnection(this.deps.store, projectId, template.llm));
  }

  /**
   * A pause answered in band goes on under the stored revision it paused under, as one answered
   * through the API does: the references re-posted with the answer may name a newer revision by
   * now, one without the tool that waits on the answer. A template sent inline is the caller's to
   * change, and runs as sent.
   */
  private async pausedUnder(plan: TurnPlan, pausedTurnId: string | undefined): Promise<TurnPlan> {
    if (!pausedTurnId || plan.record.revision === undefined) return plan;
    const state = (await this.deps.store.pausedStates.get(plan.projectId, pausedTurnId)) as PausedState | undefined;
    if (!state?.revision) return plan;
    return { ...plan, template: state.template, record: { ...plan.record, revision: state.revision } };
  }

  /** The span of the paused turn an answer in band goes on from, unless it is the new turn's parent already. */
  private async pausedSpan(projectId: string, pausedTurnId: string, parentSpanId: string | undefined): Promise<{ traceId: string; spanId: string } | undefined> {
    const paused = await this.deps.store.turns.get(projectId, pausedTurnId);
    return paused && paused.span_id !== parentSpanId ? { traceId: paused.trace_id, spanId: paused.span_id } : undefined;
  }

  private async begin(given: TurnPlan, turnId: string, controller: AbortController): Promise<LiveTurn> {
    const { store, config } = this.deps;
    const { projectId, sessionId, messages, secrets } = given;
    const outOfBand = given.outOfBand ?? new Set<string>();
    const { trailing } = collectCalls(messages);
    const answers = await readInBandAnswers(store, projectId, sessionId, messages, trailing, outOfBand);
    const plan = await this.pausedUnder(given, answers.pausedTurnId);
    // The engine and its model are settled before any answer is claimed. A project connection's key
    // is redacted like any secret of the run.
    const connection = await openProjectConnection(store, projectId, plan.template.llm);
    const engine = this.engines.for(plan.template, connection, secrets);
    const { template } = engine;

    const attachments = plan.attachments ?? [];
    // Made only for what needs it before the turn (tools make it when they first run), and given
    // back as it was found if the turn is refused before it starts.
    const folder = new FolderSetup(sessionFolder(config.dataDir, projectId, sessionId));
    const trace = startSpan(plan.traceparent);
    const secretValues = [...this.serverSecrets, ...Object.values(secrets), plan.credentials, connection?.api_key];
    const redact = makeRedactor(secretValues);
    // What the caller sent may repeat its own secrets (in tags, meta…); the record never does.
    const request = redact(plan.record);
    const record: NewTurn = {
      id: turnId,
      project_id: projectId,
      session_id: sessionId,
      trace_id: trace.traceId,
      span_id: trace.spanId,
      ...(trace.parentSpanId ? { parent_span_id: trace.parentSpanId } : {}),
      request,
      started_at: new Date().toISOString(),
    };
    let prepared: PreparedTurn | undefined;
    let skills: string | undefined;
    let history: Message[] = answers.history;
    let recorded = false;
    try {
      // Before any answer is claimed, and before anything is written into the folder: what refuses
      // the turn here (an unreachable MCP server, a busy harness pool) consumes none of the caller's
      // decisions and leaves no files. What it takes is held to the turn's end, and given back
      // below if the turn is refused before it starts.
      prepared = await engine
        .prepare({
          workdir: folder.path,
          makeFolder: () => folder.make(),
          stateDir: harnessStateFolder(config.dataDir, projectId, sessionId),
          credentials: plan.credentials,
          privateSession: plan.privateSession === true,
          lastWords: () => this.lastWords(projectId, sessionId),
          signal: controller.signal,
        })
        .catch((error: unknown) => {
          // Stopped while being prepared (its MCP servers connecting, say): it ends below as any
          // stopped turn does, having written, claimed and started nothing.
          if (controller.signal.aborted) return undefined;
          throw error;
        });
      if (prepared) {
        if (engine.needsFolder || template.skills.length || attachments.length) await folder.make();
        // In the folder before any engine starts (a harness, a turn thread), and named in their messages.
        const delivered = attachments.length ? await deliverAttachments(folder.path, answers.history, attachments, config) : undefined;
        if (delivered) folder.wrote(delivered.undo);
        history = delivered?.history ?? answers.history;
        // Last of what is written: an earlier turn's skills are replaced, not kept aside, and only an
        // answer given meanwhile through the API (the claim below) refuses the turn after them.
        const installed = await installSkills(folder.path, template.skills, engine.skillsDir);
        folder.wrote(installed.undo);
        skills = installed.notes;
      }
      // Recorded before any answer is claimed: a server killed between the two leaves a turn that
      // the next start (or the lease sweep) records as interrupted and answers still unconsumed (one
      // given through the API is continued then), never answers resolved by a turn that never was.
      if (!plan.privateSession) {
        await store.turns.create(record);
        recorded = true;
      }
      if (prepared) {
        // An in-band answer (a client tool's result, an approval's reason) may repeat the request's secrets.
        const claimed = await claimAnswers(store, projectId, turnId, redact(answers.answered), outOfBand);
        if (!plan.privateSession) {
          // Answers given through the API to a pause this turn leaves behind are abandoned with it;
          // left `responded`, they would be continued at the next start, behind the user's back.
          const abandoned = plan.newSession ? 0 : await store.interactions.cancelPending(projectId, sessionId, [], OPEN_INTERACTION_STATUSES);
          // Every pause before this turn is settled now, answered or abandoned: no turn goes on from
          // its state again, so a session keeps one conversation at most, not one per pause.
          if (claimed + abandoned > 0) await store.pausedStates.removeSession(projectId, sessionId);
        }
      }
      // A stdio server's folder, made for the setup that was stopped.
      if (!prepared) await folder.undo();
    } catch (error) {
      // Refused (an answer given meanwhile through the API): the turn did not happen. Left
      // `running` if even that write fails, it is recorded as interrupted once its lease lapses.
      if (recorded) await store.turns.removeUnstarted(projectId, turnId).catch(() => undefined);
      await prepared?.release();
      await folder.undo();
      throw error;
    }

    // Replayed to readers other than its sender, the continued message is masked as the events are.
    const continues = plan.continues && redact(plan.continues);
    const turn = new LiveTurn({ id: turnId, projectId, sessionId, traceId: trace.traceId, spanId: trace.spanId, continues, takesUp: outOfBand, revision: plan.record.revision as RanRevision | undefined, controller });
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
    const evaluation = plan.record.evaluation as Record<string, string | number> | undefined;
    // Built only when spans are exported and the caller's trace is sampled: nothing on the path otherwise.
    const span =
      this.deps.spans && trace.sampled
        ? new TurnSpan(this.deps.spans, {
            continues: answers.pausedTurnId ? await this.pausedSpan(projectId, answers.pausedTurnId, trace.parentSpanId) : undefined,
            traceId: trace.traceId,
            spanId: trace.spanId,
            parentSpanId: trace.parentSpanId,
            internal: plan.privateSession === true,
            startedAt: record.started_at!,
            calls: trailing,
            links: request.links,
            attributes: {
              'gen_ai.conversation.id': sessionId,
              'gen_ai.provider.name': template.llm.provider,
              'gen_ai.request.model': template.llm.model,
              'agentd.project.id': projectId,
              'agentd.turn.id': turnId,
              'agentd.evaluation.run_id': evaluation?.run_id,
              'agentd.evaluation.result_id': evaluation?.result_id,
              ...requestAttributes(request),
            },
          })
        : undefined;
    const metrics = this.deps.metrics?.turn(engine.kind, template.llm.provider ?? 'unknown');
    const how = { redact, redactEvent: makeEventRedactor(secretValues), state, unrecorded: plan.privateSession ? record : undefined, span, metrics };
    const deadline = setTimeout(() => {
      turn.controller.abort(new AppError('turn-timeout', `the turn ran longer than ${config.turnTimeoutMs} ms (AGENTD_TURN_TIMEOUT_MS) and was stopped`));
    }, config.turnTimeoutMs);
    deadline.unref();
    void this.drive(turn, events, how).finally(async () => {
      clearTimeout(deadline);
      if (this.bySession.get(key) === turn) this.bySession.delete(key);
      await prepared?.release();
    });
    return turn;
  }

  private async drive(turn: LiveTurn, events: AsyncGenerator<AgentEvent>, how: DriveOptions): Promise<void> {
    const { redact, redactEvent, state, unrecorded, span, metrics } = how;
    const { store, log } = this.deps;
    const folder = new TurnFolder();
    // Messages and thoughts begun and not yet ended: a turn that fails midway, whatever its engine
    // (harnesses and a dying turn thread included), ends them before its error, so every reader
    // (the fold, each projection, a replay) gets whole parts.
    const unended = new Map<string, 'message_end' | 'thought_end'>();
    // A stream's reader takes `done` as the turn's word that it ended so, a pause as one it may
    // answer: told before the end is stored, a server killed in between would leave a turn that
    // never paused, and an approval answered for it would be dropped. It is told once stored.
    let done: AgentEvent | undefined;
    const emit = (event: AgentEvent) => {
      // The engines know nothing of stored revisions: the turn's start tells which one runs.
      if (event.type === 'turn_start' && turn.revision) event = { ...event, data: { ...event.data, revision: turn.revision } };
      if (event.type === 'message_start' || event.type === 'thought_start') unended.set(event.data.id, event.type === 'message_start' ? 'message_end' : 'thought_end');
      else if (event.type === 'message_end' || event.type === 'thought_end') unended.delete(event.data.id);
      folder.push(event);
      span?.event(event);
      metrics?.event(event);
      if (event.type === 'done') done = event;
      else turn.push(event);
    };
    let status: 'completed' | 'paused' | 'failed' | 'cancelled' | 'interrupted' = 'completed';
    if (!unrecorded) this.holdLease(turn);
    // The conversation a pause keeps may repeat the caller's secrets in its own messages; the
    // database never gets them. Masked once, at the first pause: most turns never pause.
    let stored: PausedState | undefined;
    try {
      for await (const raw of events) {
        for (const event of redactEvent(raw)) {
          if (event.type === 'interaction_request') {
            if (!stored) {
              stored = redact(state);
              await store.pausedStates.save({ projectId: turn.projectId, sessionId: turn.sessionId, turnId: turn.id, state: stored });
            }
            await store.interactions.create({
              id: event.data.id,
              project_id: turn.projectId,
              session_id: turn.sessionId,
              turn_id: turn.id,
              kind: event.data.kind,
              tool_call_id: event.data.payload.tool_call_id,
              request: { tool: event.data.tool, args: event.data.payload.input, tool_call_id: event.data.payload.tool_call_id },
            });
          }
          emit(event);
        }
      }
      if (folder.result().stop_reason === 'paused') status = 'paused';
    } catch (error) {
      const reason = turn.controller.signal.reason;
      // Out of time is the turn's own failure; any other abort stopped it from outside.
      const timedOut = turn.controller.signal.aborted && isAppError(reason) && reason.type === 'turn-timeout';
      const aborted = turn.controller.signal.aborted && !timedOut;
      const failure = aborted
        ? new AppError(isCancel(reason) ? 'turn-cancelled' : 'unavailable', reason instanceof Error ? reason.message : 'the turn was stopped')
        : timedOut
          ? (reason as AppError)
          : isAppError(error)
            ? error
            : (databaseUnavailable(error) ?? new AppError('internal', 'the turn failed unexpectedly', { cause: error }));
      const ids = { turn_id: turn.id, session_id: turn.sessionId, trace_id: turn.traceId };
      const unexpected = !isAppError(error) && failure.type === 'internal';
      if (unexpected) log.error({ err: redactError(error, redact), ...ids }, 'turn failed');
      status = aborted ? (isCancel(reason) ? 'cancelled' : 'interrupted') : 'failed';
      if (aborted && isCancel(reason) && (await store.interactions.cancelPending(turn.projectId, turn.sessionId, [], OPEN_INTERACTION_STATUSES)) > 0) {
        await store.pausedStates.removeSession(turn.projectId, turn.sessionId);
      }
      turn.failure = new AppError(failure.type, redact(failure.message), { status: failure.status, ...(failure.headers ? { headers: failure.headers } : {}) });
      // A provider that is down or refuses its key fails turns whose stream was already answered
      // 200, and evaluation cases nobody's request waits on: only this line tells the operator why.
      if (!unexpected && !aborted) log.warn({ ...ids, error: { type: failure.type, message: turn.failure.message } }, 'turn failed');
      // Through the redactor, which still holds the end of a text that might begin a secret.
      for (const [id, type] of unended) for (const event of redactEvent({ type, data: { id } })) emit(event);
      emit({ type: 'error', data: { code: failure.status, type: failure.type, message: turn.failure.message } });
      emit(doneEvent(aborted ? (status as 'interrupted' | 'cancelled') : 'error'));
    }
    const folded = folder.result();
    const end: TurnEnd = {
      status,
      stop_reason: folded.stop_reason,
      output: { messages: folded.messages, ...(folded.pending_interaction ? { pending_interaction: folded.pending_interaction } : {}) },
      usage: folded.usage,
      error: folded.error,
    };
    let unstored: AppError | undefined;
    const notRecorded = (error: unknown) => {
      unstored = databaseUnavailable(error, "agentd stores it once the database is back, to be read in the session's turns; sending the turn again would run it again");
      log.error({ err: error, turn_id: turn.id }, 'could not record the end of a turn');
    };
    if (unrecorded) {
      await store.turns.create(unrecorded, end).catch(notRecorded);
    } else {
      this.letLeaseGo(turn);
      await store.turns.finish(turn.id, end, { project_id: turn.projectId, session_id: turn.sessionId }).catch(async (error: unknown) => {
        notRecorded(error);
        if (unstored) this.recordLater(turn, end);
        // The lease goes back even when the turn's row could not be written (on PostgreSQL both were one statement).
        await store.leases.release(turn.projectId, turn.sessionId, turn.id).catch((failed: unknown) => log.error({ err: failed, turn_id: turn.id }, 'could not release a lease'));
      });
    }
    // The database went away before the turn's end was stored: it is not told as having ended
    // well (a pause stored nowhere cannot be answered); its end is stored once the database is back.
    if (unstored && !turn.failure) {
      turn.failure = new AppError(unstored.type, `the turn ran, but its end could not be stored: ${unstored.message}`, { status: unstored.status });
      turn.push({ type: 'error', data: { code: turn.failure.status, type: turn.failure.type, message: turn.failure.message } });
      done = doneEvent('error');
    }
    span?.end({ status, stopReason: folded.stop_reason, usage: folded.usage, error: turn.failure });
    metrics?.end(status, turn.failure, folded.usage);
    this.live.delete(turn.id);
    if (done) turn.push(done);
    turn.finish(folded);
  }

  /**
   * The end of a turn the database could not take (down, its disk full), written once it is back:
   * until then the turn reads as running. Only a turn still running changes, so one the lease
   * sweep has meanwhile recorded as interrupted stays so.
   */
  private recordLater(turn: LiveTurn, end: TurnEnd, delayMs = 1_000): void {
    const { store, log } = this.deps;
    const ids = { project_id: turn.projectId, session_id: turn.sessionId };
    const retry = setTimeout(() => {
      store.turns.finish(turn.id, end, ids).then(
        () => log.info({ turn_id: turn.id }, 'recorded the end of a turn once the database was back'),
        (error: unknown) => (databaseUnavailable(error) ? this.recordLater(turn, end, Math.min(delayMs * 2, RECORD_RETRY_MAX_MS)) : log.error({ err: error, turn_id: turn.id }, 'could not record the end of a turn')),
      );
    }, delayMs);
    // Never what keeps a stopping server alive: the next start records the turn as interrupted.
    retry.unref();
  }

  /** A turn's lease joins those this process renews while the turn runs. */
  private holdLease(turn: LiveTurn): void {
    this.leased.set(turn.id, turn);
    if (this.renewals) return;
    this.renewals = setInterval(() => void this.renewLeases(), this.deps.config.leaseTtlMs / 3);
    this.renewals.unref();
  }

  private letLeaseGo(turn: LiveTurn): void {
    this.leased.delete(turn.id);
    if (this.leased.size > 0 || !this.renewals) return;
    clearInterval(this.renewals);
    this.renewals = undefined;
  }

  /**
   * Renews every lease this process holds, in one statement however many turns it runs. A turn
   * whose lease comes back with a cancel request (a takeover from another process) stops; one
   * whose lease does not come back was declared dead by another process, so it stops rather than
   * run beside its successor.
   */
  private async renewLeases(): Promise<void> {
    const { store, config } = this.deps;
    const turns = [...this.leased.values()];
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
      if (!this.leased.has(turn.id)) continue;
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
  sweepExpiredLeases(intervalMs: number): () => void {
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

  /**
   * The text the session's last finished turn ended with, for an engine that loads a session of its
   * own (a harness): it must have got that far (a process parked elsewhere may still be writing it down).
   */
  private async lastWords(projectId: string, sessionId: string): Promise<string | undefined> {
    const turns = await this.deps.store.turns.listForSession(projectId, sessionId, { limit: 3 });
    const output = turns.find((t) => t.status === 'completed')?.output as { messages?: Message[] } | null | undefined;
    const last = output?.messages?.at(-1);
    return last?.role === 'assistant' && last.content.trim() ? last.content : undefined;
  }

  /** Turn worker threads end once their turns have; no turn starts after this. Parked harness processes write their sessions down and end. */
  async close(): Promise<void> {
    clearInterval(this.renewals);
    await this.engines.close(this.deps.log);
  }

  /**
   * Graceful stop: live turns get `graceMs` to end by themselves, then are aborted and recorded as
   * interrupted, as are turns still being set up then.
   */
  async shutdown(graceMs: number): Promise<void> {
    const all = () => Promise.all([...this.live.values()].map((t) => t.done));
    let timer: NodeJS.Timeout | undefined;
    const grace = new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs)));
    await Promise.race([all(), grace]);
    clearTimeout(timer);
    // One still being set up (its MCP servers connecting) is interrupted there, or it would go on
    // after the store is closed.
    const starting = [...this.starting.values()];
    for (const { controller } of starting) controller.abort(INTERRUPTED);
    await Promise.all(starting.map(({ turn }) => turn.catch(() => undefined)));
    for (const turn of this.live.values()) turn.controller.abort(INTERRUPTED);
    await all();
  }
}

/** What `drive` needs besides the turn and its events. */
interface DriveOptions {
  redact: <T>(v: T) => T;
  redactEvent: (event: AgentEvent) => AgentEvent[];
  /** What a pause keeps for the turn's continuation. */
  state: PausedState;
  /** A private session's turn, recorded only now that it ends; otherwise it is already, and leased. */
  unrecorded: NewTurn | undefined;
  span: TurnSpan | undefined;
  metrics: TurnMetrics | undefined;
}

/** The longest wait between two tries at storing a turn's end while the database is away. */
const RECORD_RETRY_MAX_MS = 30_000;

/** The abort reason that marks a turn cut short by the server stopping, as opposed to cancelled. */
const INTERRUPTED = new Error('the server is shutting down; the turn was interrupted');
/** The abort reason of a turn whose lease another process took: it is recorded as interrupted. */
const LEASE_LOST = new Error('the session lease expired and was taken over; the turn was interrupted');
/** The abort reason of a turn taken over by a newer one (`force`). */
const CANCELLED = new Error('a newer turn took over the session; this turn was cancelled');
/** The abort reason of a turn stopped on request (`POST /api/sessions/{id}/stop`). */
const STOPPED = new Error('the turn was stopped on request');
const isCancel = (reason: unknown) => reason === CANCELLED || reason === STOPPED;

/** Aborts `controller` when `signal` aborts, until `turn` has ended: one signal outlives many turns. */
function follow(signal: AbortSignal, controller: AbortController, turn: Promise<LiveTurn>): void {
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

/**
 * Marks the answers this turn consumes `resolved`, each atomically from the state it must be in
 * (in band: `pending`; out of band: `responded`), so no answer is ever consumed twice. All or
 * none: when one was answered meanwhile through the API, the others stay as they were, not
 * consumed by a turn that does not run. Returns how many it claimed.
 */
async function claimAnswers(
  store: Store,
  projectId: string,
  turnId: string,
  inBand: ReadonlyArray<{ id: string; answer: Record<string, unknown> }>,
  outOfBand: ReadonlySet<string>,
): Promise<number> {
  const claims = [
    ...inBand.filter((a) => !outOfBand.has(a.id)).map((a) => ({ id: a.id, from: 'pending' as const, answer: a.answer, via: 'in_band' })),
    ...[...outOfBand].map((id) => ({ id, from: 'responded' as const, answer: undefined, via: 'out_of_band' })),
  ];
  if (claims.length === 0) return 0;
  const failed = await store.interactions.transitionAll(
    projectId,
    claims.map((claim) => ({ id: claim.id, from: [claim.from], to: 'resolved', ...(claim.answer ? { answer: claim.answer } : {}), resolution: { via: claim.via, turn_id: turnId } })),
  );
  if (failed) throw new AppError('interaction-not-pending', `interaction "${failed}" was answered meanwhile; it cannot be answered again`);
  return claims.length;
}
