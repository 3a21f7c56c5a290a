import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_TYPES } from '../../src/contract/errors.ts';
import { startServe } from '../support/child-server.ts';

/**
 * What a user reads about the server's names must match what the server has: clients branch on
 * error types, and operators set the variables the docs name.
 */

const root = path.resolve(import.meta.dirname, '../..');
const read = (file: string) => readFileSync(path.join(root, file), 'utf8');
const docs = ['README.md', ...readdirSync(path.join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)].map(read).join('\n');

function sourceFiles(dir: string): string[] {
  return readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((entry) => {
    const file = `${dir}/${entry.name}`;
    if (entry.isDirectory()) return sourceFiles(file);
    return entry.name.endsWith('.ts') ? [file] : [];
  });
}

describe('docs/errors.md', () => {
  it('lists every error type with its status, and no other', () => {
    const rows = [...read('docs/errors.md').matchAll(/^\| `([a-z-]+)` \| (\d{3}) \|/gm)].map((m) => [m[1], Number(m[2])]);
    expect(Object.fromEntries(rows)).toEqual(ERROR_TYPES);
    expect(rows).toHaveLength(Object.keys(ERROR_TYPES).length);
  });
});

describe('environment variables', () => {
  it('every one the server reads is named in README.md or docs/', () => {
    const named = new Set<string>();
    for (const file of sourceFiles('src')) {
      for (const m of read(file).matchAll(/(?:['"`]|env\.)((?:AGENTD|OTEL|OPENAI|ANTHROPIC|OLLAMA)_[A-Z0-9_]+)\b/g)) named.add(m[1]!);
    }
    // The docs give each OTLP exporter variable once and say every one also has its `_TRACES_` form.
    const missing = [...named].filter((name) => !docs.includes(name.replace('OTEL_EXPORTER_OTLP_TRACES_', 'OTEL_EXPORTER_OTLP_')));
    expect(named.size).toBeGreaterThan(40);
    expect(missing).toEqual([]);
  });
});

/**
 * The docs' examples as a new user runs them: `agentd serve` with no provider (the demo model),
 * the banner's export line pasted, then each command of README's quick start through bash, exactly
 * as printed but for the ids the README says to fill in, and the other pages' `curl` examples. What
 * the docs say comes back is checked, README's `# →` comment included.
 */
describe('the docs\' examples, run as written against `agentd serve`', () => {
  const NO_PROVIDER = Object.fromEntries(
    ['OPENAI_API_KEY', 'ANTHROPIC_API_KEY', 'OPENAI_BASE_URL', 'ANTHROPIC_BASE_URL', 'OLLAMA_BASE_URL', 'AGENTD_DEFAULT_PROVIDER', 'AGENTD_DEFAULT_MODEL', 'AGENTD_DEMO_MODEL_URL', 'DATABASE_URL'].map((name) => [name, undefined]),
  );
  const quickStart = read('README.md').split('Paste the `export` line, then:')[1]!.split('Or open the console')[0]!;
  /** Each `sh` block's commands (a line at the margin and the indented lines that go on with it) and its comments. */
  const blocks = [...quickStart.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => {
    const commands: string[] = [];
    const comments: string[] = [];
    for (const line of m[1]!.split('\n')) {
      if (line.startsWith('#')) comments.push(line);
      else if (/^\s+\S/.test(line) && commands.length) commands[commands.length - 1] += `\n${line}`;
      else if (line.trim()) commands.push(line);
    }
    return { commands, comments };
  });

  let dataDir: string;
  let server: Awaited<ReturnType<typeof startServe>>;
  let shellEnv: NodeJS.ProcessEnv;
  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentd-readme-'));
    server = await startServe({ ...NO_PROVIDER, AGENTD_DATA_DIR: dataDir });
    const exported = /For the command line: export (.+)/.exec(server.output())![1]!;
    const pasted = Object.fromEntries(exported.trim().split(' ').map((pair) => pair.split('=') as [string, string]));
    const inherited = Object.fromEntries(Object.entries(process.env).filter(([name]) => !(name in NO_PROVIDER)));
    // `npx agentd` runs bin/agentd.js on the `node` it finds first: this one.
    shellEnv = { ...inherited, ...pasted, PATH: `${path.dirname(process.execPath)}${path.delimiter}${process.env.PATH}` };
  }, 60_000);
  afterAll(async () => {
    server?.child.kill('SIGTERM');
    await server?.exited;
    await rm(dataDir, { recursive: true, force: true });
  });

  const sh = (command: string, cwd = root) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile('bash', ['-c', command], { cwd, env: shellEnv }, (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }));
    });
  const json = async (command: string) => {
    const run = await sh(command);
    expect(run.code, run.stderr).toBe(0);
    return JSON.parse(run.stdout);
  };
  const [first, pause, answer] = blocks;
  /** The approve block: in band first, then, from its `# or out of band` comment on, through the API. */
  const [inBand, outOfBand, show] = answer!.commands;

  it('has the blocks this test runs', () => {
    expect(blocks).toHaveLength(3);
    expect(first!.commands).toHaveLength(2);
    expect(pause!.commands).toHaveLength(1);
    expect(answer!.commands).toHaveLength(3);
    expect(inBand).toContain('"approval": {"id": "INTERACTION_ID", "approved": true}');
    expect(outOfBand).toContain('/api/sessions/interactions/INTERACTION_ID/respond');
    expect(show).toMatch(/^npx agentd sessions show try-1 /);
  });

  it('runs a first turn from the command line and with curl, as JSON and streamed', async () => {
    const [cli, curl] = first!.commands;
    const run = await sh(cli!);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('Hello!');

    // "The reply carries the turn's messages, its stop reason and usage, and the session id".
    const reply = await json(curl!);
    expect(reply.status).toEqual({ code: 200, message: 'ok' });
    expect(reply.session_id).toEqual(expect.any(String));
    expect(reply.data.outputs).toMatchObject({ stop_reason: 'end_turn', usage: { total: expect.any(Number) } });
    expect(reply.data.outputs.messages.at(-1)).toMatchObject({ role: 'assistant', content: expect.stringContaining('Hello!') });

    // "Stream the same turn with `curl -N … -H 'Accept: text/event-stream'`", and the Vercel stream with one header more.
    const streamed = curl!.replace('curl -s ', "curl -s -N -H 'Accept: text/event-stream' ");
    const sse = await sh(streamed);
    expect(sse.stdout).toMatch(/^data: \{"type":"turn_start"/);
    expect(sse.stdout).toMatch(/data: \{"type":"done","data":\{"stop_reason":"end_turn"/);
    const vercel = await sh(streamed.replace('curl -s -N ', "curl -s -N -H 'x-ag-messages-format: vercel' "));
    expect(vercel.stdout).toMatch(/^data: \{"type":"start"/);
    expect(vercel.stdout.trim().endsWith('data: [DONE]')).toBe(true);
  });

  /** The write the README asks for, paused; what its `# →` comment says the reply holds, checked. */
  async function paused() {
    const reply = await json(pause!.commands[0]!);
    const claimed = [...pause!.comments.join('\n').matchAll(/"(\w+)": "([^"…]+)"/g)];
    expect(claimed.map(([, key]) => key)).toEqual(['stop_reason', 'kind', 'tool']);
    const text = JSON.stringify(reply);
    for (const [, key, value] of claimed) expect(text).toContain(JSON.stringify({ [key!]: value }).slice(1, -1));
    const pending = reply.data.outputs.pending_interaction;
    const call = reply.data.outputs.messages.find((m: { approval?: unknown }) => m.approval);
    // "CALL_ID and INTERACTION_ID are the paused reply's tool-call message's tool_call_id and its approval.id, the same as pending_interaction.id"
    expect(call.approval.id).toBe(pending.id);
    return { callId: call.tool_call_id as string, interactionId: pending.id as string };
  }
  const filled = (command: string, ids: { callId: string; interactionId: string }) => command.replaceAll('CALL_ID', ids.callId).replaceAll('INTERACTION_ID', ids.interactionId);

  it('pauses the write, and the re-posted conversation approves it in band', async () => {
    const ids = await paused();
    const reply = await json(filled(inBand!, ids));
    expect(reply.data.outputs.stop_reason).toBe('end_turn');
    expect(reply.data.outputs.messages[0]).toMatchObject({ role: 'tool', tool_call_id: ids.callId, content: 'wrote 2 bytes to hello.txt', is_error: false });
  });

  it('pauses it again, and the interactions API approves it out of band; `agentd sessions show` then lists the continued turn', async () => {
    const ids = await paused();
    const record = await json(filled(outOfBand!, ids));
    expect(record).toMatchObject({ id: ids.interactionId, status: 'responded', answer: { approved: true } });
    // "the continued turn, once it has run"
    const auth = { authorization: `ApiKey ${shellEnv.AGENTD_API_KEY}` };
    await expect
      .poll(async () => (await (await fetch(`${shellEnv.AGENTD_URL}/api/sessions/try-1`, { headers: auth })).json()).turns[0], { timeout: 15_000 })
      .toMatchObject({ status: 'completed', request: { via: 'out_of_band' } });
    const run = await sh(show!);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout.split('\n').find((line) => /^\S+\s+\d{4}-/.test(line))).toMatch(/\scompleted\s+end_turn\s/);
  });

  it("answers a conversation of system messages alone with docs/errors.md's example envelope", async () => {
    const example = JSON.parse(/```json\n([\s\S]*?)```/.exec(read('docs/errors.md'))![1]!);
    const body = { session_id: example.session_id, data: { inputs: { messages: [{ role: 'system', content: 'Be brief.' }] } } };
    const res = await fetch(`${shellEnv.AGENTD_URL}/services/agent/v0/invoke?project_id=${shellEnv.AGENTD_PROJECT_ID}`, {
      method: 'POST',
      headers: { authorization: `ApiKey ${shellEnv.AGENTD_API_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(example.status.code);
    expect(await res.json()).toEqual(example);
  });

  /** The one `curl` example of a page, as printed, with the status it answered appended. */
  async function curlExample(file: string, cwd = root, fill: (command: string) => string = (c) => c) {
    const found = [...read(file).matchAll(/```sh\n(curl [\s\S]*?)```/g)].map((m) => m[1]!.trim());
    expect(found, file).toHaveLength(1);
    const run = await sh(`${fill(found[0]!)} -w '\\n%{http_code}'`, cwd);
    expect(run.code, run.stderr).toBe(0);
    const lines = run.stdout.trim().split('\n');
    return { status: Number(lines.pop()), body: JSON.parse(lines.join('\n')) };
  }

  it("runs the other pages' curl examples, each answered as its page says", async () => {
    // docs/api.md: "put in your own key for the example's sk-…"; the placeholder itself is refused, saying so.
    const placeholder = await curlExample('docs/api.md');
    expect(placeholder).toMatchObject({ status: 400, body: { status: { type: 'invalid-request', message: expect.stringContaining('placeholder') } } });
    const connection = await curlExample('docs/api.md', root, (c) => c.replace('sk-…', 'sk-test-0123456789abcdef'));
    expect(connection.status).toBe(201);
    expect(Object.keys(connection.body).sort()).toEqual(['created_at', 'id', 'key_hint', 'model', 'project_id', 'provider', 'slug', 'updated_at']);
    expect(connection.body.key_hint).toBe('…cdef');

    const workflow = await curlExample('docs/configurations.md');
    expect(workflow.status).toBe(201);
    expect(workflow.body).toMatchObject({ workflow: { slug: 'support-bot', family: 'application' }, revision: { version: 1, message: 'first version' } });
    // Its "Running by reference" body, once an environment deploys it.
    const auth = { authorization: `ApiKey ${shellEnv.AGENTD_API_KEY}`, 'content-type': 'application/json' };
    await fetch(`${shellEnv.AGENTD_URL}/api/environments`, { method: 'POST', headers: auth, body: JSON.stringify({ slug: 'production' }) });
    expect((await fetch(`${shellEnv.AGENTD_URL}/api/environments/production/deploy`, { method: 'POST', headers: auth, body: JSON.stringify({ references: { application: { slug: 'support-bot' } } }) })).status).toBe(200);
    const byReference = /## Running by reference[\s\S]*?```json\n([\s\S]*?)```/.exec(read('docs/configurations.md'))![1]!;
    const ran = await fetch(`${shellEnv.AGENTD_URL}/services/agent/v0/invoke?project_id=${shellEnv.AGENTD_PROJECT_ID}`, { method: 'POST', headers: auth, body: byReference });
    expect(ran.status).toBe(200);
    expect(await ran.json()).toMatchObject({ revision: { id: workflow.body.revision.id, version: 1, workflow: 'support-bot', variant: 'default' } });

    const testset = await curlExample('docs/evaluations.md');
    expect(testset.status).toBe(200);
    expect(testset.body).toMatchObject({ count: 1, revision_id: testset.body.testset.revision_id, testset: { name: 'greetings', version: 1, data: { testcases: [{ data: { expected: 'hi' } }] } } });

    const folder = await mkdtemp(path.join(os.tmpdir(), 'agentd-readme-upload-'));
    try {
      await writeFile(path.join(folder, 'data.csv'), 'a,b\n1,2\n');
      expect(await curlExample('docs/sessions.md', folder)).toEqual({ status: 201, body: { path: 'in/data.csv', size: 8 } });
    } finally {
      await rm(folder, { recursive: true, force: true });
    }
  });
});
