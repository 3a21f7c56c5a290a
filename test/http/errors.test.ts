import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, findNull, invokeBody, rawPost, readJson, sid, startHarness, template, type Harness } from '../support/harness.ts';

/** Spec §7: every bad input is a 4xx in the error envelope whose message says where the problem is. */

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ script: { text: 'fine' } });
});
afterAll(async () => h.close());

const user = [{ role: 'user', content: 'hi' }];
const withAgent = (agent: unknown, extra: Record<string, unknown> = {}) => invokeBody(user, agent, extra);

describe('template shape (spec §2.3, §9.3)', () => {
  const base = template();
  it.each([
    ['agents_md at the top level', { ...base, agents_md: 'be nice' }, 'data.parameters.agent.agents_md'],
    ['model at the top level', { ...base, model: 'gpt-4o' }, 'data.parameters.agent.model'],
    ['mcp_servers', { ...base, mcp_servers: [] }, 'data.parameters.agent.mcp_servers'],
    ['harness_kwargs', { ...base, harness_kwargs: {} }, 'data.parameters.agent.harness_kwargs'],
    ['harness as a string', { ...base, harness: 'agentd' }, 'data.parameters.agent.harness'],
    ['sandbox as a string', { ...base, sandbox: 'local' }, 'data.parameters.agent.sandbox'],
    ['runner as a string', { ...base, runner: 'local' }, 'data.parameters.agent.runner'],
    ['a template that is not an object', 'you are an agent', 'data.parameters.agent'],
  ])('pre-migration layout: %s → 400 invalid-template-shape', async (_name, agent, where) => {
    await expectError(await h.invoke(withAgent(agent)), 400, 'invalid-template-shape', where);
  });

  it.each([
    ['harness', { ...base, harness: { kind: 'agentd', colour: 'red' } }, /"colour".*data\.parameters\.agent\.harness/],
    ['runner', { ...base, runner: { kind: 'local', permissions: { default: 'allow' }, speed: 2 } }, /"speed".*data\.parameters\.agent\.runner/],
    ['sandbox', { ...base, sandbox: { kind: 'local', image: 'x' } }, /"image".*data\.parameters\.agent\.sandbox/],
    ['runner.permissions', { ...base, runner: { permissions: { default: 'allow', tools: {} } } }, /"tools".*data\.parameters\.agent\.runner\.permissions/],
    ['the template top level', { ...base, colour: 'red' }, /"colour".*data\.parameters\.agent/],
    ['a tool entry', { ...base, tools: [{ type: 'builtin', name: 'read', mode: 'x' }] }, /"mode".*data\.parameters\.agent\.tools\[0\]/],
    ['harness.extras', { ...base, harness: { kind: 'pi', extras: { system_prompt: 'x' } } }, /"system_prompt".*data\.parameters\.agent\.harness\.extras/],
  ])('unknown key in %s → 400 unknown-template-key', async (_name, agent, where) => {
    await expectError(await h.invoke(withAgent(agent)), 400, 'unknown-template-key', where);
  });

  it.each(['yolo', 'ALLOW', '', 7])('runner.permissions.default %j → 400 invalid-permission-mode', async (mode) => {
    const agent = { ...base, runner: { permissions: { default: mode } } };
    await expectError(await h.invoke(withAgent(agent)), 400, 'invalid-permission-mode', 'data.parameters.agent.runner.permissions.default');
  });

  it('harness.extras.system that is not text → 400 naming it', async () => {
    await expectError(await h.invoke(withAgent({ ...base, harness: { kind: 'agentd', extras: { system: ['x'] } } })), 400, 'invalid-request', 'data.parameters.agent.harness.extras.system');
  });

  it("harness.extras on agentd's own loop: `system` takes the place of its note on the folder, `append_system` follows", async () => {
    h.model.reset();
    const systemOf = async (extras: Record<string, string>) => {
      const body = await readJson(await h.invoke(withAgent({ ...base, instructions: { agents_md: 'AGENTS-31' }, harness: { kind: 'agentd', extras } })));
      expect(body.status.code).toBe(200);
      return h.model.requests.at(-1)!.messages.find((m) => m.role === 'system')!.content;
    };
    expect(await systemOf({ system: 'SYSTEM-31' })).toBe('AGENTS-31\n\nSYSTEM-31');
    expect(await systemOf({ append_system: 'APPEND-31' })).toMatch(/^AGENTS-31\n\nYour working folder is .*\n\nAPPEND-31$/s);
  });

  it('harness, runner and sandbox may each leave out their kind: it is the default, as every template key may be left out', async () => {
    for (const [key, value] of [['harness', {}], ['harness', { kind: null }], ['runner', {}], ['sandbox', {}]] as const) {
      const res = await h.invoke(withAgent({ ...base, [key]: value }));
      expect(res.status, `${key}: ${JSON.stringify(value)}`).toBe(200);
      await readJson(res);
    }
    h.model.reset();
    const res = await h.invoke(withAgent({ ...base, instructions: { agents_md: 'AGENTS-KINDLESS' }, harness: { extras: { append_system: 'APPEND-KINDLESS' } } }));
    expect(res.status).toBe(200);
    await readJson(res);
    // agentd's own loop ran it: its note on the folder, then the appended text.
    expect(h.model.requests.at(-1)!.messages.find((m) => m.role === 'system')!.content).toMatch(/^AGENTS-KINDLESS\n\nYour working folder is .*\n\nAPPEND-KINDLESS$/s);
  });

  it('an unknown harness kind is a 400 listing the known kinds', async () => {
    await expectError(await h.invoke(withAgent({ ...base, harness: { kind: 'claude-code' } })), 400, 'unsupported-kind', /data\.parameters\.agent\.harness\.kind.*agentd/);
  });

  it('an unknown built-in tool name is a 400 naming the tool entry', async () => {
    await expectError(await h.invoke(withAgent({ ...base, tools: [{ type: 'builtin', name: 'rm' }] })), 400, undefined, 'data.parameters.agent.tools[0]');
  });
});

