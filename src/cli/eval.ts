import { createInterface } from 'node:readline/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { AgentdError, allResults, caseExpected, caseFailed, caseInput, caseOutput, compareRuns, meanScore, type AgentdClient, type CaseResult } from '../client/index.ts';
import type { FlagValues } from './args.ts';
import { metricsTable } from './metrics-table.ts';
import { ProgressReporter } from './progress.ts';
import { CONNECTION_FLAGS, CONNECTION_HELP, CliError, durationFlag, remoteClient, numberFlag, runSubcommand } from './remote.ts';
import { readJsonFile } from './requests.ts';
import { RUN_LIMITS } from '../contract/evaluation-limits.ts';
import { terminalWidth, textTable, wrapWords } from './text-table.ts';

/** The built-in agent with its default template: a revision every project can evaluate. */
const BUILTIN_AGENT = 'agenta:builtin:agent:v0';

const USAGE = `Usage:
  agentd eval run --testset ID [agent] [options]
  agentd eval show RUN [--cases [--failed]] [--json]
  agentd eval compare RUN_A RUN_B [--json]
  agentd eval stop RUN

run      Creates an evaluation run over a test set, shows its progress, then its
         metrics. Exits 0 when every case succeeded and passed its evaluators, 1
         when some failed or scored low or the run did not finish, so it fits in
         a CI pipeline. Ctrl-C asks whether to stop the run or leave it running.
           --testset ID            a test set revision id (or a test set's id:
                                   its newest revision)
         the agent (default: the built-in agent with its default template):
           --revision ID           a workflow revision
           --app SLUG              an application's newest revision (of its
                                   first variant)
           --variant NAME          with --app: that variant's newest revision
           --env NAME              with --app: the revision environment NAME
                                   deploys for it
         and:
           --repeats N             runs per test case, 1-${RUN_LIMITS.repeats} (default 1)
           --batch-size N          cases in flight at once, 1-${RUN_LIMITS.batchSize} (default 10)
           --max-retries N         retries of a failed case, 0-${RUN_LIMITS.maxRetries} (default 0)
           --retry-delay DURATION  wait before a retry, e.g. 2s (whole seconds;
                                   500ms waits 1s; default 0s; at most ${RUN_LIMITS.retryDelayS / 60}m)
           --evaluators FILE       a JSON list such as [{"kind": "exact_match"}]
           --name NAME             the run's name
           --json                  at the end, the run and its metrics as JSON
show     A run's status, progress and metrics; with --cases each case (input,
         expected, output, scores, attempts, duration), --failed only those that
         failed.
compare  Two runs of one test set, case by case: what got better or worse, with
         score and duration deltas. Exits 1 when a case of RUN_B is worse than
         in RUN_A (for CI).
stop     Stops a running run: cases in flight are cancelled, the rest never
         start.

${CONNECTION_HELP}`;

const FLAGS = {
  testset: { type: 'string' },
  revision: { type: 'string' },
  app: { type: 'string' },
  variant: { type: 'string' },
  env: { type: 'string' },
  repeats: { type: 'string' },
  'batch-size': { type: 'string' },
  'max-retries': { type: 'string' },
  'retry-delay': { type: 'string' },
  evaluators: { type: 'string' },
  name: { type: 'string' },
  cases: { type: 'boolean' },
  failed: { type: 'boolean' },
  json: { type: 'boolean' },
  ...CONNECTION_FLAGS,
} as const;

type Run = Awaited<ReturnType<AgentdClient['evaluations']['get']>>['evaluation'];
type Values = FlagValues<typeof FLAGS>;

const ended = (run: Run) => !['pending', 'running'].includes(run.data.status);
const seconds = (ms: number | undefined) => (ms === undefined ? '' : `${(ms / 1000).toFixed(2)}s`);
const score = (n: number | undefined) => (n === undefined ? '-' : n.toFixed(2));

