import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../../src/client/index.ts';
import { agentdCommand } from '../support/child-server.ts';
import { startHarness, template, type Harness } from '../support/harness.ts';

/** `agentd workflows list|create|commit|deploy`: an evaluation's agent set up without curl. */

let h: Harness;
let dir: string;
let env: Record<string, string>;
beforeAll(async () => {
  h = await startHarness();
  dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-wf-cli-'));
  env = { AGENTD_URL: h.url, AGENTD_API_KEY: h.apiKey, AGENTD_PROJECT_ID: h.projectId };
});
afterAll(async () => {
  await h.close();
  await rm(dir, { recursive: true, force: true });
});

const agentd = (...args: string[]) => agentdCommand(args, env);
const templateFile = async (name: string, value: unknown) => {
  const file = path.join(dir, name);
  await writeFile(file, JSON.stringify(value));
  return file;
};

describe('agentd workflows', () => {
  it('creates, commits, deploys and lists', async () => {
    const first = await templateFile('v1.json', { ...template(), instructions: { agents_md: 'One.' } });
    const created = await agentd('workflows', 'create', 'support-bot', '--family', 'application', '--name', 'Support bot', '--template', first, '--message', 'first');
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout).toMatch(/^created workflow support-bot \(\S+\), revision \S+ \(v1\)$/m);

    const second = await templateFile('v2.json', { agent: { ...template(), instructions: { agents_md: 'Two.' } } });
    const committed = await agentd('workflows', 'commit', 'support-bot', '--template', second);
    expect(committed.stdout).toMatch(/^committed support-bot \/ default v2: revision \S+$/m);
    const branch = await agentd('workflows', 'commit', 'support-bot', '--template', second, '--variant', 'canary');
    expect(branch.stdout).toMatch(/^committed support-bot \/ canary v1/m);

    const deployed = await agentd('workflows', 'deploy', 'support-bot', '--env', 'production', '--version', '1');
    expect(deployed.code, deployed.stderr).toBe(0);
    expect(deployed.stderr).toBe('created environment production\n');
    expect(deployed.stdout).toMatch(/^deployed support-bot \/ default v1 to production \(its revision 1\)$/m);
    const again = await agentd('workflows', 'deploy', 'support-bot', '--env', 'production');
    expect(again.stdout).toMatch(/default v2 to production \(its revision 2\)/);

    const listed = await agentd('workflows', 'list');
    expect(listed.stdout).toMatch(/^support-bot\s+Support bot\s+application\s+default v2, canary v1$/m);
    expect(listed.stdout).toMatch(/^production\s+support-bot\s+support-bot \/ default v2$/m);

    const client = createClient({ baseUrl: h.url, apiKey: h.apiKey, projectId: h.projectId });
    const revisions = await client.workflows.revisions('support-bot', { variant: 'default' });
    expect((revisions.revisions[0]!.data.parameters as { agent: { instructions: { agents_md: string } } }).agent.instructions.agents_md).toBe('Two.');
  });

  it('says what is missing or wrong, with exit status 2, and passes on the server\'s refusals', async () => {
    expect((await agentd('workflows', 'commit', 'support-bot')).stderr).toContain('--template FILE');
    expect((await agentd('workflows', 'deploy', 'support-bot')).stderr).toContain('--env NAME');
    expect((await agentd('workflows', 'create')).code).toBe(2);
    expect((await agentd('workflows', 'create', 'x', '--family', 'robot')).stderr).toContain('--family must be workflow, application or evaluator');
    const bad = await templateFile('bad.json', { runner: { permissions: { default: 'sometimes' } } });
    const refused = await agentd('workflows', 'create', 'bad-bot', '--template', bad);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^agentd workflows: 400 invalid-permission-mode: /);
  });
});