describe('session id (spec §2.1, §8)', () => {
  it.each([
    ['with a space', 'a b'],
    ['129 characters', 'x'.repeat(129)],
    ['empty', ''],
    ['with a slash', 'a/b'],
    ['not a string', 42],
  ])('a body session_id %s → 400 invalid-session-id', async (_name, id) => {
    await expectError(await h.invoke({ ...withAgent(template()), session_id: id }), 400, 'invalid-session-id', 'session_id');
  });

  it.each([
    ['with a space', 'a b'],
    ['129 characters', 'x'.repeat(129)],
    ['empty', ''],
  ])('an x-ag-session-id header %s → 400 invalid-session-id', async (_name, id) => {
    const res = await h.invoke(withAgent(template()), { headers: { 'x-ag-session-id': id } });
    await expectError(res, 400, 'invalid-session-id', 'x-ag-session-id');
  });

  it.each([
    ['with a space', 'ag.session.id=a%20b'],
    ['that cannot be decoded', 'ag.session.id=%E0%A4%A'],
  ])('a baggage ag.session.id %s → 400 invalid-session-id', async (_name, baggage) => {
    await expectError(await h.invoke(withAgent(template()), { headers: { baggage } }), 400, 'invalid-session-id', 'baggage');
  });

  it('128 characters is still a valid session id', async () => {
    const id = `${'x'.repeat(120)}${Math.random().toString(36).slice(2, 10)}`.slice(0, 128);
    const res = await h.invoke({ ...withAgent(template()), session_id: id });
    expect((await readJson(res)).session_id).toBe(id);
  });
});