async function report(client: AgentdClient, run: Run, json: boolean): Promise<number> {
  const { metrics } = await client.evaluations.metrics({ metrics: { run_id: run.id } });
  const { progress } = run.data;
  if (json) {
    process.stdout.write(`${JSON.stringify({ evaluation: run, metrics })}\n`);
  } else {
    const width = terminalWidth();
    const counts = [`${progress.success} succeeded,`, `${progress.failure} failed,`, `${progress.cancelled} cancelled,`, `${progress.pending + progress.running} left of ${progress.total}`];
    process.stdout.write(wrapWords([`run ${run.id}:`, `${run.data.status} —`, ...counts], width));
    if (run.data.error) process.stdout.write(wrapWords(['error:', ...run.data.error.message.split(' ')], width));
    if (metrics[0]) process.stdout.write(`\n${metricsTable(metrics[0], width)}`);
  }
  return run.data.status === 'success' ? 0 : 1;
}

/**
 * Each case on a line, numbered by its test case's place in the test set and, past the first
 * repeat, `.repeat` (so a filtered table keeps the numbers), cut to the terminal's width: the
 * texts give up room first.
 */
function casesTable(cases: Array<[number: number, result: CaseResult]>): string {
  const rows = [['case', 'status', 'input', 'expected', 'output', 'scores', 'tries', 'time']];
  for (const [n, r] of cases) {
    const scores = (r.scores ?? []).map((s) => `${s.name} ${s.error ? 'error' : s.pass === false ? 'fail' : score(s.score)}`).join(', ');
    rows.push([`${n}${r.repeat_idx ? `.${r.repeat_idx}` : ''}`, caseFailed(r) && r.status !== 'failure' ? 'scored low' : r.status, caseInput(r), caseExpected(r), caseOutput(r), scores, String(r.attempts.length), seconds(r.duration_ms)]);
  }
  return textTable(rows, { right: [6, 7], width: terminalWidth(), shrink: [2, 3, 4, 5] });
}

async function show(client: AgentdClient, id: string, values: Values): Promise<number> {
  const run = (await client.evaluations.get(id)).evaluation;
  if (!values.cases) return report(client, run, values.json === true);
  // Results list in test set order, repeat by repeat: a test case's number is where it first shows.
  const numbers = new Map<string, number>();
  const numbered = (await allResults(client, id)).map((r) => {
    if (!numbers.has(r.testcase_id)) numbers.set(r.testcase_id, numbers.size + 1);
    return [numbers.get(r.testcase_id)!, r] as [number, CaseResult];
  });
  const cases = numbered.filter(([, r]) => !values.failed || caseFailed(r));
  if (values.json) process.stdout.write(`${JSON.stringify({ evaluation: run, results: cases.map(([, r]) => r) })}\n`);
  else process.stdout.write(cases.length ? casesTable(cases) : values.failed ? 'no case failed\n' : 'no case has run yet\n');
  return run.data.status === 'success' ? 0 : 1;
}

async function compare(client: AgentdClient, a: string, b: string, json: boolean): Promise<number> {
  const [ra, rb] = await Promise.all([allResults(client, a), allResults(client, b)]);
  const cases = compareRuns(ra, rb);
  // Runs of two test sets share no case: all "in one run only", nothing worse, and a CI job that
  // named the wrong run would pass.
  if (ra.length && rb.length && cases.every((c) => !c.a || !c.b)) {
    throw new CliError(`runs ${a} and ${b} have no test case in common; compare two runs of one test set (agentd eval show RUN --json names a run's testset_steps)`);
  }
  const count = (change: string) => cases.filter((c) => c.change === change).length;
  const worse = count('worse');
  if (json) {
    process.stdout.write(`${JSON.stringify({ better: count('better'), worse, same: count('same'), cases })}\n`);
    return worse ? 1 : 0;
  }
  const changed = cases.filter((c) => c.change !== 'same');
  if (changed.length) {
    const rows = [['change', 'input', 'A output', 'B output', 'score A→B', 'Δ time']];
    for (const c of changed) {
      const some = (c.a ?? c.b)!;
      const delta = c.durationDelta === undefined ? '' : `${c.durationDelta >= 0 ? '+' : '-'}${seconds(Math.abs(c.durationDelta))}`;
      rows.push([c.change, caseInput(some), c.a ? caseOutput(c.a) : '', c.b ? caseOutput(c.b) : '', `${score(c.a && meanScore(c.a))}→${score(c.b && meanScore(c.b))}`, delta]);
    }
    process.stdout.write(textTable(rows, { right: [4, 5], width: terminalWidth(), shrink: [1, 2, 3] }));
  }
  const extra = count('only in A') + count('only in B');
  process.stdout.write(`${changed.length ? '\n' : ''}${count('better')} better, ${worse} worse, ${count('same')} the same${extra ? `, ${extra} in one run only` : ''}\n`);
  return worse ? 1 : 0;
}

