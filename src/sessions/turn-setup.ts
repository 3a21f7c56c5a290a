import type { Config } from '../config.ts';
import type { Message } from '../contract/messages.ts';
import type { PreparedTurn, TurnEngine } from '../agent/engine.ts';
import { collectCalls, type HistoryCall } from '../agent/history.ts';
import { serverKeys } from '../agent/model.ts';
import { installSkills } from '../agent/skills.ts';
import { AppError } from '../errors.ts';
import { readInBandAnswers, type InBandAnswers } from '../interactions/in-band.ts';
import type { Store } from '../store/db.ts';
import { OPEN_INTERACTION_STATUSES } from '../store/interactions.ts';
import type { NewTurn } from '../store/turns.ts';
import { makeRedactor, type Redactor } from '../telemetry/redact.ts';
import type { Tracing } from '../telemetry/tracing.ts';
import { startSpan, type TraceContext } from '../telemetry/trace-context.ts';
import { requestAttributes, TurnSpan } from '../telemetry/turn-span.ts';
import { deliverAttachments } from './attachments.ts';
import { FolderSetup, harnessStateFolder, sessionFolder } from './folders.ts';
import type { TurnPlan } from './invoke-plan.ts';
import type { PausedState } from './paused-state.ts';
import { openProjectConnection } from './project-connection.ts';
import type { TurnEngines } from './turn-engines.ts';

/**
 * What happens to a turn between taking its session and starting: its answers read and claimed,
 * its engine settled and prepared, its folder written, the turn recorded. Apart from running it
 * because all of this may refuse the turn, and a refused turn must leave nothing behind.
 */

/** A turn set up to start. */
export interface SetUpTurn {
  /** The plan it runs: a pause answered in band runs under the revision it paused under. */
  plan: TurnPlan;
  engine: TurnEngine;
  /** Undefined when the turn was stopped while it was set up: it ends at once, as stopped. */
  prepared: PreparedTurn | undefined;
  /** The conversation it starts from, attachments named in it. */
  history: Message[];
  /** The notes on the skills installed for it. */
  skills: string | undefined;
  answers: InBandAnswers;
  /** The calls the conversation ends with, which the turn answers. */
  trailing: HistoryCall[];
  /** Interactions answered through the API that this turn takes up. */
  outOfBand: ReadonlySet<string>;
  trace: TraceContext;
  /** What the caller sent, masked. */
  request: Record<string, unknown>;
  /** Its row; a private session's turn is stored only as it ends. */
  record: NewTurn;
  /** Every secret of the run, masked by `redact` wherever the turn's text goes. */
  secretValues: Array<string | undefined>;
  redact: Redactor;
}

export class TurnSetup {
  /** The server's own provider keys: an upstream error or a model may echo them too. */
  private readonly serverSecrets: Array<string | undefined>;
  private readonly deps: { store: Store; config: Config; engines: TurnEngines };

  constructor(deps: { store: Store; config: Config; engines: TurnEngines }) {
    this.deps = deps;
    this.serverSecrets = serverKeys(deps.config);
  }

  /**
   * Sets up the turn `turnId` of a plan whose session is taken. Refused (an unreachable MCP server,
   * an answer given meanwhile through the API), it throws, having claimed, recorded and written nothing.
   */
  async run(given: TurnPlan, turnId: string, controller: AbortController): Promise<SetUpTurn> {
    const { store, config } = this.deps;
    const { projectId, sessionId, messages, secrets } = given;
    const outOfBand = given.outOfBand ?? new Set<string>();
    const { trailing } = collectCalls(messages);
    const answers = await readInBandAnswers(store, projectId, sessionId, messages, trailing, outOfBand);
    const plan = await this.pausedUnder(given, answers.pausedTurnId);
    // The engine and its model are settled before any answer is claimed. A project connection's key
    // is redacted like any secret of the run.
    const connection = await openProjectConnection(store, projectId, plan.template.llm);
    const engine = this.deps.engines.for(plan.template, connection, secrets);
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
    return { plan, engine, prepared, history, skills, answers, trailing, outOfBand, trace, request, record, secretValues, redact };
  }

  /** The turn's span, for a caller whose trace is sampled; the span it continues, when it goes on from a pause. */
  async span(spans: Tracing, setup: SetUpTurn): Promise<TurnSpan> {
    const { plan, engine, answers, trace, request, record, trailing } = setup;
    const { projectId, sessionId } = plan;
    const { template } = engine;
    const evaluation = plan.record.evaluation as Record<string, string | number> | undefined;
    return new TurnSpan(spans, {
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
        'agentd.turn.id': record.id,
        'agentd.evaluation.run_id': evaluation?.run_id,
        'agentd.evaluation.result_id': evaluation?.result_id,
        ...requestAttributes(request),
      },
    });
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
