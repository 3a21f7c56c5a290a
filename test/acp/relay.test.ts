import type http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConnectionAddresses, connectionAllowedHosts } from '../../src/agent/connection-address.ts';
import { allowedHosts, McpAddresses } from '../../src/agent/mcp-address.ts';
import { HarnessRelay } from '../../src/harnesses/relay.ts';
import { startUpstream, type Upstream } from '../support/upstream.ts';

/** The relay between a harness and its model or MCP servers (relay.ts), against a real upstream. */

let upstream: Upstream;
let url: string;
let seen: http.IncomingHttpHeaders[];
beforeAll(async () => {
  upstream = await startUpstream((req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    // Streamed in two pieces, the second after a pause: the relay must not wait for the end.
    res.write(`data: ${req.method} ${req.url}\n\n`);
    setTimeout(() => res.end('data: done\n\n'), 50);
  });
  ({ url, seen } = upstream);
});
afterAll(() => upstream.close());

describe('HarnessRelay', () => {
  it('passes a request with the process token on with the real credentials, streaming the answer', async () => {
    const relay = await HarnessRelay.open([{ url, headers: { authorization: 'Bearer sk-real-key' } }], 'on', 5_000);
    try {
      expect(relay.urls[0]).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
      const res = await fetch(`${relay.urls[0]}/responses?x=1`, { method: 'POST', headers: { authorization: `Bearer ${relay.token}` }, body: '{}' });
      expect(res.status).toBe(200);
      const reader = res.body!.getReader();
      expect(new TextDecoder().decode((await reader.read()).value)).toBe('data: POST /v1/responses?x=1\n\n');
      let rest = '';
      for (let part = await reader.read(); !part.done; part = await reader.read()) rest += new TextDecoder().decode(part.value);
      expect(rest).toBe('data: done\n\n');
      expect(seen.at(-1)!.authorization).toBe('Bearer sk-real-key');
      expect(JSON.stringify(seen.at(-1))).not.toContain(relay.token);
    } finally {
      relay.close();
    }
  });

  it('keeps the upstream’s query, which may hold a secret, from the harness, and adds it to what it relays', async () => {
    const relay = await HarnessRelay.open([{ url, headers: {} }, { url: `${url}/mcp?token=s%20cret-77&v=2`, headers: {} }], 'on', 5_000);
    try {
      expect(relay.urls[1]).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1\/mcp$/);
      const asked = async (at: string) => (await (await fetch(at, { method: 'POST', headers: { authorization: `Bearer ${relay.token}` }, body: '{}' })).text()).split('\n')[0];
      expect(await asked(relay.urls[1]!)).toBe('data: POST /v1/mcp?token=s%20cret-77&v=2');
      expect(await asked(`${relay.urls[1]}?session=1`)).toBe('data: POST /v1/mcp?session=1&token=s%20cret-77&v=2');
      // Elsewhere on the server (an SSE transport's own endpoint), as the server named it.
      expect(await asked(relay.urls[1]!.replace('/v1/mcp', '/messages?id=3'))).toBe('data: POST /messages?id=3');
    } finally {
      relay.close();
    }
  });

  it('refuses a request without the token, and one with another process’s', async () => {
    const relay = await HarnessRelay.open([{ url, headers: {} }], 'on', 5_000);
    const other = await HarnessRelay.open([{ url, headers: {} }], 'on', 5_000);
    try {
      const before = seen.length;
      expect((await fetch(`${relay.urls[0]}/models`)).status).toBe(403);
      expect((await fetch(`${relay.urls[0]}/models`, { headers: { 'x-api-key': other.token } })).status).toBe(403);
      expect(seen.length).toBe(before);
      expect((await fetch(`${relay.urls[0]}/models`, { headers: { 'x-agentd-relay': relay.token } })).status).toBe(200);
    } finally {
      relay.close();
      other.close();
    }
  });

  it('answers 502 naming the upstream it cannot reach', async () => {
    const relay = await HarnessRelay.open([{ url: 'http://127.0.0.1:9/v1', headers: {} }], 'on', 5_000);
    try {
      const res = await fetch(`${relay.urls[0]}/responses`, { headers: { 'x-api-key': relay.token } });
      expect(res.status).toBe(502);
      expect(await res.text()).toContain('127.0.0.1:9');
    } finally {
      relay.close();
    }
  });
});

describe('HarnessRelay: MCP server addresses (AGENTD_MCP_ALLOWED_HOSTS)', () => {
  it('refuses, before connecting, an MCP server whose name resolves to an address agentd does not connect to; allows a listed one', async () => {
    const local = url.replace('127.0.0.1', 'localhost');
    const refusing = new McpAddresses(allowedHosts('10.0.0.0/8'));
    const allowing = new McpAddresses(allowedHosts('127.0.0.1,::1'));
    const relay = await HarnessRelay.open([{ url, headers: {} }, { url: `${local}/mcp`, headers: {}, lookup: refusing.lookup }, { url: `${local}/mcp`, headers: {}, lookup: allowing.lookup }], 'on', 5_000);
    try {
      const before = seen.length;
      const refused = await fetch(relay.urls[1]!, { method: 'POST', headers: { authorization: `Bearer ${relay.token}` }, body: '{}' });
      expect(refused.status).toBe(502);
      expect(await refused.text()).toContain('"localhost" resolves to an address that AGENTD_MCP_ALLOWED_HOSTS does not hold');
      expect(seen.length).toBe(before);
      const allowed = await fetch(relay.urls[2]!, { method: 'POST', headers: { authorization: `Bearer ${relay.token}` }, body: '{}' });
      expect((await allowed.text()).split('\n')[0]).toBe('data: POST /v1/mcp');
    } finally {
      relay.close();
    }
  });
});