describe('request fields', () => {
  it('two execution reference families → 400 conflicting-references', async () => {
    const res = await h.invoke(withAgent(template(), { references: { workflow: { id: 'w1' }, application: { id: 'a1' } } }));
    await expectError(res, 400, 'conflicting-references', /workflow and application/);
  });

  it('one family plus environment keys is allowed with inline parameters', async () => {
    const res = await h.invoke(withAgent(template(), { references: { workflow: { id: 'w1' }, environment: { slug: 'prod' } } }));
    expect(res.status).toBe(200);
    await readJson(res);
  });

  it('parameters with keys but no agent (a misspelt one) → 400 naming them, not the default template; empty parameters run it', async () => {
    const body = (parameters: unknown) => ({ data: { inputs: { messages: user }, parameters } });
    const calls = h.model.requests.length;
    await expectError(await h.invoke(body({ agnet: template() })), 400, 'invalid-request', /data\.parameters has no "agent" \(it has "agnet"\)/);
    await expectError(await h.invoke(body({ llm: { provider: 'openai', model: 'x' } })), 400, 'invalid-request', /"llm"/);
    expect(h.model.requests.length).toBe(calls);
    h.model.script({ text: 'default' });
    const ran = await h.invoke(body({}));
    expect(ran.status).toBe(200);
    await readJson(ran);
  });

  it('parameters.agent null is the template left out: the default template runs; beside other keys, the 400 names those, not "agent"', async () => {
    const body = (parameters: unknown) => ({ data: { inputs: { messages: user }, parameters } });
    h.model.script({ text: 'default' });
    const ran = await h.invoke(body({ agent: null }));
    expect(ran.status).toBe(200);
    expect((await readJson(ran)).data.outputs.messages.at(-1).content).toBe('default');
    const res = await h.invoke(body({ agent: null, llm: { provider: 'openai', model: 'x' } }));
    const json = await expectError(res, 400, 'invalid-request', /data\.parameters has no "agent" \(it has "llm"\)/);
    expect(json.status.message).not.toMatch(/it has "agent"/);
  });

  it('an unknown references key → 400 naming it', async () => {
    await expectError(await h.invoke(withAgent(template(), { references: { flow: { id: 'x' } } })), 400, 'invalid-request', /"flow".*references/);
  });

  it('an unsupported version → 400 unsupported-version naming the supported ones', async () => {
    await expectError(await h.invoke(withAgent(template(), { version: '1999.01.01' })), 400, 'unsupported-version', /1999\.01\.01.*2025\.07\.14/);
  });

  it('a message quoting a huge value keeps its start and end, not megabytes', async () => {
    const res = await h.invoke(withAgent(template(), { version: `v${'9'.repeat(2_000_000)}` }));
    expect(res.status).toBe(400);
    const { status } = await res.json();
    expect(status.type).toBe('unsupported-version');
    expect(status.message.length).toBeLessThan(2_100);
    expect(status.message).toMatch(/^version "v9+ … \[\d+ characters left out\] … 9+".*2025\.07\.14/);
  });

  it('the current version is accepted', async () => {
    expect((await h.invoke(withAgent(template(), { version: '2025.07.14' }))).status).toBe(200);
  });

  it('content blocks other than text and tool blocks are refused with a message that says where tool calls and decisions go', async () => {
    const image = { role: 'user', content: [{ type: 'image', url: 'https://example.com/a.png' }] };
    const res = await h.invoke({ data: { inputs: { messages: [...user, image] }, parameters: { agent: template() } } });
    await expectError(res, 400, 'invalid-messages', /approval: \{id, approved, reason\?\} at data\.inputs\.messages\[1\]\.content$/);
  });

  it.each([
    ['flags.stream', { ...withAgent(template()), flags: { stream: 'yes' } }],
    ['flags.trim', { ...withAgent(template()), flags: { trim: 1 } }],
    ['flags', { ...withAgent(template()), flags: [] }],
    ['data.inputs.messages', { data: { inputs: { messages: {} }, parameters: { agent: template() } } }],
    ['data.inputs', { data: { inputs: [], parameters: { agent: template() } } }],
    ['data.inputs.messages[0].role', { data: { inputs: { messages: [{ role: 7, content: 'x' }] }, parameters: { agent: template() } } }],
    ['data.inputs.messages[1].content', { data: { inputs: { messages: [...user, { role: 'user', content: { text: 1 } }] }, parameters: { agent: template() } } }],
    ['data.inputs.messages[0]', { data: { inputs: { messages: ['hello'] }, parameters: { agent: template() } } }],
    ['tags', { ...withAgent(template()), tags: [] }],
    ['meta', { ...withAgent(template()), meta: 'x' }],
    ['links.other', { ...withAgent(template()), links: { other: { trace_id: 1 } } }],
    ['secrets.OPENAI_API_KEY', { ...withAgent(template()), secrets: { OPENAI_API_KEY: 5 } }],
    ['credentials', { ...withAgent(template()), credentials: {} }],
    ['data.parameters.agent.llm.model', withAgent({ ...template(), llm: { model: 5 } })],
    ['data.parameters.agent.tools', withAgent({ ...template(), tools: {} })],
    ['data.parameters.agent.runner.max_steps', withAgent({ ...template(), runner: { max_steps: 0 } })],
    ['data.parameters', { data: { inputs: { messages: user }, parameters: 'agent' } }],
    ['data', { data: 'x' }],
    ['version', { ...withAgent(template()), version: 2025 }],
  ])('a wrong type at %s → 400 naming the path', async (where, body) => {
    const res = await h.invoke(body);
    await expectError(res, 400, undefined, where);
  });

  it('missing messages → 400 invalid-messages', async () => {
    await expectError(await h.invoke({ data: { parameters: { agent: template() } } }), 400, 'invalid-messages', 'data.inputs.messages');
  });

  it('an empty message list → 400 invalid-messages', async () => {
    await expectError(await h.invoke(invokeBody([], template())), 400, 'invalid-messages', 'data.inputs.messages');
  });

  it('a UIMessage sent without x-ag-messages-format: vercel → 400 naming it and the header, not a turn on an empty message', async () => {
    const calls = h.model.requests.length;
    const ui = [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'hello' }] }];
    await expectError(await h.invoke(invokeBody(ui, template())), 400, 'invalid-messages', /x-ag-messages-format: vercel.*data\.inputs\.messages\[0\]/);
    expect(h.model.requests.length).toBe(calls);
    const res = await h.invoke(invokeBody(ui, template()), { headers: { 'x-ag-messages-format': 'vercel' } });
    expect(res.status).toBe(200);
    await readJson(res);
  });

  it('only system messages → 400 invalid-messages, and the model is not called', async () => {
    const before = h.model.requests.length;
    const res = await h.invoke(invokeBody([{ role: 'system', content: 'be brief' }], template()));
    await expectError(res, 400, 'invalid-messages', 'data.inputs.messages');
    expect(h.model.requests.length).toBe(before);
  });

  it('an empty object → 400 invalid-messages', async () => {
    await expectError(await h.invoke({}), 400, 'invalid-messages');
  });

  it('a tool result with no call before it → 400 naming the message', async () => {
    const messages = [...user, { role: 'tool', tool_call_id: 'nope', content: 'x' }];
    await expectError(await h.invoke(invokeBody(messages, template())), 400, 'invalid-messages', 'data.inputs.messages[1]');
  });

  it("a tool call whose input is not an object → 400 naming the input; the model is not called", async () => {
    h.model.reset();
    for (const input of ['{"path": "a"}', ['a'], 7]) {
      const messages = [...user, { role: 'tool', content: '', tool_call_id: 'c1', tool_name: 'write', input }, { role: 'tool', tool_call_id: 'c1', content: 'done' }];
      await expectError(await h.invoke(invokeBody(messages, template())), 400, 'invalid-messages', /input must be an object.*data\.inputs\.messages\[1\]\.input/);
    }
    expect(h.model.requests).toHaveLength(0);
  });

  it('a bad x-ag-messages-transcript header → 400 naming it', async () => {
    await expectError(await h.invoke(withAgent(template()), { headers: { 'x-ag-messages-transcript': 'some' } }), 400, 'invalid-request', 'x-ag-messages-transcript');
  });
});

