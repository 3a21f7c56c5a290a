import { afterEach, describe, expect, it } from 'vitest';
import { invokeBody, readJson, startHarness, template, type Harness } from '../support/harness.ts';

/** The request log (src/http/access-log.ts): one line per request when it is answered. */

let h: Harness | undefined;
afterEach(async () => h?.close());

async function linesOfOneTurn(level: string): Promise<Record<string, any>[]> {
  h = await startHarness({ logs: true, env: { AGENTD_LOG_LEVEL: level } });
  h.model.script({ text: 'logged' });
  const res = await h.invoke(invokeBody([{ role: 'user', content: 'hello' }], template()));
  const reply = await readJson(res);
  expect(reply.data.outputs.messages.length).toBeGreaterThan(0);
  // The completion line is written once the response has gone.
  await new Promise((resolve) => setTimeout(resolve, 50));
  return h.logs.map((line) => JSON.parse(line)).filter((line) => line.reqId === res.headers.get('x-request-id'));
}

describe('the request log', () => {
  it('writes one line per request at info, when it is answered, naming the request and its outcome', async () => {
    const lines = await linesOfOneTurn('info');
    expect(lines.map((line) => line.msg)).toEqual(['request completed']);
    expect(lines[0]).toMatchObject({
      level: 30,
      req: { method: 'POST', url: expect.stringMatching(/^\/services\/agent\/v0\/invoke\?project_id=/) },
      res: { statusCode: 200 },
      responseTime: expect.any(Number),
    });
    expect(JSON.stringify(lines)).not.toContain(h!.apiKey);
  });

  it('also writes the arrival of each request at debug', async () => {
    const lines = await linesOfOneTurn('debug');
    expect(lines.map((line) => line.msg)).toEqual(expect.arrayContaining(['incoming request', 'request completed']));
    expect(lines.find((line) => line.msg === 'incoming request')).toMatchObject({ level: 20, req: { method: 'POST' } });
  });
});
