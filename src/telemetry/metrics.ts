import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { AgentEvent, Usage } from '../contract/events.ts';
import { within } from '../within.ts';
import { TurnTimeline } from './turn-timeline.ts';

/**
 * What an operator watches, in the Prometheus format (prom-client), per replica: turns and their
 * outcomes and durations, model-call latency, live turns, what waits for a human, evaluation
 * cases, retries, store queries and the event loop. Gauges that count stored things are read
 * from the database when scraped, so every replica reports the same totals.
 */

/** Seconds: a model call or a turn takes from milliseconds to many minutes. */
const DURATION_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 1800];
/** Store queries take microseconds to tens of milliseconds. */
const QUERY_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1];

/** How long a scrape waits for the counts read from the database (as long as /ready waits on it). */
const STORED_READ_MS = 2_000;

export interface MetricSources {
  liveTurns(): number;
  /** Interactions waiting for an answer, and the sessions they are in (every project's). */
  waiting(): Promise<{ interactions: number; sessions: number }>;
  casesInFlight(): number;
  /** Turns started on the server's thread and sent to a turn thread, since the start. */
  placement(): { server: number; threads: number };
  /** Turn threads started now. */
  turnThreads(): number;
  /** On PostgreSQL: NOTIFY statements this process sent and notifications it received (relayed turns, key revocations). */
  notifications?: (() => { sent: number; received: number }) | undefined;
}

/**
 * A counter that follows running totals this process keeps elsewhere, read when scraped: one
 * sample per value of `label`, or one alone (the totals' keys unused) without a label.
 */
function followTotals(registry: Registry, name: string, help: string, read: () => Record<string, number>, label?: string): void {
  const counted = new Map<string, number>();
  new Counter({ name, help, labelNames: label ? [label] : [], registers: [registry], collect() {
    for (const [value, now] of Object.entries(read())) {
      const added = now - (counted.get(value) ?? 0);
      counted.set(value, now);
      if (label) this.inc({ [label]: value }, added);
      else this.inc(added);
    }
  } });
}

export class ServiceMetrics {
  readonly registry = new Registry();
  private readonly turnsStarted: Counter<'harness'>;
  private readonly turnsFinished: Counter<'harness' | 'outcome'>;
  private readonly turnErrors: Counter<'harness' | 'type'>;
  private readonly tokens: Counter<'provider' | 'type'>;
  private readonly turnSeconds: Histogram<'harness' | 'outcome'>;
  private readonly modelCallSeconds: Histogram<'provider' | 'outcome'>;
  private readonly casesFinished: Counter<'outcome'>;
  private readonly queries: Histogram<'engine'>;

