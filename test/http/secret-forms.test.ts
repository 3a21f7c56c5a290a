import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storedContent } from '../support/database.ts';
import { startMcpServer, type TestMcpServer } from '../support/mcp-server.ts';
import { invokeBody, sid, startHarness, template, type Harness } from '../support/harness.ts';

/**
 * A secret reaches text in more forms than the one the caller sent: percent-encoded once it is in
 * an MCP server's url, JSON-escaped when a server quotes it inside JSON, and as an object's key
 * when the caller names a tag after it. None of those forms may reach a reply, the stored turn or
 * a log line, as the value itself may not.
 */

let h: Harness;
let mcp: TestMcpServer;
const text = (value: string) => ({ content: [{ type: 'text' as const, text: value }] });
beforeAll(async () => {
  h = await startHarness({ logs: true, env: { AGENTD_MCP_TIMEOUT_MS: '1500' } });
  // `echo` answers with the URL and headers of the request that called it, as a server's debug
  // tool or error page does.
  mcp = await startMcpServer({
    tools: [
      {
        name: 'echo',
        annotations: { readOnlyHint: true },
        handler: () => {
          const last = mcp.requests.at(-1)!;
          return text(`url ${last.path}${last.query} headers ${JSON.stringify(last.headers)}`);
        },
      },
    ],
  });
});
afterAll(async () => {
  await mcp.close();
  await h.close();
});

const agent = (url: string, headers: Record<string, string> = {}) => ({ ...template({ mode: 'allow' }), mcps: [{ name: 'srv', connection: { type: 'http', url, headers } }] });

async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function expectNowhere(forms: string[], ...replies: string[]) {
  const stored = (await storedContent(h)).map((s) => s.text).join('\n');
  const logs = h.logs.join('');
  for (const form of forms) {
    for (const reply of replies) expect(reply).not.toContain(form);
    expect(stored).not.toContain(form);
    expect(logs).not.toContain(form);
  }
}

describe('secrets in the forms text carries them', () => {
  it('are masked percent-encoded, when an MCP server echoes the url its secret was put in', async () => {
    const token = 'tok en<with>{odd}"chars"-4711';
    const encoded = new URL(`http://h/?${token}`).search.slice(1);
    expect(encoded).not.toBe(token);
    h.model.script([{ toolCalls: [{ name: 'srv__echo', input: {} }] }, { text: 'echoed' }]);
    const session = sid('forms-url');
    const res = await h.invoke(invokeBody([{ role: 'user', content: 'echo' }], agent(`${mcp.url}?token={{secrets.TOKEN}}`), { session_id: session, secrets: { TOKEN: token } }));
    const reply = await res.text();
    expect(res.status).toBe(200);
    expect(mcp.requests.at(-1)!.query).toBe(`?token=${encoded}`);
    const session_ = await (await fetch(`${h.url}/api/sessions/${session}?project_id=${h.projectId}`, { headers: { authorization: `ApiKey ${h.apiKey}` } })).text();
    await expectNowhere([token, encoded], reply, session_);
  });

  it('are masked JSON-escaped, when an MCP server quotes its headers as JSON', async () => {
    const token = 'tok"en\\with-quote-4712';
    const escaped = JSON.stringify(token).slice(1, -1);
    h.model.script([{ toolCalls: [{ name: 'srv__echo', input: {} }] }, { text: 'echoed' }]);
    const session = sid('forms-json');
    const res = await h.invoke(invokeBody([{ role: 'user', content: 'echo' }], agent(mcp.url, { authorization: 'Bearer {{secrets.TOKEN}}' }), { session_id: session, secrets: { TOKEN: token } }));
    const reply = await res.text();
    expect(res.status).toBe(200);
    expect(mcp.requests.at(-1)!.headers.authorization).toBe(`Bearer ${token}`);
    // Inside a JSON reply the escaped form is escaped again: read the texts themselves.
    const result = JSON.parse(reply).data.outputs.messages[1].content as string;
    expect(result).toContain('headers');
    const [turn] = await h.store.turns.listForSession(h.projectId, session, { limit: 1 });
    const texts = [result, ...(turn!.output as unknown as { messages: { content: string }[] }).messages.map((m) => m.content)];
    for (const form of [token, escaped]) for (const t of texts) expect(t).not.toContain(form);
    await expectNowhere([token, escaped], reply);
  });

  it('are masked percent-encoded in the 424 of an unreachable server whose url path carries one', async () => {
    const token = 'path secret{4713}';
    const encoded = new URL(`http://h/${token}`).pathname.slice(1);
    const url = `http://127.0.0.1:${await closedPort()}/{{secrets.TOKEN}}/mcp?v=1`;
    const res = await h.invoke(invokeBody([{ role: 'user', content: 'hi' }], agent(url), { session_id: sid('forms-424'), secrets: { TOKEN: token } }));
    const reply = await res.text();
    expect(res.status).toBe(424);
    expect(JSON.parse(reply).status.type).toBe('mcp-unavailable');
    await expectNowhere([token, encoded], reply);
  });

  it('are masked where the caller names a tag or a meta key after one', async () => {
    const secret = 'sk-tag-key-secret-4714';
    h.model.script([{ text: 'done' }]);
    const session = sid('forms-keys');
    const res = await h.invoke(
      invokeBody([{ role: 'user', content: 'go' }], template(), { session_id: session, secrets: { OPENAI_API_KEY: secret }, tags: { [secret]: 'v' }, meta: { nested: { [secret]: 1 } } }),
    );
    expect(res.status).toBe(200);
    const reply = await res.text();
    const [turn] = await h.store.turns.listForSession(h.projectId, session, { limit: 1 });
    expect(turn!.request).toMatchObject({ tags: { '[redacted]': 'v' }, meta: { nested: { '[redacted]': 1 } } });
    const session_ = await (await fetch(`${h.url}/api/sessions/${session}?project_id=${h.projectId}`, { headers: { authorization: `ApiKey ${h.apiKey}` } })).text();
    await expectNowhere([secret], reply, session_);
  });
});
