import path from 'node:path';
import { expect, it } from 'vitest';
import { expectError, invokeBody, type Harness } from '../support/harness.ts';
import { harnessSuite } from './suite.ts';

/**
 * Issue 20: Codex as the agent of a turn, over ACP, against the fake model's Responses API. Codex
 * runs everything through its `exec_command` tool; the model asks for a command line.
 */

const KEY = 'sk-openai-codex-key-3b9a';
const quote = (text: string) => `'${text.replaceAll("'", `'\\''`)}'`;

harnessSuite(
  {
    kind: 'codex',
    llm: { provider: 'openai', model: 'fake-model' },
    env: (url) => ({ OPENAI_BASE_URL: url, OPENAI_API_KEY: KEY }),
    key: KEY,
    write: (folder, file, content) => ({ name: 'exec_command', input: { cmd: `printf %s ${quote(content)} > ${quote(path.join(folder, file))}` } }),
    writeTool: 'exec_command',
    writeEntry: 'bash',
    writeInput: (content) => ({ command: expect.arrayContaining([expect.stringContaining(content)]) }),
    read: (file) => ({ name: 'exec_command', input: { cmd: `cat ${quote(file)}` } }),
    run: (cmd) => ({ name: 'exec_command', input: { cmd } }),
    readTool: 'exec_command',
    mcpCall: (server, tool, input) => ({ name: tool, namespace: `mcp__${server}`, input }),
    instructionsFile: 'AGENTS.md',
    settingsFile: 'config.toml',
    skillsDir: '.agents/skills',
    foreignProvider: 'anthropic',
  },
  (harness: () => Harness) => {
    it('a tool entry Codex has no tool for is a 400 that says where the permission goes', async () => {
      const agent = { llm: { provider: 'openai', model: 'fake-model' }, harness: { kind: 'codex' }, tools: [{ type: 'builtin', name: 'read', permission: 'ask' }] };
      await expectError(await harness().invoke(invokeBody([{ role: 'user', content: 'hi' }], agent)), 400, 'invalid-request', /tools\[0\]\.permission.*bash/);
    });

    it('MCP servers only where nothing is gated: Codex runs their tools without asking', async () => {
      const mcps = [{ name: 'calc', connection: { type: 'http', url: 'http://127.0.0.1:9/mcp' } }];
      const agent = { llm: { provider: 'openai', model: 'fake-model' }, harness: { kind: 'codex' }, runner: { permissions: { default: 'ask' } }, mcps };
      await expectError(await harness().invoke(invokeBody([{ role: 'user', content: 'hi' }], agent)), 400, 'invalid-request', /mcps.*allow/);
    });
  },
);
