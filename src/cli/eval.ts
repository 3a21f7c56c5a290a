import { setTimeout as sleep } from 'node:timers/promises';
import type { AgentdClient } from '../client/index.ts';
import { parseCommand } from './args.ts';
import { metricsTable } from './metrics-table.ts';
import { ProgressReporter } from './progress.ts';
import { CONNECTION_FLAGS, CONNECTION_HELP, CliError, exitWith, remoteClient, numberFlag } from './remote.ts';
import { readJsonFile } from './requests.ts';

const USAGE = `Usage:
  agentd eval run --testset ID --revision ID [options]
  agentd eval show ID [--json]

run    Creates an evaluation run of a stored workflow revision over a test set, shows its
       progress, then its metrics. Exits 0 when every case succeeded, 1 when some failed or the
       run did not finish — so it fits in a CI pipeline.
         --testset ID        a test set revision id (or a test set id: its newest revision)
         --revision ID       the workflow revision to evaluate
         --repeats N         runs per test case (default 1)
         --batch-size N      cases in flight at once (default 10)
         --max-retries N     retries of a failed case (default 0)
         --retry-delay S     seconds before a retry (default 0)
         --evaluators FILE   a JSON list of evaluators, e.g. [{"kind": "exact_match"}]
         --name NAME         the run's name
         --json              print the run and its metrics as JSON at the end
show   Prints a run's status, progress and metrics.

${CONNECTION_HELP}`;

const FLAGS = {
  testset: { type: 'string' },
  revision: { type: 'string' },
  repeats: { type: 'string' },
  'batch-size': { type: 'string' },
  'max-retries': { type: 'string' },
  'retry-delay': { type: 'string' },
  evaluators: { type: 'string' },
  name: { type: 'string' },
  json: { type: 'boolean' },
  ...CONNECTION_FLAGS,
} as const;

type Run = Awaited<ReturnType<AgentdClient['evaluations']['get']>>['evaluation'];

const ended = (run: Run) => !['pending', 'running'].includes(run.data.status);

async function report(client: AgentdClient, run: Run, json: boolean): Promise<number> {
  const { metrics } = await client.evaluations.metrics({ metrics: { run_id: run.id } });
  const { progress } = run.data;
  if (json) {
    process.stdout.write(`${JSON.stringify({ evaluation: run, metrics })}\n`);
  } else {
    process.stdout.write(
      `run ${run.id}: ${run.data.status} — ${progress.success} succeeded, ${progress.failure} failed, ${progress.cancelled} cancelled, ${progress.pending + progress.running} left of ${progress.total}\n`,
    );
    if (run.data.error) process.stdout.write(`error: ${run.data.error.message}\n`);
    if (metrics[0]) process.stdout.write(`\n${metricsTable(metrics[0])}`);
  }
  return run.data.status === 'success' ? 0 : 1;
}

export async function evalCommand(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (!sub || sub === '--help' || sub === '-h') {
    process.stdout.write(USAGE);
    return sub ? 0 : 2;
  }
  const parsed = parseCommand(rest, FLAGS, USAGE, true);
  if (typeof parsed === 'number') return parsed;
  const { values, positionals } = parsed;
  try {
    const client = remoteClient(values);
    if (sub === 'show') {
      const [id] = positionals;
      if (!id) throw new CliError('agentd eval show needs the run id: agentd eval show <id>');
      return await report(client, (await client.evaluations.get(id)).evaluation, values.json === true);
    }
    if (sub !== 'run') throw new CliError(`unknown eval command "${sub}"; use run or show`);
    if (!values.testset || !values.revision) throw new CliError('--testset and --revision are required (see agentd eval --help)');
    const evaluators = values.evaluators ? readJsonFile(values.evaluators, '--evaluators') : undefined;
    if (evaluators !== undefined && !Array.isArray(evaluators)) throw new CliError('--evaluators must hold a JSON list of evaluators');
    const { evaluation } = await client.evaluations.create({
      ...(values.name ? { name: values.name } : {}),
      data: {
        testset_steps: [values.testset],
        application_steps: [values.revision],
        repeats: numberFlag(values.repeats, 'repeats', 1, 1),
        concurrency: {
          batch_size: numberFlag(values['batch-size'], 'batch-size', 10, 1),
          max_retries: numberFlag(values['max-retries'], 'max-retries', 0, 0),
          // Seconds, as the API takes them: a fraction is fine.
          retry_delay: numberFlag(values['retry-delay'], 'retry-delay', 0, 0, 'any'),
        },
        ...(evaluators ? { evaluators: evaluators as never } : {}),
      },
    });
    process.stderr.write(`run ${evaluation.id} started (agentd eval show ${evaluation.id})\n`);
    const progress = new ProgressReporter();
    let run = evaluation;
    const toCounts = (r: Run) => ({ total: r.data.progress.total, done: r.data.progress.success + r.data.progress.failure + r.data.progress.cancelled, failed: r.data.progress.failure, inFlight: r.data.progress.running });
    while (!ended(run)) {
      progress.update(toCounts(run));
      await sleep(500);
      run = (await client.evaluations.get(run.id)).evaluation;
    }
    progress.finish(toCounts(run));
    return await report(client, run, values.json === true);
  } catch (error) {
    return exitWith('eval', error);
  }
}