describe('HarnessRelay: a project connection’s base URL (AGENTD_CONNECTION_ALLOWED_HOSTS)', () => {
  it('refuses, before connecting, a model whose name resolves to an address agentd does not connect to, and the turn fails with a 400 saying so', async () => {
    const refusing = new ConnectionAddresses(connectionAllowedHosts('10.0.0.0/8'));
    const relay = await HarnessRelay.open([{ url: url.replace('127.0.0.1', 'localhost'), headers: {}, lookup: refusing.lookup }], 'on', 5_000);
    try {
      const before = seen.length;
      const refused = await fetch(`${relay.urls[0]}/responses`, { method: 'POST', headers: { authorization: `Bearer ${relay.token}` }, body: '{}' });
      expect(refused.status).toBe(502);
      expect(await refused.text()).toContain('"localhost" resolves to an address that AGENTD_CONNECTION_ALLOWED_HOSTS does not hold');
      expect(seen.length).toBe(before);
      expect(relay.modelCalls.failure).toMatchObject({
        type: 'invalid-request',
        message: 'the connection\'s base_url: "localhost" resolves to an address that AGENTD_CONNECTION_ALLOWED_HOSTS does not hold, and the list does not name the host; the operator may add it there',
      });
    } finally {
      relay.close();
    }
  });
});

describe('HarnessRelay: what the model calls came to', () => {
  let model: Upstream;
  let modelUrl: string;
  beforeAll(async () => {
    model = await startUpstream((req, res) => {
      if (req.url?.endsWith('/limited')) res.writeHead(429, { 'retry-after': '7' }).end('{"error":"slow down, sk-real-key"}');
      else if (req.url?.endsWith('/refused')) res.writeHead(401).end();
      else if (req.url?.endsWith('/stalls')) res.writeHead(200, { 'content-type': 'text/event-stream' }).write('data: first\n\n');
      else if (!req.url?.endsWith('/silent')) res.writeHead(200).end('ok');
    });
    modelUrl = model.url;
  });
  afterAll(() => model.close());

  const post = (relay: HarnessRelay, path: string) => fetch(`${relay.urls[0]}${path}`, { method: 'POST', headers: { 'x-api-key': relay.token }, body: '{}' });

  it("keeps a failed call's status as the built-in loop maps it, until a call succeeds; only POSTs count", async () => {
    const relay = await HarnessRelay.open([{ url: modelUrl, headers: {} }], 'on', 5_000);
    try {
      expect((await post(relay, '/limited')).status).toBe(429);
      expect(relay.modelCalls.failure).toMatchObject({ type: 'upstream-rate-limited', status: 429, headers: { 'retry-after': '7' } });
      expect(relay.modelCalls.failure!.message).not.toContain('sk-real-key');
      expect((await fetch(`${relay.urls[0]}/refused`, { method: 'HEAD', headers: { 'x-api-key': relay.token } })).status).toBe(401);
      expect(relay.modelCalls.failure).toMatchObject({ type: 'upstream-rate-limited' });
      expect((await post(relay, '/refused')).status).toBe(401);
      expect(relay.modelCalls.failure).toMatchObject({ type: 'upstream-auth', status: 424 });
      expect((await post(relay, '/fine')).status).toBe(200);
      expect(relay.modelCalls.failure).toBeUndefined();
      expect((await post(relay, '/limited')).status).toBe(429);
      relay.modelCalls.reset();
      expect(relay.modelCalls.failure).toBeUndefined();
    } finally {
      relay.close();
    }
  });

  it('cuts a model that sends nothing for its time limit, before its answer or between its chunks: 504 to the harness, upstream-timeout kept', async () => {
    const relay = await HarnessRelay.open([{ url: modelUrl, headers: {} }], 'on', 300);
    try {
      const silent = await post(relay, '/silent');
      expect(silent.status).toBe(504);
      expect(relay.modelCalls.failure).toMatchObject({ type: 'upstream-timeout', status: 504 });
      expect(relay.modelCalls.failure!.message).toContain('300 ms');
      relay.modelCalls.reset();
      const stalls = await post(relay, '/stalls');
      expect(stalls.status).toBe(200);
      await expect(stalls.text()).rejects.toThrow();
      expect(relay.modelCalls.failure).toMatchObject({ type: 'upstream-timeout' });
    } finally {
      relay.close();
    }
  });
});
