import type { AgentEvent } from '../contract/events.ts';

/**
 * Native stream framing (design.md §4 "Native frames"): the event itself, nothing added. The
 * final `done` event is the terminator, so there is no `[DONE]` line.
 */
export function sseFrame(event: AgentEvent): string {
  return `data: ${JSON.stringify(event)}\n\n`;
}

export function ndjsonLine(event: AgentEvent): string {
  return `${JSON.stringify(event)}\n`;
}
