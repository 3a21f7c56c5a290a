import { createWriteStream, existsSync, openSync, readFileSync } from 'node:fs';
import { once } from 'node:events';
import type { InvokeBody } from '../client/index.ts';
import type { Outcome } from '../client/invoke-many.ts';
import { parseCommand } from './args.ts';
import { ProgressReporter } from './progress.ts';
import { CONNECTION_FLAGS, CONNECTION_HELP, CliError, durationFlag, describeFailure, exitWith, remoteClient, numberFlag, sessionIdFlag } from './remote.ts';
import { readJsonFile, withConfiguration } from './requests.ts';

const USAGE = `Usage: agentd run-many --input inputs.jsonl --out results.jsonl [options]

Runs one agent turn per input line (spec §4.7), --concurrency at a time, and
writes one result line per input to --out as each finishes. Exits 0 when every
input succeeded, 1 when some failed. Progress and the summary go to stderr.

Each input line is a JSON object: a whole invoke body ({"data": …}), or
{"messages": [...]}, or {"message": "text"} (also "input" or "question").

  --input FILE            the inputs (JSON Lines); - reads them from stdin
  --out FILE              where results go, one JSON line per input: {index,
                          status, session_id, stop_reason, output, error,
                          attempts, duration_ms}; - writes them to stdout
  --concurrency N         inputs in flight at once (default 8)
  --session MODE          fresh (default): each input its own session; shared:
                          one conversation, inputs in order; none: the server
                          mints an id per input
  --session-id ID         shared: the session's id; fresh: the prefix of each
                          input's id, ID-<index> (default: a new prefix each
                          run, so --resume runs inputs in new sessions)
  --template FILE         an agent template (JSON) for inputs that carry none
  --revision ID           run this stored workflow revision instead
  --retries N             retries of a rate-limited or failed input (default 2)
  --retry-delay DURATION  wait before a retry, e.g. 2s or 500ms (default 1s; a
                          longer retry-after wins)
  --resume                keep --out (a file) and skip the inputs it already
                          holds a success for
  -h, --help              this help

An input whose session runs another turn waits for that turn to end, looking
again every --retry-delay, then runs; the wait uses up no retry. A Ctrl-C leaves
the turns in flight running on the server: with --session-id, --resume then
waits for each and runs its input again in the same session, which keeps both
turns (and what the first one wrote in its folder); --out gets the second.

${CONNECTION_HELP}`;