describe('the body itself', () => {
  it('malformed JSON → 400 invalid-json', async () => {
    await expectError(await h.invoke('{"data": {"inputs": '), 400, 'invalid-json');
  });

  it('malformed JSON says what the parser met', async () => {
    await expectError(await h.invoke('{"data": {"inputs": }'), 400, 'invalid-json', /not valid JSON: Unexpected token '\}', .*"inputs": \}/);
  });

  it.each([
    ['{"tags": {"__proto__": {"admin": true}}}', /"__proto__" key at tags\b/],
    ['{"data": {"inputs": {"messages": [{"role": "user", "content": "x", "constructor": {"prototype": {}}}]}}}', /"constructor" key at data\.inputs\.messages\[0\]\.constructor\b/],
  ])('a body with a key that could change a prototype → 400 naming the key and where (%s)', async (raw, where) => {
    await expectError(await h.invoke(raw), 400, 'invalid-request', where);
  });

  it('an empty body → 400 invalid-json', async () => {
    await expectError(await h.invoke(''), 400, 'invalid-json');
  });

  it('no body and no Content-Type → 400 invalid-json', async () => {
    const res = await rawPost(`${h.url}/services/agent/v0/invoke?project_id=${h.projectId}`, '', { authorization: `ApiKey ${h.apiKey}` });
    expect(res.status).toBe(400);
    expect(JSON.parse(res.text).status).toMatchObject({ code: 400, type: 'invalid-json', message: expect.stringMatching(/empty/) });
  });

  it.each(['text/plain', 'application/x-www-form-urlencoded', 'application/octet-stream'])('a route that takes no body accepts an empty one sent as %s; invoke, which needs one, still says 415', async (type) => {
    const auth = { authorization: `ApiKey ${h.apiKey}`, 'content-type': type };
    const inspect = await rawPost(`${h.url}/services/agent/v0/inspect?project_id=${h.projectId}`, '', auth);
    expect(inspect.status, inspect.text).toBe(200);
    const stop = await rawPost(`${h.url}/api/sessions/${sid('no-turn')}/stop?project_id=${h.projectId}`, '', auth);
    expect(JSON.parse(stop.text).status).toMatchObject({ code: 404, type: 'not-found' });
    const invoke = await rawPost(`${h.url}/services/agent/v0/invoke?project_id=${h.projectId}`, '', auth);
    expect(JSON.parse(invoke.text).status).toMatchObject({ code: 415, type: 'unsupported-media-type' });
    const withBody = await rawPost(`${h.url}/services/agent/v0/inspect?project_id=${h.projectId}`, 'a=1', auth);
    expect(JSON.parse(withBody.text).status).toMatchObject({ code: 415, type: 'unsupported-media-type' });
  });

  it.each(['[]', '"text"', '42', 'null', 'true'])('a JSON body that is not an object (%s) → 400', async (raw) => {
    await expectError(await h.invoke(raw), 400);
  });

  // Built as text: JSON.stringify itself runs out of stack on values this deep.
  const deep = `${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}`;
  const agent = JSON.stringify(template()).slice(0, -1);
  it.each([
    ['meta', `{"meta": ${deep}, "data": {"inputs": {"messages": [{"role": "user", "content": "hi"}]}}}`, 'meta.a.a'],
    ['the template', `{"data": {"inputs": {"messages": [{"role": "user", "content": "hi"}]}, "parameters": {"agent": ${agent}, "sandbox": {"extras": ${deep}}}}}}`, 'data.parameters.agent.sandbox.extras.a'],
    ['a message', `{"data": {"inputs": {"messages": [{"role": "user", "content": "hi", "extra": ${deep}}]}}}`, 'data.inputs.messages[0].extra.a'],
  ])('JSON nested thousands of levels deep in %s → 400 naming where, not a 500', async (_where, raw, path) => {
    await expectError(await h.invoke(raw), 400, 'invalid-request', path);
  });

  it('a compressed body → 415 naming the coding, not a "not valid JSON" 400 or a parse of its bytes', async () => {
    const json = JSON.stringify(invokeBody(user, template()));
    const gzipped = await h.invoke(gzipSync(json), { headers: { 'content-encoding': 'gzip' } });
    expect(gzipped.headers.get('accept-encoding')).toBe('identity');
    await expectError(gzipped, 415, 'unsupported-media-type', /Content-Encoding "gzip".*uncompressed/);
    // Labelled compressed but plain: still refused, since the label is what says how to read it.
    await expectError(await h.invoke(json, { headers: { 'content-encoding': 'br' } }), 415, 'unsupported-media-type', /"br"/);
    expect((await h.invoke(json, { headers: { 'content-encoding': 'identity' } })).status).toBe(200);
  });

  it('a body that is not JSON → 415 unsupported-media-type', async () => {
    const res = await h.invoke('hello', { headers: { 'content-type': 'text/plain' } });
    await expectError(res, 415, 'unsupported-media-type', /application\/json/);
  });

  it('an unknown route → 404 in the envelope', async () => {
    const res = await fetch(`${h.url}/services/agent/v0/nope`, { method: 'POST' });
    await expectError(res, 404, 'not-found');
  });

  it('a route asked with a method it does not take → 405 in the envelope, with the methods it takes in Allow', async () => {
    const get = await fetch(`${h.url}/services/agent/v0/invoke?project_id=${h.projectId}`);
    expect(get.headers.get('allow')).toBe('POST');
    await expectError(get, 405, 'method-not-allowed', '/services/agent/v0/invoke takes POST, not GET');
    const put = await fetch(`${h.url}/api/sessions/some-session`, { method: 'PUT' });
    expect(put.headers.get('allow')).toBe('GET, HEAD, DELETE');
    await expectError(put, 405, 'method-not-allowed');
  });

  it('a URL the router cannot read (bad percent-encoding, a path segment over 1024 characters) → 400 in the envelope', async () => {
    const query = `?project_id=${h.projectId}`;
    for (const url of [`/api/sessions/%zz${query}`, `/api/sessions/${'x'.repeat(1025)}/files${query}`, `/api/sessions/interactions/${'x'.repeat(2000)}${query}`]) {
      const res = await fetch(h.url + url, { headers: { authorization: `ApiKey ${h.apiKey}` } });
      expect(res.headers.get('x-ag-version')).toBe('2025.07.14');
      await expectError(res, 400, 'invalid-request', /URL/);
    }
  });

  it('a query string with bad percent-encoding → 400, not a lookup of the undecoded text', async () => {
    for (const url of [`/api/sessions?project_id=%zz`, `/api/sessions?project_id=${h.projectId}&x=%zz`, `/services/agent/v0/inspect?project_id=${h.projectId}%ff`]) {
      const res = await fetch(h.url + url, { method: url.includes('inspect') ? 'POST' : 'GET', headers: { authorization: `ApiKey ${h.apiKey}` } });
      await expectError(res, 400, 'invalid-request', /query string/);
    }
    expect((await fetch(`${h.url}/api/sessions?project_id=${h.projectId}&id_prefix=a%3Ab`, { headers: { authorization: `ApiKey ${h.apiKey}` } })).status).toBe(200);
  });
});