/** The revision the flags name: --revision, else --app (with --variant or --env), else the built-in agent. */
async function applicationRevision(client: AgentdClient, values: Values): Promise<string> {
  if (values.revision) {
    if (values.app || values.variant || values.env) throw new CliError('--revision names the agent by itself; leave out --app, --variant and --env');
    return values.revision;
  }
  if (!values.app) {
    if (values.variant || values.env) throw new CliError('--variant and --env pick a revision of an application: name it with --app SLUG');
    return BUILTIN_AGENT;
  }
  if (values.variant && values.env) throw new CliError('--variant and --env each pick the revision; give one');
  const resolved = await client.workflows.resolve({
    references: {
      application: { slug: values.app },
      ...(values.variant ? { application_variant: { slug: values.variant } } : {}),
      ...(values.env ? { environment: { slug: values.env } } : {}),
    },
  });
  return resolved.revision.id;
}

/** A line to the terminal on stderr, wrapped to its width between the given words (commands stay whole). */
const tell = (words: string[]) => process.stderr.write(wrapWords(words, terminalWidth(process.stderr)));

/**
 * Ctrl-C while a run is watched: on a terminal, asks whether to stop the run on the server or
 * leave it running; elsewhere there is nobody to ask, and it is left running. Either way it says
 * which, and how to do the other.
 */
async function interrupted(client: AgentdClient, id: string): Promise<number> {
  process.stderr.write('\n');
  let stop = false;
  if (process.stdin.isTTY) {
    const rl = createInterface({ input: process.stdin, output: process.stderr });
    const answer = await Promise.race([rl.question('Stop the run on the server too? [y/N] '), new Promise<string>((resolve) => rl.once('SIGINT', () => resolve('')))]);
    rl.close();
    stop = /^y(es)?$/i.test(answer.trim());
  }
  if (stop) {
    await client.evaluations.stop(id);
    tell([`stopped run ${id}:`, 'its cases in flight were cancelled']);
  } else {
    tell([`left run ${id} running:`, `agentd eval show ${id}`, 'follows it,', `agentd eval stop ${id}`, 'stops it']);
  }
  return 130;
}

/** How long `eval run` keeps polling a server it cannot reach (a restart) before it gives up. */
const LOST_CONTACT_MS = 60_000;

