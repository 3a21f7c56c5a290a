import type { AgentdClient } from './client.ts';

/**
 * Reading an evaluation run case by case, as the console and `agentd eval show|compare` do: every
 * result (each carries its test case), how a case reads in one line, whether it failed, and two
 * runs matched case by case.
 */

export type CaseResult = Awaited<ReturnType<AgentdClient['evaluations']['results']>>['results'][number];

/** Every result of a run, in case order (the API pages them, 200 at a time here). */
export async function allResults(client: AgentdClient, runId: string): Promise<CaseResult[]> {
  const all: CaseResult[] = [];
  let next: string | undefined;
  do {
    const page = await client.evaluations.results({ result: { run_id: runId }, windowing: { limit: 200, ...(next ? { next } : {}) } });
    all.push(...page.results);
    next = page.next;
  } while (next);
  return all;
}

/** A value as one line of text: strings as they are, anything else as its JSON. */
export const asText = (value: unknown): string => (value === undefined ? '' : typeof value === 'string' ? value : JSON.stringify(value));

interface TextMessage {
  role?: string;
  content?: unknown;
}

/** The case's question: its last user message, else its first column other than `expected`. */
export function caseInput(result: CaseResult): string {
  const data = result.testcase?.data;
  if (!data) return '';
  if (Array.isArray(data.messages)) {
    const user = (data.messages as TextMessage[]).filter((m) => m.role === 'user').at(-1);
    if (user) return asText(user.content);
  }
  const first = Object.entries(data).find(([key]) => key !== 'expected');
  return first ? asText(first[1]) : '';
}

export const caseExpected = (result: CaseResult): string => asText(result.testcase?.data.expected);

/** The agent's answer: its last assistant message; the error when the case failed. */
export function caseOutput(result: CaseResult): string {
  if (result.error) return result.error.message;
  const last = (result.outputs?.messages as TextMessage[] | undefined)?.filter((m) => m.role === 'assistant').at(-1);
  return last ? asText(last.content) : '';
}

/** The mean of the evaluators' scores; undefined when none scored. */
export function meanScore(result: CaseResult): number | undefined {
  const scores = (result.scores ?? []).map((s) => s.score).filter((s): s is number => s !== undefined);
  return scores.length ? scores.reduce((a, b) => a + b, 0) / scores.length : undefined;
}

/** A case failed: it did not run to its end, or an evaluator said no (or could not say). */
export const caseFailed = (result: CaseResult): boolean => result.status === 'failure' || (result.scores ?? []).some((s) => s.pass === false || s.error !== undefined);

export type CaseChange = 'better' | 'worse' | 'same' | 'only in A' | 'only in B';

export interface CaseComparison {
  /** The test case and repeat, which the two runs are matched on. */
  key: string;
  a: CaseResult | undefined;
  b: CaseResult | undefined;
  change: CaseChange;
  /** B's mean score minus A's. */
  scoreDelta: number | undefined;
  /** B's duration minus A's, in milliseconds. */
  durationDelta: number | undefined;
}

/** A case got better when it stopped failing or scored higher; worse the other way round. */
function changeOf(a: CaseResult | undefined, b: CaseResult | undefined): CaseChange {
  if (!a) return 'only in B';
  if (!b) return 'only in A';
  if (caseFailed(a) !== caseFailed(b)) return caseFailed(b) ? 'worse' : 'better';
  const delta = (meanScore(b) ?? 0) - (meanScore(a) ?? 0);
  return delta > 1e-9 ? 'better' : delta < -1e-9 ? 'worse' : 'same';
}

/** Two runs of one test set, case by case (matched on test case and repeat), in A's order then B's. */
export function compareRuns(a: readonly CaseResult[], b: readonly CaseResult[]): CaseComparison[] {
  const key = (r: CaseResult) => `${r.testcase_id}#${r.repeat_idx}`;
  const inA = new Map(a.map((r) => [key(r), r]));
  const inB = new Map(b.map((r) => [key(r), r]));
  return [...new Set([...inA.keys(), ...inB.keys()])].map((k) => {
    const x = inA.get(k);
    const y = inB.get(k);
    const sa = x && meanScore(x);
    const sb = y && meanScore(y);
    return {
      key: k,
      a: x,
      b: y,
      change: changeOf(x, y),
      scoreDelta: sa !== undefined && sb !== undefined ? sb - sa : undefined,
      durationDelta: x?.duration_ms !== undefined && y?.duration_ms !== undefined ? y.duration_ms - x.duration_ms : undefined,
    };
  });
}