describe('body size limit', () => {
  let small: Harness;
  beforeAll(async () => {
    small = await startHarness({ env: { AGENTD_MAX_BODY: '2048' }, script: { text: 'fine' } });
  });
  afterAll(async () => small.close());

  it('a body over AGENTD_MAX_BODY → 413 payload-too-large, naming the limit', async () => {
    const res = await small.invoke(invokeBody([{ role: 'user', content: 'x'.repeat(4096) }], template()));
    await expectError(res, 413, 'payload-too-large', 'larger than the 2048 bytes the server accepts (AGENTD_MAX_BODY)');
  });

  it("a test set file over it too: the import's file is the body", async () => {
    const csv = `question\n${'a long question\n'.repeat(200)}`;
    const res = await fetch(`${small.url}/api/simple/testsets/import?project_id=${small.projectId}`, { method: 'POST', headers: { authorization: `ApiKey ${small.apiKey}`, 'content-type': 'text/csv' }, body: csv });
    await expectError(res, 413, 'payload-too-large', 'larger than the 2048 bytes the server accepts (AGENTD_MAX_BODY)');
  });

  it('a body under the limit runs', async () => {
    const res = await small.invoke(invokeBody([{ role: 'user', content: 'x'.repeat(100) }], template()));
    expect(res.status).toBe(200);
  });
});

