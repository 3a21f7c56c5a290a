import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { lastAssistantMessageIsCompleteWithApprovalResponses } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentdChat } from '../support/headless-chat.ts';
import { agentdCommand, firstStartCredentials, runAgentd, startServe } from '../support/child-server.ts';

/**
 * A first run as a new user makes it: no provider key anywhere, `npm start`, and everything works
 * against the built-in demo model the server runs itself.
 */

/** Every variable that would configure a real provider, unset: the machine's own must not leak in. */
const NO_PROVIDER = Object.fromEntries(
  ['OPENAI_API_KEY', 'ANTHROPIC_API_KEY', 'OPENAI_BASE_URL', 'ANTHROPIC_BASE_URL', 'OLLAMA_BASE_URL', 'AGENTD_DEFAULT_PROVIDER', 'AGENTD_DEFAULT_MODEL', 'AGENTD_DEMO_MODEL_URL'].map((name) => [name, undefined]),
);

let dataDir: string;
let server: Awaited<ReturnType<typeof startServe>>;
let env: Record<string, string | undefined>;
let cli: Record<string, string>;

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentd-first-'));
  env = { ...NO_PROVIDER, AGENTD_DATA_DIR: dataDir };
  server = await startServe(env);
  const { projectId, key } = firstStartCredentials(server.output());
  // The banner's own export line is what the user pastes.
  const exported = /export (AGENTD_URL=\S+ AGENTD_PROJECT_ID=\S+ AGENTD_API_KEY=\S+)/.exec(server.output())![1]!;
  cli = Object.fromEntries(exported.split(' ').map((pair) => pair.split('=') as [string, string]));
  expect(cli).toEqual({ AGENTD_URL: server.url, AGENTD_PROJECT_ID: projectId, AGENTD_API_KEY: key });
}, 30_000);
afterAll(async () => {
  server?.child.kill('SIGTERM');
  await server?.exited;
  await rm(dataDir, { recursive: true, force: true });
});

describe('a first run with no provider key', () => {
  it('says in one line that the demo model answers, and how to switch to a real one', () => {
    const lines = server.output().split('\n').filter((line) => line.includes('demo model'));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/built-in demo model.*OPENAI_API_KEY/);
  });

  it('answers a turn with no template', async () => {
    const res = await fetch(`${server.url}/services/agent/v0/invoke?project_id=${cli.AGENTD_PROJECT_ID}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `ApiKey ${cli.AGENTD_API_KEY}` },
      body: JSON.stringify({ data: { inputs: { messages: [{ role: 'user', content: 'hello demo' }] } } }),
    });
    expect(res.status).toBe(200);
    expect((await res.json()).data.outputs.messages.at(-1).content).toContain('hello demo');
  });

  it('runs a useChat conversation with no template, an approval included', async () => {
    const chat = agentdChat({
      api: `${server.url}/services/agent/v0/invoke?project_id=${cli.AGENTD_PROJECT_ID}`,
      apiKey: cli.AGENTD_API_KEY!,
      sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
    });
    await chat.sendMessage({ text: '/tool write {"path":"first.txt","content":"hi"}' });
    await chat.untilFinished(1);
    const part = chat.messages.at(-1)!.parts.find((p) => p.type === 'tool-write') as { state: string; approval?: { id: string } };
    expect(part.state).toBe('approval-requested');
    await chat.addToolApprovalResponse({ id: part.approval!.id, approved: true });
    await chat.untilFinished(2);
    expect(JSON.stringify(chat.messages.at(-1))).toContain('wrote 2 bytes to first.txt');
  });

  it('runs `agentd invoke --message hi` with the variables the banner printed', async () => {
    const run = await agentdCommand(['invoke', '--message', 'hi from the cli'], cli);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('hi from the cli');
  });

  it('runs `agentd eval run` on the built-in agent', async () => {
    const created = await fetch(`${server.url}/api/simple/testsets/?project_id=${cli.AGENTD_PROJECT_ID}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `ApiKey ${cli.AGENTD_API_KEY}` },
      body: JSON.stringify({ testset: { name: 'first', data: { testcases: [{ data: { messages: [{ role: 'user', content: 'one' }] } }, { data: { messages: [{ role: 'user', content: 'two' }] } }] } } }),
    });
    const { revision_id } = await created.json();
    const run = await agentdCommand(['eval', 'run', '--testset', revision_id], cli);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/success — 2 succeeded, 0 failed/);
  });
});

describe('a port or address it cannot listen on', () => {
  let blocker: ReturnType<typeof createServer>;
  let port: number;
  beforeAll(async () => {
    blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    port = (blocker.address() as { port: number }).port;
  });
  afterAll(() => new Promise<void>((resolve) => blocker.close(() => resolve())));

  it('is one line naming the port and how to choose another, for the server', async () => {
    const run = runAgentd(['serve', '--port', String(port)], { ...env, AGENTD_DATA_DIR: path.join(dataDir, 'second') });
    expect(await run.exited).toBe(1);
    expect(run.output().trim()).toBe(`agentd: port ${port} on 127.0.0.1 is in use (another agentd?); start on another with --port N or PORT=N`);
  });

  it('an address that is not this machine\'s, or a name that does not resolve, is one line too, not a stack trace', async () => {
    for (const [host, why] of [['192.0.2.1', 'no interface of this machine has that address'], ['nohost.invalid', 'the name does not resolve']]) {
      const run = runAgentd(['serve', '--port', '0'], { ...env, HOST: host, AGENTD_DATA_DIR: path.join(dataDir, 'third') });
      expect(await run.exited).toBe(1);
      expect(run.output().trim()).toBe(`agentd: cannot listen on "${host}": ${why}; give an address of this machine with --host ADDR or HOST (127.0.0.1, or 0.0.0.0 for all interfaces)`);
    }
  });

  it('a --port that is no port number says which numbers are, for both', async () => {
    for (const command of ['serve', 'demo-model']) {
      const run = runAgentd([command, '--port', '70000'], env);
      expect(await run.exited).toBe(2);
      expect(run.output().trim()).toBe(`agentd ${command}: --port must be a port number from 0 to 65535 (0: any free port), got "70000"`);
    }
  });

  it('and for the demo model', async () => {
    const run = runAgentd(['demo-model', '--port', String(port)], env);
    expect(await run.exited).toBe(1);
    expect(run.output().trim()).toBe(`agentd demo-model: port ${port} is in use (Ollama, or another demo model?); start on another with --port N and point OLLAMA_BASE_URL at it`);
  });
});
