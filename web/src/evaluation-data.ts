import type { AgentdClient } from '../../src/client/index.ts';
import { cellText } from './ui.tsx';

/** What the evaluation pages read: a run's every result, its test cases, and how a case reads. */

export type Result = Awaited<ReturnType<AgentdClient['evaluations']['results']>>['results'][number];
export type Run = Awaited<ReturnType<AgentdClient['evaluations']['get']>>['evaluation'];
type Testcase = NonNullable<Awaited<ReturnType<AgentdClient['testsets']['get']>>['testset']['data']['testcases']>[number];

/** Every result of a run, in case order (the API pages them 200 at a time). */
export async function allResults(client: AgentdClient, runId: string): Promise<Result[]> {
  const all: Result[] = [];
  let next: string | undefined;
  do {
    const page = await client.evaluations.results({ result: { run_id: runId }, windowing: { limit: 200, ...(next ? { next } : {}) } });
    all.push(...page.results);
    next = page.next;
  } while (next);
  return all;
}

/** The test cases of the run's test set revision, by id. */
export async function testcasesOf(client: AgentdClient, run: Run): Promise<Map<string, Testcase>> {
  const revision = Object.keys(run.data.testset_steps)[0];
  if (!revision) return new Map();
  const testset = await client.testsets.get(revision);
  return new Map((testset.testset.data.testcases ?? []).map((row) => [row.id, row]));
}

interface TextMessage {
  role?: string;
  content?: unknown;
}

/** The case's question: its last user message, else its first column. */
export function inputText(testcase: Testcase | undefined): string {
  if (!testcase) return '';
  const messages = testcase.data.messages;
  if (Array.isArray(messages)) {
    const user = (messages as TextMessage[]).filter((m) => m.role === 'user').at(-1);
    if (user) return cellText(user.content);
  }
  const first = Object.entries(testcase.data).find(([key]) => key !== 'expected');
  return first ? cellText(first[1]) : '';
}

export const expectedText = (testcase: Testcase | undefined) => cellText(testcase?.data.expected);

/** The agent's final answer: its last assistant message. */
export function outputText(result: Result): string {
  const last = (result.outputs?.messages as TextMessage[] | undefined)?.filter((m) => m.role === 'assistant').at(-1);
  return last ? cellText(last.content) : '';
}

/** The mean of the evaluators' scores; undefined when none scored. */
export function meanScore(result: Result): number | undefined {
  const scores = (result.scores ?? []).map((s) => s.score).filter((s): s is number => s !== undefined);
  return scores.length ? scores.reduce((a, b) => a + b, 0) / scores.length : undefined;
}

/** A case failed: it did not run to its end, or an evaluator said no. */
export const failed = (result: Result) => result.status === 'failure' || (result.scores ?? []).some((s) => s.pass === false || s.error !== undefined);

export const caseKey = (result: Pick<Result, 'testcase_id' | 'repeat_idx'>) => `${result.testcase_id}#${result.repeat_idx}`;
