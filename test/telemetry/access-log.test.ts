import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { builtin, invokeBody, readJson, sid, startHarness, template, type Harness } from '../support/harness.ts';

/** The request log (src/http/access-log.ts): one line per request when it is answered. */

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

async function linesOfOneTurn(level: string): Promise<Record<string, any>[]> {
  h = await startHarness({ logs: true, env: { AGENTD_LOG_LEVEL: level } });
  h.model.script({ text: 'logged' });
  const res = await h.invoke(invokeBody([{ role: 'user', content: 'hello' }], template()));
  const reply = await readJson(res);
  expect(reply.data.outputs.messages.length).toBeGreaterThan(0);
  return linesOf(res);
}

async function linesOf(res: Response): Promise<Record<string, any>[]> {
  // The completion line is written once the response has gone.
  await new Promise((resolve) => setTimeout(resolve, 50));
  return h!.logs.map((line) => JSON.parse(line)).filter((line) => line.reqId === res.headers.get('x-request-id'));
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

  it("names the turn's session and trace, for a JSON reply and a stream alike", async () => {
    h = await startHarness({ logs: true, env: { AGENTD_LOG_LEVEL: 'info' } });
    for (const accept of ['application/json', 'text/event-stream']) {
      const session = sid('logged');
      h.model.script({ text: 'logged' });
      const res = await h.invoke(invokeBody([{ role: 'user', content: 'hello' }], template(), { session_id: session }), { headers: { accept } });
      await res.text();
      const [line] = await linesOf(res);
      expect(line).toMatchObject({ msg: 'request completed', session_id: session, trace_id: res.headers.get('x-ag-trace-id') });
    }
  });

  it('says why a turn failed, once, with its ids, even when its stream was answered 200', async () => {
    // The stream starts with the tool's run, before the model's second call fails.
    h = await startHarness({ logs: true, env: { AGENTD_LOG_LEVEL: 'info', AGENTD_STREAM_HOLD_MS: '50' } });
    const session = sid('failing');
    h.model.script([{ toolCalls: [{ name: 'ls', input: {} }] }, { error: { status: 500 }, latencyMs: 300 }]);
    const res = await h.invoke(invokeBody([{ role: 'user', content: 'hello' }], template({ tools: [builtin('ls')], mode: 'allow' }), { session_id: session, secrets: { MY_TOKEN: 'tok-in-the-log-7c6b5a' } }), { headers: { accept: 'text/event-stream' } });
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('upstream-error');
    await linesOf(res);
    const failed = h.logs.map((line) => JSON.parse(line)).filter((line) => line.msg === 'turn failed');
    expect(failed).toEqual([expect.objectContaining({ level: 40, session_id: session, trace_id: res.headers.get('x-ag-trace-id'), turn_id: expect.any(String), error: { type: 'upstream-error', message: expect.stringMatching(/500/) } })]);
    expect(h.logs.join('\n')).not.toContain('tok-in-the-log-7c6b5a');
  });

  it('refuses a level pino does not have, naming the ones it has', () => {
    expect(() => loadConfig({ AGENTD_LOG_LEVEL: 'verbose' })).toThrow('AGENTD_LOG_LEVEL must be one of trace, debug, info, warn, error, fatal, silent, got "verbose"');
    expect(loadConfig({ AGENTD_LOG_LEVEL: 'warn' }).logLevel).toBe('warn');
    expect(loadConfig({}).logLevel).toBe('info');
  });

  it('also writes the arrival of each request at debug', async () => {
    const lines = await linesOfOneTurn('debug');
    expect(lines.map((line) => line.msg)).toEqual(expect.arrayContaining(['incoming request', 'request completed']));
    expect(lines.find((line) => line.msg === 'incoming request')).toMatchObject({ level: 20, req: { method: 'POST' } });
  });
});
