import type { Tool } from 'ai';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach } from 'vitest';

/** Calls a tool's execute the way the AI SDK does. */
export async function run(tool: Tool, input: unknown, abortSignal?: AbortSignal): Promise<string> {
  if (!tool.execute) throw new Error('tool has no execute');
  const result: unknown = await tool.execute(input, { toolCallId: 'x', messages: [], abortSignal, context: {} });
  if (typeof result !== 'string') throw new Error(`expected a string result, got ${typeof result}`);
  return result;
}

const created: string[] = [];

/** A fresh real-path temp folder, removed after the test. */
export async function tempFolder(prefix = 'agentd-tools-'): Promise<string> {
  const dir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), prefix)));
  created.push(dir);
  return dir;
}

afterEach(async () => {
  await Promise.all(created.splice(0).map((dir) => fs.rm(dir, { recursive: true, force: true })));
});

/** Processes on the host with `marker` as one of their arguments. */
export async function processesWith(marker: string): Promise<string[]> {
  const found: string[] = [];
  for (const pid of await fs.readdir('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    const cmdline = await fs.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    if (cmdline.split('\0').includes(marker)) found.push(pid);
  }
  return found;
}
