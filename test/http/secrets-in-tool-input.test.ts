import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { RecordedRequest } from '../../src/testing/fake-model.ts';
import { builtin, invokeBody, readJson, sid, startHarness, template, type Harness } from '../support/harness.ts';

/**
 * A tool runs on the input its `tool_call` event shows, the run's secrets masked: a secret a
 * model repeats into a call (here the provider key the model was called with) never lands in a
 * file the tool writes, which the files API would serve and the next turn would read back.
 */

const SECRET = 'sk-secret-value-123';
let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => h.close());

const keyOf = (request: RecordedRequest) => request.headers.authorization?.replace(/^Bearer /, '') ?? '';

it("writes a request secret the model repeats as [redacted], as the call's event shows it", async () => {
  const session = sid('secret-file');
  const agent = template({ tools: [builtin('write'), builtin('bash')], mode: 'allow' });
  h.model.script((request) =>
    request.messages.at(-1)?.role === 'tool'
      ? { text: 'saved' }
      : { toolCalls: [{ name: 'write', input: { path: 'k.txt', content: `key=${keyOf(request)}` } }, { name: 'bash', input: { command: `echo ${keyOf(request)} > b.txt` } }] },
  );
  const body = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'save my key' }], agent, { session_id: session, secrets: { OPENAI_API_KEY: SECRET } })));
  expect(h.model.requests[0]!.headers.authorization).toBe(`Bearer ${SECRET}`);
  expect(body.data.outputs.messages[0]).toMatchObject({ tool_name: 'write', input: { content: 'key=[redacted]' } });
  expect(await readFile(path.join(h.sessionDir(session), 'k.txt'), 'utf8')).toBe('key=[redacted]');
  expect(await readFile(path.join(h.sessionDir(session), 'b.txt'), 'utf8')).toBe('[redacted]\n');
});
