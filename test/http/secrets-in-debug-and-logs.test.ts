import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { builtin, invokeBody, startHarness, template, type Harness } from '../support/harness.ts';

/**
 * Secrets where only a debugging operator looks: the stack traces AGENTD_DEBUG adds to an error
 * reply, and the debug line for a request Node's parser refused.
 */

const SECRET = 'sk-secret-value-123';
const CREDENTIAL = 'cred-secret-456789';
const agent = template({ tools: [builtin('write')], mode: 'allow' });

describe('with AGENTD_DEBUG=1', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ env: { AGENTD_DEBUG: '1' } });
  });
  afterAll(async () => h.close());

  it("masks the request's secrets in status.stacktrace, whose first line is the message as thrown", async () => {
    const res = await h.invoke(invokeBody([{ role: 'user', content: 'go' }], agent, { secrets: { OPENAI_API_KEY: SECRET }, credentials: CREDENTIAL, version: SECRET }));
    const body = await res.json();
    expect(res.status).toBe(400);
    expect(body.status.stacktrace.length).toBeGreaterThan(1);
    expect(body.status.stacktrace[0]).toContain('[redacted]');
    expect(JSON.stringify(body)).not.toContain(SECRET);
  });

  it('masks the credentials a template quotes', async () => {
    const res = await h.invoke(invokeBody([{ role: 'user', content: 'go' }], { ...agent, llm: { provider: CREDENTIAL } }, { credentials: CREDENTIAL }));
    expect(res.status).toBe(400);
    expect(await res.text()).not.toContain(CREDENTIAL);
  });
});

describe('at log level debug', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ logs: true, env: { AGENTD_LOG_LEVEL: 'debug' } });
  });
  afterAll(async () => h.close());

  /** A Buffer pino logs comes out as {"type":"Buffer","data":[…]}: read as text, in case it holds the key. */
  const decoded = (lines: string[]) =>
    lines.map((line) => line.replace(/\{"type":"Buffer","data":\[([\d,]*)\]\}/g, (_m, bytes: string) => Buffer.from(bytes ? bytes.split(',').map(Number) : []).toString('latin1'))).join('\n');

  it("keeps the API key out of the line for a request Node's parser refused (its error holds the raw bytes read)", async () => {
    const { port } = new URL(h.url);
    const reply = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(Number(port), '127.0.0.1', () => {
        socket.write(`GET /api/sessions HTTP/1.1\r\nHost: x\r\nAuthorization: ApiKey ${h.apiKey}\r\nX-Bad: a\u0001b\r\n\r\n`);
      });
      let got = '';
      socket.on('data', (chunk) => (got += chunk.toString()));
      socket.on('end', () => resolve(got));
      socket.on('error', reject);
    });
    expect(reply).toMatch(/^HTTP\/1.1 400/);
    await expect.poll(() => h.logs.find((line) => line.includes('refused a request before any route ran'))).toBeDefined();
    const line = h.logs.find((l) => l.includes('refused a request before any route ran'))!;
    expect(JSON.parse(line).err).toMatchObject({ code: 'HPE_INVALID_HEADER_TOKEN' });
    expect(decoded(h.logs)).not.toContain(h.apiKey);
  });
});