/** An input line as an invoke body. */
function toRequest(value: unknown, line: number): InvokeBody {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new CliError(`--input line ${line} is not a JSON object`);
  const input = value as Record<string, unknown>;
  if ('data' in input || 'references' in input) return input as InvokeBody;
  if (Array.isArray(input.messages)) return { data: { inputs: { messages: input.messages } } };
  const text = input.message ?? input.input ?? input.question;
  if (typeof text === 'string') return { data: { inputs: { messages: [{ role: 'user', content: text }] } } };
  throw new CliError(`--input line ${line} has no conversation: give "data", "messages" or "message"`);
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

async function readInputs(file: string): Promise<InvokeBody[]> {
  let text: string;
  try {
    text = file === '-' ? await readStdin() : readFileSync(file, 'utf8');
  } catch (error) {
    throw new CliError(`--input ${file} cannot be read: ${(error as Error).message}`);
  }
  // A byte-order mark, as some editors save UTF-8, is no part of the first line (the server's import drops it too).
  const lines = text.replace(/^\uFEFF/, '').split(/\r?\n/);
  const inputs: InvokeBody[] = [];
  for (const [i, text] of lines.entries()) {
    if (text.trim() === '') continue;
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (error) {
      throw new CliError(`--input line ${i + 1} is not JSON: ${(error as Error).message}`);
    }
    inputs.push(toRequest(value, i + 1));
  }
  if (inputs.length === 0) throw new CliError(`--input ${file === '-' ? '- (stdin)' : file} has no inputs`);
  return inputs;
}

/** Indexes the out file already holds a success for; later lines win over earlier ones. */
function succeeded(file: string): Set<number> {
  const done = new Set<number>();
  if (!existsSync(file)) return done;
  for (const text of readFileSync(file, 'utf8').split('\n')) {
    if (!text.trim()) continue;
    try {
      const line = JSON.parse(text) as { index?: unknown; status?: unknown };
      if (typeof line.index !== 'number') continue;
      if (line.status === 'success') done.add(line.index);
      else done.delete(line.index);
    } catch {
      // A line cut short by a crash: that input runs again.
    }
  }
  return done;
}

/**
 * Opened before any input runs: a results file that cannot be written would otherwise crash the
 * command mid-run, after turns were already spent.
 */
function openOut(file: string, append: boolean): number {
  try {
    return openSync(file, append ? 'a' : 'w');
  } catch (error) {
    throw new CliError(`--out ${file} cannot be written: ${(error as Error).message}`);
  }
}

/**
 * A failed input's line names its session as a success's does, so what the failed turn left (its
 * record, its folder) can be found: the server's envelope says it once the request reached a
 * session, else it is the id the input was sent under.
 */
function failedSession(outcome: Outcome & { ok: false }, sent: string | null | undefined): string | undefined {
  const told = (outcome.error.body as { session_id?: unknown } | undefined)?.session_id;
  return typeof told === 'string' ? told : (sent ?? undefined);
}

function resultLine(index: number, outcome: Outcome, sent: string | null | undefined): string {
  if (outcome.ok) {
    const outputs = outcome.response.data?.outputs;
    return JSON.stringify({
      index,
      status: 'success',
      session_id: outcome.response.session_id,
      stop_reason: outputs?.stop_reason,
      output: outputs?.messages,
      attempts: outcome.attempts,
      duration_ms: outcome.durationMs,
    });
  }
  return JSON.stringify({ index, status: 'failure', session_id: failedSession(outcome, sent), error: outcome.error.status, attempts: outcome.attempts, duration_ms: outcome.durationMs });
}

export async function runManyCommand(argv: string[]): Promise<number> {
  const parsed = parseCommand(
    argv,
    {
      input: { type: 'string' },
      out: { type: 'string' },
      concurrency: { type: 'string' },
      session: { type: 'string' },
      'session-id': { type: 'string' },
      template: { type: 'string' },
      revision: { type: 'string' },
      retries: { type: 'string' },
      'retry-delay': { type: 'string' },
      resume: { type: 'boolean' },
      ...CONNECTION_FLAGS,
    },
    USAGE,
  );
  if (typeof parsed === 'number') return parsed;
  const { values } = parsed;
  try {
    if (!values.input || !values.out) throw new CliError('--input and --out are required (see agentd run-many --help)');
    const session = values.session ?? 'fresh';
    if (session !== 'fresh' && session !== 'shared' && session !== 'none') throw new CliError(`--session must be fresh, shared or none, got "${session}"`);
    const toStdout = values.out === '-';
    if (values.resume && toStdout) throw new CliError('--resume reads the results so far from --out: give it the results file, not -');
    if (values.resume && session === 'shared') throw new CliError('--resume needs --session fresh or none: a shared conversation cannot be picked up halfway');
    const concurrency = numberFlag(values.concurrency, 'concurrency', 8, 1);
    const retries = numberFlag(values.retries, 'retries', 2, 0);
    const retryDelay = durationFlag(values['retry-delay'], 'retry-delay', 1000);
    const sessionPrefix = sessionIdFlag(values['session-id'], '--session-id');
    const template = values.template ? readJsonFile(values.template, '--template') : undefined;
    const client = remoteClient(values);

    const all = (await readInputs(values.input)).map((input) => withConfiguration(input, template, values.revision));
    const skip = values.resume ? succeeded(values.out) : new Set<number>();
    const indexes = all.map((_, i) => i).filter((i) => !skip.has(i));
    const prefix = sessionPrefix ?? `run-many-${Date.now().toString(36)}`;
    // Fresh session ids follow the input's index: with --session-id, a resumed input keeps its session.
    const inputs = indexes.map((i) => (session === 'fresh' ? { ...all[i]!, session_id: all[i]!.session_id ?? `${prefix}-${i}` } : all[i]!));

    const out = toStdout ? process.stdout : createWriteStream(values.out, { fd: openOut(values.out, values.resume === true) });
    const where = toStdout ? 'on stdout' : `in ${values.out}`;
    const progress = new ProgressReporter();
    const started = Date.now();
    const controller = new AbortController();
    const interrupt = () => controller.abort();
    process.once('SIGINT', interrupt);
    if (skip.size) process.stderr.write(`resuming: ${skip.size} of ${all.length} inputs already succeeded in ${values.out}\n`);
    let failed = 0;
    // After Ctrl-C: inputs cut off, and of those the ones whose turn had started (the server runs
    // them to their end: a client that goes away does not stop a turn).
    let cancelled = 0;
    const startedSessions: string[] = [];
    const outcomes = await client.invokeMany(inputs, {
      concurrency,
      session,
      ...(values['session-id'] ? { sessionId: values['session-id'] } : {}),
      retries,
      retryDelay,
      signal: controller.signal,
      onOutcome: (outcome) => {
        if (!outcome.ok) {
          failed++;
          if (controller.signal.aborted && outcome.error.status.type === 'cancelled') {
            cancelled++;
            if (outcome.attempts > 0) startedSessions.push(String(inputs[outcome.index]?.session_id ?? indexes[outcome.index]));
          }
        }
        out.write(`${resultLine(indexes[outcome.index]!, outcome, inputs[outcome.index]?.session_id)}\n`);
      },
      onProgress: (counts) => progress.update(counts),
    });
    process.off('SIGINT', interrupt);
    if (!toStdout) {
      out.end();
      await once(out, 'finish');
    }
    progress.finish({ total: outcomes.length, done: outcomes.length, failed, inFlight: 0 });
    const seconds = (Date.now() - started) / 1000;
    process.stderr.write(
      `${controller.signal.aborted ? 'interrupted: ' : ''}${outcomes.length - failed} succeeded, ${failed - cancelled} failed${cancelled ? `, ${cancelled} cancelled` : ''} in ${seconds.toFixed(1)}s (${(outcomes.length / Math.max(seconds, 0.001)).toFixed(1)}/s); results ${where}\n`,
    );
    if (startedSessions.length) process.stderr.write(`${startedSessions.length} of them had started and run on to their end on the server (sessions ${startedSessions.slice(0, 3).join(', ')}${startedSessions.length > 3 ? ', …' : ''})\n`);
    if (cancelled && !toStdout) process.stderr.write(`the same command with --resume runs the ${cancelled} cancelled inputs again\n`);
    if (failed > cancelled) {
      const first = outcomes.find((o) => !o.ok && o.error.status.type !== 'cancelled');
      if (first && !first.ok) process.stderr.write(`first failure (input ${indexes[first.index]}): ${describeFailure(first.error, 'run-many')}\n`);
    }
    return failed ? 1 : 0;
  } catch (error) {
    return exitWith('run-many', error);
  }
}
