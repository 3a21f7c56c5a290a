import type { Tool } from 'ai';
import type { BuiltinToolName } from '../../contract/template.ts';
import { type BashContext, bashTool } from './bash.ts';
import { editTool } from './edit.ts';
import { findTool } from './find.ts';
import { grepTool } from './grep.ts';
import { lsTool } from './ls.ts';
import { readTool } from './read.ts';
import { writeTool } from './write.ts';

export { ToolError } from './tool-error.ts';
export { sandboxAvailable } from './sandbox.ts';

export type BuiltinToolContext = BashContext;

/** The built-in tools, every one confined to the session folder `ctx.root`. */
export function builtinTools(ctx: BuiltinToolContext): Record<BuiltinToolName, Tool> {
  return {
    read: readTool(ctx.root),
    write: writeTool(ctx.root),
    edit: editTool(ctx.root),
    ls: lsTool(ctx.root),
    find: findTool(ctx.root),
    grep: grepTool(ctx.root),
    bash: bashTool(ctx),
  };
}

/** Tools that only read, for the `allow_reads` permission mode (design.md §4). */
export const READ_TOOLS: ReadonlySet<string> = new Set(['read', 'grep', 'find', 'ls']);
