import type { DynamicToolUIPart, ToolUIPart, UIMessage } from 'ai';

/*
 * The AI SDK's `isToolUIPart` and `getToolName`, kept here so that serving a turn never loads the
 * `ai` package (3.4 MB of heap on every server and turn thread that nothing else on the path uses).
 */

export type ToolPart = ToolUIPart | DynamicToolUIPart;

export function isToolType(type: string): boolean {
  return type === 'dynamic-tool' || type.startsWith('tool-');
}

export function isToolPart(part: UIMessage['parts'][number]): part is ToolPart {
  return isToolType(part.type);
}

export function toolNameOf(part: ToolPart): string {
  return part.type === 'dynamic-tool' ? part.toolName : part.type.slice('tool-'.length);
}
