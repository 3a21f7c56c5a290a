import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeModel, type FakeModelServer, type RecordedRequest } from '../../src/testing/fake-model.ts';
import { apiCall, firstStartCredentials, startServe } from '../support/child-server.ts';

/**
 * A run survives its server (issue 5): killed mid-run (SIGKILL) or stopped (SIGTERM), the next
 * `agentd serve` on the same data picks the run up; cases that had finished are not run again,
 * and every case ends with exactly one result.
 */

let model: FakeModelServer;
const calls = new Map<string, number>();

beforeAll(async () => {
  model = await startFakeModel({
    script: (req: RecordedRequest) => {
      const text = req.messages.filter((m) => m.role === 'user').at(-1)?.content ?? '';
      calls.set(text, (calls.get(text) ?? 0) + 1);
      return { text: `done ${text}`, latencyMs: 250 };
    },
  });
});
afterAll(async () => model.close());

type Auth = { projectId: string; key: string };

const call = (url: string, auth: Auth, method: string, route: string, body?: unknown) => apiCall(url, auth, method, route, body);

async function until<T>(read: () => Promise<T>, done: (value: T) => boolean): Promise<T> {
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe.each(['SIGKILL', 'SIGTERM'] as const)('an evaluation run across a restart (%s)', (signal) => {
  it('resumes the unfinished cases and never runs a finished one twice', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentd-eval-restart-'));
    const env = {
      AGENTD_DATA_DIR: dataDir,
      AGENTD_LOG_LEVEL: 'info',
      OPENAI_API_KEY: 'sk-test',
      OPENAI_BASE_URL: model.url,
      AGENTD_DEFAULT_PROVIDER: 'openai',
      AGENTD_DEFAULT_MODEL: 'fake-model',
    };
    try {
      const first = await startServe(env);
      const auth = firstStartCredentials(first.output());
      const agent = { llm: { provider: 'openai', model: 'fake-model' }, tools: [], runner: { permissions: { default: 'allow' } } };
      const workflow = await call(first.url, auth, 'POST', '/workflows', { slug: 'restart-target', data: { parameters: { agent } } });
      const texts = Array.from({ length: 10 }, (_, i) => `${signal}-case-${i}`);
      const testset = await call(first.url, auth, 'POST', '/simple/testsets/', { testset: { data: { testcases: texts.map((t) => ({ data: { messages: [{ role: 'user', content: t }] } })) } } });
      const { evaluation } = await call(first.url, auth, 'POST', '/simple/evaluations/', {
        evaluation: { data: { testset_steps: [testset.testset.revision_id], application_steps: [workflow.revision.id], concurrency: { batch_size: 2 } } },
      });
      const read = (url: string) => () => call(url, auth, 'GET', `/simple/evaluations/${evaluation.id}`);
      await until(read(first.url), (r) => r.evaluation.data.progress.success >= 3);
      const before = (await call(first.url, auth, 'POST', '/evaluations/results/query', { result: { run_id: evaluation.id, status: 'success' } })).results;
      first.child.kill(signal);
      await first.exited;

      const second = await startServe(env);
      try {
        const after = await until(read(second.url), (r) => !['pending', 'running'].includes(r.evaluation.data.status));
        expect(after.evaluation.data).toMatchObject({ status: 'success', progress: { total: 10, success: 10 } });
        const results = (await call(second.url, auth, 'POST', '/evaluations/results/query', { result: { run_id: evaluation.id }, windowing: { limit: 50 } })).results;
        expect(results).toHaveLength(10);
        expect(results.map((r: any) => r.outputs.messages.at(-1).content).sort()).toEqual(texts.map((t) => `done ${t}`).sort());
        // Finished before the stop: run once, result untouched.
        for (const done of before) {
          expect(calls.get(done.outputs.messages.at(-1).content.replace(/^done /, ''))).toBe(1);
          expect(results.find((r: any) => r.id === done.id)).toEqual(done);
        }
        // At most the two cases in flight at the stop ran twice.
        const twice = texts.filter((t) => calls.get(t) === 2);
        expect(twice.length).toBeLessThanOrEqual(2);
        expect(texts.every((t) => (calls.get(t) ?? 0) >= 1 && (calls.get(t) ?? 0) <= 2)).toBe(true);
        // A case cut off by the kill keeps that attempt, as interrupted, before the one that finished it.
        const cutOff = results.filter((r: any) => r.attempts.some((a: any) => a.status === 'interrupted'));
        if (signal === 'SIGKILL') {
          expect(cutOff.length).toBeGreaterThanOrEqual(1);
          expect(cutOff.length).toBeLessThanOrEqual(2);
          for (const r of cutOff) expect(r.attempts.map((a: any) => a.status)).toEqual(['interrupted', 'success']);
          for (const text of twice) expect(cutOff.some((r: any) => r.outputs.messages.at(-1).content === `done ${text}`)).toBe(true);
        } else {
          expect(cutOff).toEqual([]);
        }
      } finally {
        second.child.kill('SIGTERM');
        await second.exited;
      }
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe('a server that scored cases with a regex evaluator', () => {
  it('stops on SIGTERM: the regex thread does not hold the process open', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentd-eval-regex-stop-'));
    const env = { AGENTD_DATA_DIR: dataDir, OPENAI_API_KEY: 'sk-test', OPENAI_BASE_URL: model.url, AGENTD_DEFAULT_PROVIDER: 'openai', AGENTD_DEFAULT_MODEL: 'fake-model' };
    const server = await startServe(env);
    try {
      const auth = firstStartCredentials(server.output());
      const testset = await call(server.url, auth, 'POST', '/simple/testsets/', { testset: { data: { testcases: [{ data: { messages: [{ role: 'user', content: 'regex-stop' }] } }] } } });
      const { evaluation } = await call(server.url, auth, 'POST', '/simple/evaluations/', {
        evaluation: { data: { testset_steps: [testset.testset.revision_id], application_steps: ['agenta:builtin:agent:v0'], evaluators: [{ kind: 'regex', pattern: '^done' }] } },
      });
      const ended = await until(
        () => call(server.url, auth, 'GET', `/simple/evaluations/${evaluation.id}`),
        (r) => !['pending', 'running'].includes(r.evaluation.data.status),
      );
      expect(ended.evaluation.data.status).toBe('success');
      server.child.kill('SIGTERM');
      // Shutdown cuts idle connections after 5 s; a process still there well past that never exits.
      const exit = await Promise.race([server.exited, new Promise((resolve) => setTimeout(() => resolve('still running'), 20_000))]);
      expect(exit).toBe(0);
    } finally {
      if (server.child.exitCode === null) server.child.kill('SIGKILL');
      await server.exited;
      await rm(dataDir, { recursive: true, force: true });
    }
  }, 60_000);
});