/** Deterministic junk, so a failure reproduces. */
function prng(seed: number) {
  return () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed / 0x7fffffff;
  };
}

const KEYS = ['data', 'inputs', 'messages', 'parameters', 'agent', 'role', 'content', 'tools', 'llm', 'runner', 'permissions', 'default', 'flags', 'stream', 'session_id', 'tags', 'tool_call_id', 'tool_name', 'input', 'approval', 'id', 'approved', 'version', 'secrets', 'testcase', 'trace', 'traceparent', 'harness', 'kind', 'sandbox', '__proto__', 'constructor'];

function junk(rand: () => number, depth: number): unknown {
  const pick = <T>(xs: T[]): T => xs[Math.floor(rand() * xs.length)]!;
  const r = rand();
  if (depth <= 0 || r < 0.3) {
    return pick<unknown>([null, true, false, 0, -1, 1e308, -1e308, 2 ** 63, 0.5, '', 'user', 'assistant', 'tool', 'allow', 'x'.repeat(300), '\u0000', '💥', [], {}]);
  }
  if (r < 0.5) return Array.from({ length: Math.floor(rand() * 4) }, () => junk(rand, depth - 1));
  return Object.fromEntries(Array.from({ length: 1 + Math.floor(rand() * 4) }, () => [pick(KEYS), junk(rand, depth - 1)]));
}