async function run(client: AgentdClient, values: Values): Promise<number> {
  if (!values.testset) throw new CliError('--testset is required (see agentd eval --help)');
  const evaluators = values.evaluators ? readJsonFile(values.evaluators, '--evaluators') : undefined;
  if (evaluators !== undefined && !Array.isArray(evaluators)) throw new CliError('--evaluators must hold a JSON list of evaluators');
  const concurrency = {
    batch_size: numberFlag(values['batch-size'], 'batch-size', 10, 1, RUN_LIMITS.batchSize),
    max_retries: numberFlag(values['max-retries'], 'max-retries', 0, 0, RUN_LIMITS.maxRetries),
    // The API counts whole seconds: a shorter delay is rounded up, never down to none.
    retry_delay: Math.ceil(durationFlag(values['retry-delay'], 'retry-delay', 0, RUN_LIMITS.retryDelayS * 1000) / 1000),
  };
  const repeats = numberFlag(values.repeats, 'repeats', 1, 1, RUN_LIMITS.repeats);
  const application = await applicationRevision(client, values);
  const { evaluation } = await client.evaluations.create({
    ...(values.name ? { name: values.name } : {}),
    data: {
      testset_steps: [values.testset],
      application_steps: [application],
      repeats,
      concurrency,
      ...(evaluators ? { evaluators: evaluators as never } : {}),
    },
  });
  tell([`run ${evaluation.id}`, 'started', `(agentd eval show ${evaluation.id})`]);
  const stopRequested = new AbortController();
  const onSigint = () => stopRequested.abort();
  process.once('SIGINT', onSigint);
  try {
    const progress = new ProgressReporter();
    let current = evaluation;
    let lostSince: number | undefined;
    const toCounts = (r: Run) => ({ total: r.data.progress.total, done: r.data.progress.success + r.data.progress.failure + r.data.progress.cancelled, failed: r.data.progress.failure, inFlight: r.data.progress.running });
    while (!ended(current)) {
      progress.update(toCounts(current));
      await sleep(500, undefined, { signal: stopRequested.signal }).catch(() => undefined);
      if (stopRequested.signal.aborted) return await interrupted(client, current.id);
      try {
        current = (await client.evaluations.get(current.id)).evaluation;
        lostSince = undefined;
      } catch (error) {
        // The run goes on on the server: a restart or a dropped connection is waited out for a
        // while, and past that the error says how to pick the run up again.
        const transient = error instanceof AgentdError && (error.status.type === 'network' || error.status.code >= 500);
        lostSince ??= Date.now();
        if (!transient || Date.now() - lostSince > LOST_CONTACT_MS) {
          process.stderr.write('\n');
          tell(['lost contact while following', `run ${current.id};`, 'it goes on on the server:', `agentd eval show ${current.id}`]);
          throw error;
        }
      }
    }
    progress.finish(toCounts(current));
    const status = await report(client, current, values.json === true);
    // A run that could not run or was stopped says why in its report; one with failed cases says where to read them.
    if (current.data.status !== 'errors' && (status !== 0 || !evaluators?.length)) return status;
    // For CI a case its evaluators fail (or could not score) has failed too, as a failed turn has.
    const results = await allResults(client, current.id);
    const failed = results.filter((r) => r.status === 'failure').length;
    const low = results.filter((r) => r.status !== 'failure' && caseFailed(r)).length;
    if (failed + low === 0) return status;
    const plural = (n: number) => `${n} case${n === 1 ? '' : 's'}`;
    const said = [...(failed ? [`${plural(failed)} failed${low ? ',' : ''}`] : []), ...(low ? [`${failed ? low : plural(low)} scored low`] : [])];
    tell([...said, `(agentd eval show ${current.id} --cases --failed)`]);
    return 1;
  } finally {
    process.off('SIGINT', onSigint);
  }
}

export function evalCommand(argv: string[]): Promise<number> {
  return runSubcommand('eval', argv, FLAGS, USAGE, async (sub, values, positionals) => {
    // Made once the command line is known good: a mistyped subcommand is told as one, not as a missing key.
    const client = () => remoteClient(values);
    switch (sub) {
      case 'run':
        return await run(client(), values);
      case 'show': {
        const [id] = positionals;
        if (!id) throw new CliError('agentd eval show needs the run id: agentd eval show <id>');
        return await show(client(), id, values);
      }
      case 'compare': {
        const [a, b, ...extra] = positionals;
        if (!a || !b || extra.length) throw new CliError('agentd eval compare takes two run ids: agentd eval compare <run A> <run B>');
        return await compare(client(), a, b, values.json === true);
      }
      case 'stop': {
        const [id] = positionals;
        if (!id) throw new CliError('agentd eval stop needs the run id: agentd eval stop <id>');
        const stopped = (await client().evaluations.stop(id)).evaluation;
        process.stdout.write(`run ${id}: ${stopped.data.status}\n`);
        return 0;
      }
      default:
        throw new CliError(`unknown eval command "${sub}"; use run, show, compare or stop`);
    }
  });
}
