import type http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HarnessRelay } from '../../src/harnesses/relay.ts';
import { startUpstream, type Upstream } from '../support/upstream.ts';

/**
 * What passes the relay back to a harness is kept in the harness's own transcripts (Codex's
 * rollouts, Pi's sessions, in the state folder), beyond the reach of the masking of the turn's
 * events: a model that repeats its key, an MCP server that echoes the headers or the url the relay
 * put on its request, must reach the harness masked.
 */

const KEY = 'sk-relay-real-key-123456';
const QUOTED = 'tok"en-with-quote-98765';
let upstream: Upstream;
let url: string;
let seen: http.IncomingHttpHeaders[];
beforeAll(async () => {
  upstream = await startUpstream((req, res) => {
    const auth = (req.headers.authorization ?? '').replace(/^Bearer /, '');
    const body = `data: {"text":"my key is ${auth}","quoted":${JSON.stringify(QUOTED)}}\n\n`;
    // Cut inside the key: a value split between two chunks must be masked too.
    const cut = body.indexOf(auth) + 5;
    res.writeHead(200, { 'content-type': 'text/event-stream', 'content-length': String(Buffer.byteLength(body)) });
    res.write(body.slice(0, cut));
    setTimeout(() => res.end(body.slice(cut)), 30);
  });
  ({ url, seen } = upstream);
});
afterAll(() => upstream.close());

describe('HarnessRelay and the run’s secrets', () => {
  it('masks them in what the upstream answers, split between chunks and JSON-escaped too', async () => {
    const relay = await HarnessRelay.open([{ url, headers: { authorization: `Bearer ${KEY}` } }], 'on', 5_000, [KEY, QUOTED]);
    try {
      const res = await fetch(`${relay.urls[0]}/responses`, { method: 'POST', headers: { authorization: `Bearer ${relay.token}`, 'accept-encoding': 'gzip' }, body: '{}' });
      expect(res.status).toBe(200);
      const text = await res.text();
      expect(seen.at(-1)!.authorization).toBe(`Bearer ${KEY}`);
      // Asked for as text, so there is text to mask.
      expect(seen.at(-1)!['accept-encoding']).toBe('identity');
      expect(text).toBe('data: {"text":"my key is [redacted]","quoted":"[redacted]"}\n\n');
      expect(text).not.toContain(KEY);
      expect(text).not.toContain(JSON.stringify(QUOTED).slice(1, -1));
    } finally {
      relay.close();
    }
  });

  it('passes the answer as it is when the run has no secret', async () => {
    const relay = await HarnessRelay.open([{ url, headers: {} }], 'on', 5_000);
    try {
      const res = await fetch(`${relay.urls[0]}/responses`, { method: 'POST', headers: { authorization: `Bearer ${relay.token}` }, body: '{}' });
      // The relay's token never goes upstream: the upstream saw no key to repeat.
      expect(await res.text()).toBe(`data: {"text":"my key is ","quoted":${JSON.stringify(QUOTED)}}\n\n`);
      expect(seen.at(-1)!['content-length']).toBe('2');
    } finally {
      relay.close();
    }
  });
});