  constructor(sources: MetricSources, engine: string) {
    const registry = this.registry;
    registry.setDefaultLabels({ replica: `${os.hostname()}:${process.pid}` });
    collectDefaultMetrics({ register: registry });
    this.turnsStarted = new Counter({ name: 'agentd_turns_started_total', help: 'Turns started, by harness', labelNames: ['harness'], registers: [registry] });
    this.turnsFinished = new Counter({
      name: 'agentd_turns_finished_total',
      help: 'Turns ended, by harness and outcome (completed, paused, failed, cancelled, interrupted)',
      labelNames: ['harness', 'outcome'],
      registers: [registry],
    });
    this.turnErrors = new Counter({
      name: 'agentd_turn_errors_total',
      help: "Turns that failed, by harness and error type (the envelope's status.type: upstream-error, upstream-auth, turn-timeout, …)",
      labelNames: ['harness', 'type'],
      registers: [registry],
    });
    this.tokens = new Counter({ name: 'agentd_model_tokens_total', help: "Tokens the turns' model calls used, by provider and type (input, output), as the turns' usage reports them", labelNames: ['provider', 'type'], registers: [registry] });
    this.turnSeconds = new Histogram({ name: 'agentd_turn_duration_seconds', help: 'From a turn\'s start to its end or pause', labelNames: ['harness', 'outcome'], buckets: DURATION_BUCKETS, registers: [registry] });
    this.modelCallSeconds = new Histogram({
      name: 'agentd_model_call_duration_seconds',
      help: "One model call, from when the model was asked to its answer's last output (or the failure that ended the wait)",
      labelNames: ['provider', 'outcome'],
      buckets: DURATION_BUCKETS,
      registers: [registry],
    });
    this.casesFinished = new Counter({
      name: 'agentd_evaluation_cases_total',
      help: 'Evaluation case attempts that ended, by outcome (success, failure, retry, cancelled)',
      labelNames: ['outcome'],
      registers: [registry],
    });
    this.queries = new Histogram({ name: 'agentd_store_query_duration_seconds', help: 'Database statements, as the query layer timed them', labelNames: ['engine'], buckets: QUERY_BUCKETS, registers: [registry] });
    this.queries.zero({ engine });
    const notifications = sources.notifications;
    if (notifications) {
      followTotals(registry, 'agentd_notifications_sent_total', 'NOTIFY statements sent (a relayed turn sends about one per batch of events, per follower)', () => ({ all: notifications().sent }));
      followTotals(registry, 'agentd_notifications_received_total', 'Notifications received on the listening connection', () => ({ all: notifications().received }));
    }
    followTotals(
      registry,
      'agentd_turns_placed_total',
      "Turns started, by where they ran: on the server's thread (harness turns among them) or sent to a turn thread, as AGENTD_TURN_WORKERS_LOAD shares them out",
      () => {
        const { server, threads } = sources.placement();
        return { server, thread: threads };
      },
      'on',
    );
    new Gauge({ name: 'agentd_live_turns', help: 'Turns running in this process now', registers: [registry], collect() {
      this.set(sources.liveTurns());
    } });
    new Gauge({ name: 'agentd_turn_threads', help: 'Turn threads started now: none until the load first calls for them (AGENTD_TURN_WORKERS, AGENTD_TURN_WORKERS_LOAD)', registers: [registry], collect() {
      this.set(sources.turnThreads());
    } });
    new Gauge({ name: 'agentd_evaluation_cases_in_flight', help: 'Evaluation cases this process runs now', registers: [registry], collect() {
      this.set(sources.casesInFlight());
    } });
    // One database read per scrape for both gauges; a database that cannot answer leaves them as
    // they were. One that does not answer at all (a table locked, a pool with no connection to give)
    // is waited on for STORED_READ_MS at most, as /ready waits: the scrape still gets every other
    // metric within the scraper's timeout. The read goes on, and later scrapes wait on it rather
    // than queueing more reads behind it.
    let counts: Promise<{ interactions: number; sessions: number } | undefined> | undefined;
    const waiting = () => {
      counts ??= sources.waiting().catch(() => undefined).finally(() => setImmediate(() => (counts = undefined)));
      return within(counts, STORED_READ_MS);
    };
    new Gauge({ name: 'agentd_pending_interactions', help: 'Interactions waiting for an answer (all replicas)', registers: [registry], async collect() {
      const read = await waiting();
      if (read) this.set(read.interactions);
    } });
    new Gauge({ name: 'agentd_paused_sessions', help: 'Sessions with an interaction waiting for an answer (all replicas)', registers: [registry], async collect() {
      const read = await waiting();
      if (read) this.set(read.sessions);
    } });
    let previous = performance.eventLoopUtilization();
    new Gauge({ name: 'agentd_event_loop_utilization', help: "Share of time the server thread's event loop was busy since the last scrape (0 to 1)", registers: [registry], collect() {
      const now = performance.eventLoopUtilization();
      this.set(performance.eventLoopUtilization(now, previous).utilization);
      previous = now;
    } });
  }

  /** A turn has started: the observer its events go to, which records it and its model calls when it ends. */
  turn(harness: string, provider: string): TurnMetrics {
    this.turnsStarted.inc({ harness });
    return new TurnMetrics(this, harness, provider);
  }

  /** @internal */ finishedTurn(harness: string, outcome: string, seconds: number, errorType: string | undefined): void {
    this.turnsFinished.inc({ harness, outcome });
    this.turnSeconds.observe({ harness, outcome }, seconds);
    // Only a failure counts as an error: a turn cancelled or interrupted from outside did not fail.
    if (outcome === 'failed' && errorType) this.turnErrors.inc({ harness, type: errorType });
  }

  /** @internal */ usedTokens(provider: string, usage: Usage): void {
    this.tokens.inc({ provider, type: 'input' }, usage.input);
    this.tokens.inc({ provider, type: 'output' }, usage.output);
  }

  /** @internal */ modelCall(provider: string, outcome: 'ok' | 'error', seconds: number): void {
    this.modelCallSeconds.observe({ provider, outcome }, seconds);
  }

  caseAttempt(outcome: 'success' | 'failure' | 'retry' | 'cancelled'): void {
    this.casesFinished.inc({ outcome });
  }

  query(engine: string, ms: number): void {
    this.queries.observe({ engine }, ms / 1000);
  }
}

/** One turn's metrics, from its events as they come. */
export class TurnMetrics {
  private readonly metrics: ServiceMetrics;
  private readonly harness: string;
  private readonly provider: string;
  private readonly started = Date.now();
  private readonly timeline: TurnTimeline;

  constructor(metrics: ServiceMetrics, harness: string, provider: string) {
    this.metrics = metrics;
    this.harness = harness;
    this.provider = provider;
    this.timeline = new TurnTimeline(this.started, [], {
      modelCall: (start, end, error) => metrics.modelCall(provider, error ? 'error' : 'ok', (end - start) / 1000),
      toolRun: () => {},
    });
  }

  event(event: AgentEvent): void {
    this.timeline.event(event);
  }

  end(outcome: string, error?: { type: string; message: string }, usage?: Usage): void {
    const now = Date.now();
    this.timeline.end(now, error);
    this.metrics.finishedTurn(this.harness, outcome, (now - this.started) / 1000, error?.type);
    if (usage) this.metrics.usedTokens(this.provider, usage);
  }
}
