import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { invokeBody, readFrames, startHarness, template, type Harness } from '../support/harness.ts';

/**
 * AGENTD_CORS_ORIGINS: a browser page on a listed origin may call the API (a `useChat` front end
 * served from its own origin); any other origin gets no CORS headers, so its browser refuses.
 */

const APP = 'http://localhost:3000';
let h: Harness;
let closed: Harness;
beforeAll(async () => {
  h = await startHarness({ env: { AGENTD_CORS_ORIGINS: `${APP}, https://app.example.com` } });
  closed = await startHarness();
});
afterAll(async () => {
  await h.close();
  await closed.close();
});

const invokeUrl = (harness: Harness) => `${harness.url}/services/agent/v0/invoke?project_id=${harness.projectId}`;

function preflight(harness: Harness, origin: string) {
  return fetch(invokeUrl(harness), {
    method: 'OPTIONS',
    headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type,x-ag-messages-format' },
  });
}

describe('CORS', () => {
  it('answers a listed origin’s preflight with the methods and headers the contract uses', async () => {
    const res = await preflight(h, APP);
    expect(res.status).toBe(204);
    expect(res.headers.get('access-control-allow-origin')).toBe(APP);
    expect(res.headers.get('access-control-allow-methods')).toContain('POST');
    expect(res.headers.get('access-control-allow-headers')).toMatch(/authorization.*content-type.*x-ag-messages-format/);
    expect(res.headers.get('access-control-max-age')).toBe('600');
  });

  // The session may come in `baggage` (docs/api.md); a header the preflight leaves out fails the whole request.
  it('allows every request header the service reads, baggage among them', async () => {
    const allowed = (await preflight(h, APP)).headers.get('access-control-allow-headers')!.split(/,\s*/);
    const read = ['accept', 'traceparent', 'baggage', 'x-ag-messages-format', 'x-ag-messages-transcript', 'x-ag-session-control', 'x-ag-session-id', 'x-ag-workflow-embeds'];
    expect(read.filter((name) => !allowed.includes(name))).toEqual([]);
  });

  it('lets the page read the reply’s own headers, on a JSON reply and on a stream', async () => {
    h.model.script({ text: 'hi from agentd' });
    const json = await h.invoke(invokeBody([{ role: 'user', content: 'hi' }], template()), { headers: { origin: APP } });
    expect(json.status).toBe(200);
    expect(json.headers.get('access-control-allow-origin')).toBe(APP);
    expect(json.headers.get('access-control-expose-headers')).toMatch(/x-ag-session-id.*traceparent/);

    expect(json.headers.get('access-control-expose-headers')).toContain('x-vercel-ai-ui-message-stream');

    h.model.script({ text: 'streamed' });
    const stream = await h.invoke(invokeBody([{ role: 'user', content: 'hi' }], template()), { headers: { origin: APP, accept: 'text/event-stream' } });
    expect(stream.headers.get('access-control-allow-origin')).toBe(APP);
    expect(stream.headers.get('access-control-expose-headers')).toMatch(/x-ag-session-id.*traceparent/);
    expect(stream.headers.get('x-request-id')).toBeTruthy();
    const { frames } = await readFrames(stream);
    expect(frames.at(-1)).toMatchObject({ type: 'done' });
  });

  it('gives an origin that is not listed, or any origin when none is configured, no CORS headers', async () => {
    const other = await preflight(h, 'https://evil.example');
    expect(other.headers.get('access-control-allow-origin')).toBeNull();
    const none = await preflight(closed, APP);
    expect(none.headers.get('access-control-allow-origin')).toBeNull();
    h.model.script({ text: 'hi' });
    const reply = await h.invoke(invokeBody([{ role: 'user', content: 'hi' }], template()), { headers: { origin: 'https://evil.example' } });
    expect(reply.headers.get('access-control-allow-origin')).toBeNull();
    await reply.text();
  });

  it('reads AGENTD_CORS_ORIGINS as origins, * for any, and refuses anything else saying what to write', () => {
    expect(loadConfig({}).corsOrigins).toBeUndefined();
    expect(loadConfig({ AGENTD_CORS_ORIGINS: '*' }).corsOrigins).toBe('*');
    expect(loadConfig({ AGENTD_CORS_ORIGINS: 'https://a.example, http://localhost:3000' }).corsOrigins).toEqual(['https://a.example', 'http://localhost:3000']);
    expect(() => loadConfig({ AGENTD_CORS_ORIGINS: 'https://a.example/app' })).toThrow(/not an origin.*https:\/\/app\.example\.com/);
    expect(() => loadConfig({ AGENTD_CORS_ORIGINS: 'localhost:3000' })).toThrow(/not an origin/);
  });
});
