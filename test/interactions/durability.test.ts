import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/db.ts';
import { sessionFolder } from '../../src/sessions/folders.ts';
import { startFakeModel, type FakeModelServer } from '../../src/testing/fake-model.ts';
import { startServe } from '../support/child-server.ts';
import { builtin, invokeBody, startHarness, template } from '../support/harness.ts';

let model: FakeModelServer;
beforeAll(async () => {
  model = await startFakeModel();
});
afterAll(async () => model.close());

async function until(check: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not reached in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('durable pauses', () => {
  it('a pause survives a killed server: a new process takes the answer and continues the turn', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentd-restart-'));
    const env = { AGENTD_DATA_DIR: dataDir, OPENAI_API_KEY: 'sk-restart', OPENAI_BASE_URL: model.url };
    try {
      const first = await startServe(env);
      const projectId = /project id: (\S+)/.exec(first.output())![1]!;
      const key = /API key: +(agd_\S+)/.exec(first.output())![1]!;
      model.script([{ toolCalls: [{ name: 'write', input: { path: 'kept.txt', content: 'survived' } }] }, { text: 'continued after restart' }]);
      const agent = template({ tools: [builtin('write')], mode: 'ask' });
      const paused = await fetch(`${first.url}/services/agent/v0/invoke?project_id=${projectId}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `ApiKey ${key}` },
        body: JSON.stringify(invokeBody([{ role: 'user', content: 'write' }], agent, { session_id: 'durable' })),
      }).then((r) => r.json());
      const id = paused.data.outputs.pending_interaction.id;
      first.child.kill('SIGKILL');
      await first.exited;

      const second = await startServe(env);
      try {
        const res = await fetch(`${second.url}/api/sessions/interactions/${id}/respond?project_id=${projectId}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `ApiKey ${key}` },
          body: JSON.stringify({ answer: { approved: true } }),
        });
        expect(res.status).toBe(200);
        const store = await openStore({ dataDir });
        try {
          await until(async () => (await store.interactions.get(projectId, id))?.status === 'resolved');
          await until(async () => (await store.turns.listForSession(projectId, 'durable', { limit: 5 }))[0]?.status === 'completed');
          const [latest] = await store.turns.listForSession(projectId, 'durable', { limit: 5 });
          expect(JSON.stringify(latest!.output)).toContain('continued after restart');
        } finally {
          await store.close();
        }
        expect(readFileSync(path.join(sessionFolder(dataDir, projectId, 'durable'), 'kept.txt'), 'utf8')).toBe('survived');
      } finally {
        second.child.kill('SIGTERM');
        await second.exited;
      }
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });

  it('an answer given while no server ran is picked up at the next start', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentd-resume-'));
    const env = { AGENTD_DATA_DIR: dataDir, OPENAI_API_KEY: 'sk-resume', OPENAI_BASE_URL: model.url };
    try {
      const first = await startServe(env);
      const projectId = /project id: (\S+)/.exec(first.output())![1]!;
      const key = /API key: +(agd_\S+)/.exec(first.output())![1]!;
      model.script([{ toolCalls: [{ name: 'write', input: { path: 'late.txt', content: 'late' } }] }, { text: 'picked up' }]);
      const paused = await fetch(`${first.url}/services/agent/v0/invoke?project_id=${projectId}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `ApiKey ${key}` },
        body: JSON.stringify(invokeBody([{ role: 'user', content: 'write' }], template({ tools: [builtin('write')], mode: 'ask' }), { session_id: 'late' })),
      }).then((r) => r.json());
      const id = paused.data.outputs.pending_interaction.id;
      first.child.kill('SIGKILL');
      await first.exited;
      // The answer was recorded (as by a replica that died before it could continue the turn).
      const store = await openStore({ dataDir });
      await store.interactions.transition(projectId, id, { from: ['pending'], to: 'responded', answer: { approved: true } });
      await store.close();

      const second = await startServe(env);
      try {
        const check = await openStore({ dataDir });
        try {
          await until(async () => (await check.interactions.get(projectId, id))?.status === 'resolved');
        } finally {
          await check.close();
        }
        await until(async () => existsSync(path.join(sessionFolder(dataDir, projectId, 'late'), 'late.txt')));
      } finally {
        second.child.kill('SIGTERM');
        await second.exited;
      }
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });

  it('a crashed holder’s lease runs out: the session is usable again and the cut-off turn is interrupted', async () => {
    const h = await startHarness({ env: { AGENTD_LEASE_TTL_MS: '400' } });
    try {
      // A turn left running by a process that died: its row and its lease, and no one renewing it.
      await h.store.turns.create({ id: 'ghost-turn', project_id: h.projectId, session_id: 'crashed', trace_id: 'a'.repeat(32), span_id: 'b'.repeat(16) });
      await h.store.leases.acquire({ projectId: h.projectId, sessionId: 'crashed', turnId: 'ghost-turn', holder: 'dead-process', ttlMs: 400 });
      const body = invokeBody([{ role: 'user', content: 'hi' }], template(), { session_id: 'crashed' });
      h.model.script({ text: 'back in business' });
      expect((await h.invoke(body)).status).toBe(409);
      await new Promise((r) => setTimeout(r, 500));
      const res = await h.invoke(body);
      expect(res.status).toBe(200);
      expect((await h.store.turns.get(h.projectId, 'ghost-turn'))?.status).toBe('interrupted');
    } finally {
      await h.close();
    }
  });
});
