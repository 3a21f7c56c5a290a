import { describe, expect, it } from 'vitest';
import { BUILTIN_TOOLS } from '../../src/contract/template.ts';
import { READ_TOOLS, builtinTools } from '../../src/agent/tools/index.ts';
import { run, tempFolder } from './helpers.ts';

describe('builtinTools', () => {
  it('provides every built-in tool with a description and an executor', async () => {
    const root = await tempFolder();
    const tools = builtinTools({ root, bash: { timeoutMs: 5000, maxOutputBytes: 1024, unsafeHost: false, limits: { processes: 256, memoryBytes: 1 << 30 } }, network: 'off' });
    expect(Object.keys(tools).sort()).toEqual([...BUILTIN_TOOLS].sort());
    for (const [name, tool] of Object.entries(tools)) {
      expect(typeof tool.description === 'string' && tool.description.length > 40, name).toBe(true);
      expect(typeof tool.execute, name).toBe('function');
    }
    await run(tools.write, { path: 'x/y.txt', content: 'abc' });
    expect(await run(tools.read, { path: 'x/y.txt' })).toBe('abc');
  });

  it('names the read-only tools', () => {
    expect([...READ_TOOLS].sort()).toEqual(['find', 'grep', 'ls', 'read']);
  });
});