/** Every position of a valid body replaced by null in turn. */
function nullEverywhere(value: unknown, replace: (v: unknown) => unknown = (v) => v): unknown[] {
  const out: unknown[] = [];
  if (Array.isArray(value)) {
    value.forEach((v, i) => {
      out.push(replace(value.map((x, j) => (j === i ? null : x))));
      for (const variant of nullEverywhere(v, (nv) => replace(value.map((x, j) => (j === i ? nv : x))))) out.push(variant);
    });
  } else if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      out.push(replace({ ...value, [k]: null }));
      for (const variant of nullEverywhere(v, (nv) => replace({ ...value, [k]: nv }))) out.push(variant);
    }
  }
  return out;
}

describe('garbage in is never a 5xx', () => {
  async function expectHandled(res: Response, label: string) {
    const text = await res.text();
    expect(res.status, `${label} → ${res.status} ${text}`).toBeLessThan(500);
    const body = JSON.parse(text);
    expect(findNull(body), label).toBeUndefined();
    expect(body.status.code, label).toBe(res.status);
    if (res.status >= 400) {
      expect(typeof body.status.type, label).toBe('string');
      expect(typeof body.status.message, label).toBe('string');
    }
  }

  it('a NUL character in an id, a slug or a name (PostgreSQL cannot store one)', async () => {
    const q = `project_id=${h.projectId}`;
    const headers = { authorization: `ApiKey ${h.apiKey}`, 'content-type': 'application/json' };
    const calls: [string, string, unknown?][] = [
      ['GET', `/api/sessions/interactions/a%00b?${q}`],
      ['POST', `/api/sessions/interactions/a%00b/respond?${q}`, { answer: { approved: true } }],
      ['GET', `/api/simple/testsets/a%00b?${q}`],
      ['GET', `/api/simple/evaluations/a%00b?${q}`],
      ['GET', `/api/workflows/a%00b?${q}`],
      ['GET', `/api/environments/a%00b/revisions?${q}`],
      ['POST', `/api/workflows/resolve?${q}`, { references: { workflow_revision: { id: 'a\u0000b' } } }],
      ['POST', `/api/evaluations/results/query?${q}`, { result: { run_ids: ['a\u0000b'] } }],
      ['POST', `/api/environments?${q}`, { slug: 'nul-env', name: 'a\u0000b' }],
      ['POST', `/services/agent/v0/inspect?${q}`, { references: { workflow: { slug: 'a\u0000b' } } }],
      ['POST', `/services/agent/v0/invoke?${q}`, { ...(invokeBody(user, template()) as object), references: { workflow_revision: { id: 'a\u0000b' } } }],
    ];
    for (const [method, path, body] of calls) {
      const res = await fetch(h.url + path, { method, headers, ...(body ? { body: JSON.stringify(body) } : {}) });
      // SQLite stores and matches such text, so there the answer may be a 404 or a 201.
      if (res.status >= 400) await expectHandled(res, `${method} ${path}`);
      else expect(res.status, `${method} ${path}`).toBeLessThan(300);
    }
  });

  it('random junk bodies', async () => {
    const rand = prng(20250714);
    const bodies = Array.from({ length: 120 }, () => junk(rand, 6));
    for (const body of bodies) {
      // Half go in as the whole body, half inside an otherwise valid one, to reach deeper checks.
      const wrapped = rand() < 0.5 ? body : { ...(invokeBody(user, template()) as object), ...(body && typeof body === 'object' && !Array.isArray(body) ? body : { data: body }) };
      await expectHandled(await h.invoke(JSON.stringify(wrapped)), JSON.stringify(wrapped).slice(0, 300));
    }
  });

  it('null in every position of a valid body', async () => {
    const valid = {
      session_id: sid('nulls'),
      version: '2025.07.14',
      flags: { stream: false, trim: false },
      tags: { a: 'b' },
      meta: { m: 1 },
      links: { l: { trace_id: 'a'.repeat(32), span_id: 'b'.repeat(16) } },
      secrets: { OPENAI_API_KEY: 'sk-test-openai-key' },
      data: {
        inputs: { messages: [{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'hello' }, { role: 'user', content: 'again' }] },
        parameters: { agent: { ...template({ tools: [{ type: 'builtin', name: 'read' }], mode: 'ask' }), harness: { kind: 'agentd' }, sandbox: { kind: 'local' } } },
        trace: { traceparent: `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01` },
      },
    };
    const variants = nullEverywhere(valid);
    expect(variants.length).toBeGreaterThan(30);
    for (const [i, body] of variants.entries()) {
      const withSession = { ...(body as object), session_id: sid('nulls') };
      await expectHandled(await h.invoke(withSession), `variant ${i}: ${JSON.stringify(withSession)}`);
    }
  });

  it.each([
    ['huge numbers', '{"session_id": 1e999, "data": {"inputs": {"messages": [{"role": "user", "content": 1e400}]}}}'],
    ['a huge max_steps', JSON.stringify(withAgent({ ...template(), runner: { max_steps: 1e308 } }))],
    ['a negative max_steps', JSON.stringify(withAgent({ ...template(), runner: { max_steps: -1 } }))],
    ['deeply nested arrays', `{"data": {"inputs": {"messages": ${'['.repeat(5000)}${']'.repeat(5000)}}}}`],
    ['deeply nested objects in tags', `{"tags": ${'{"a":'.repeat(3000)}1${'}'.repeat(3000)}, "data": {"inputs": {"messages": [{"role":"user","content":"x"}]}}}`],
    ['deeply nested arrays as the body', `${'['.repeat(20000)}${']'.repeat(20000)}`],
    ['a proto key', '{"__proto__": {"admin": true}, "data": {"__proto__": null}}'],
    ['control characters', '{"session_id": "\\u0000", "data": null}'],
    ['a lone surrogate in content', '{"data": {"inputs": {"messages": [{"role":"user","content":"\\ud800"}]}}}'],
    ['duplicate keys', '{"data": 1, "data": {"inputs": {"messages": 5}}}'],
    ['trailing garbage', '{"data": {}} xyz'],
    ['a BOM', '\ufeff{"data": {}}'],
  ])('%s', async (label, raw) => {
    await expectHandled(await h.invoke(raw), label);
  });

  it.each([
    ['accept', 'garbage/;;;q=x'],
    ['accept', 'application/json;q=abc'],
    ['x-ag-messages-format', 'klingon'],
    ['x-ag-session-control', 'steal'],
    ['traceparent', 'zz-not-a-trace'],
    ['baggage', 'ag.session.id=%E0%A4%A'],
    ['x-ag-session-id', '../../etc'],
  ])('a junk %s header', async (name, value) => {
    await expectHandled(await h.invoke(withAgent(template(), { session_id: undefined }), { headers: { [name]: value } }), `${name}: ${value}`);
  });
});
