import path from 'node:path';
import { expect, it } from 'vitest';
import { invokeBody, readJson, type Harness } from '../support/harness.ts';
import { harnessSuite } from './suite.ts';

/**
 * Issue 20: Pi as the agent of a turn, over ACP (pi-acp), against the fake model. Pi has no
 * permission system: agentd's gate extension asks through pi-acp's permission requests.
 */

const KEY = 'sk-openai-pi-key-8d2e';

harnessSuite(
  {
    kind: 'pi',
    llm: { provider: 'openai', model: 'fake-model' },
    env: (url) => ({ OPENAI_BASE_URL: url, OPENAI_API_KEY: KEY }),
    key: KEY,
    write: (folder, file, content) => ({ name: 'write', input: { path: path.join(folder, file), content } }),
    writeTool: 'write',
    writeEntry: 'write',
    writeInput: (content) => ({ content }),
    read: (file) => ({ name: 'read', input: { path: file } }),
    readTool: 'read',
    run: (command) => ({ name: 'bash', input: { command } }),
    instructionsFile: 'AGENTS.md',
    settingsFile: '.pi/agent/models.json',
    skillsDir: '.agents/skills',
  },
  (harness: () => Harness) => {
    it('runs a template written for the reference as sent: pi_core is pi', async () => {
      const h = harness();
      h.model.script({ text: 'hello from pi' });
      const agent = { llm: { provider: 'openai', model: 'fake-model' }, harness: { kind: 'pi_core' }, tools: [] };
      const body = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'hi' }], agent)));
      expect(body.data.outputs.messages.at(-1)).toMatchObject({ role: 'assistant', content: 'hello from pi' });
    }, 60_000);
  },
);
