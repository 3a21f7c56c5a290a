import { mkdirSync } from 'node:fs';
import type { Tool } from 'ai';
import type { BuiltinToolName } from '../../contract/template.ts';
import { type BashContext, bashTool } from './bash.ts';
import { editTool } from './edit.ts';
import { findTool } from './find.ts';
import { grepTool } from './grep.ts';
import { lsTool } from './ls.ts';
import { readTool } from './read.ts';
import { writeTool } from './write.ts';

export type BuiltinToolContext = BashContext;

/** The built-in tools, every one confined to the session folder `ctx.root`. */
export function builtinTools(ctx: BuiltinToolContext): Record<BuiltinToolName, Tool> {
  return inFolder(ctx.root, {
    read: readTool(ctx.root),
    write: writeTool(ctx.root),
    edit: editTool(ctx.root),
    ls: lsTool(ctx.root),
    find: findTool(ctx.root),
    grep: grepTool(ctx.root),
    bash: bashTool(ctx),
  });
}

/**
 * The session folder is made when the turn's first tool runs, not for every turn: most turns run
 * none, and under load a `mkdir` per turn was the longest wait of an evaluation case
 * (BENCHMARKS.md). It is made synchronously, like the path checks (confine.ts): through the
 * thread pool it cost 56 µs of CPU, where it exists already nearly every time.
 */
function inFolder(root: string, tools: Record<BuiltinToolName, Tool>): Record<BuiltinToolName, Tool> {
  let made = false;
  const wrapped = {} as Record<BuiltinToolName, Tool>;
  for (const [name, tool] of Object.entries(tools) as [BuiltinToolName, Tool][]) {
    const execute = tool.execute!;
    wrapped[name] = {
      ...tool,
      execute: async (input: unknown, options: never) => {
        if (!made) {
          mkdirSync(root, { recursive: true });
          made = true;
        }
        return execute(input, options);
      },
    } as Tool;
  }
  return wrapped;
}

/** Tools that only read, for the `allow_reads` permission mode (design.md §4). */
export const READ_TOOLS: ReadonlySet<string> = new Set(['read', 'grep', 'find', 'ls']);
