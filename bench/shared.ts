/** What bench/run.ts and its child processes agree on. No side effects: children import it too. */

export const TOOL_ANSWER = 'The folder is empty.';
export const STREAM_TEXT = 'Hello from the fake model: this is the streamed answer, in three pieces.';

export type ModelControl =
  | { type: 'latency'; ms: number }
  | { type: 'capture'; on: boolean }
  | { type: 'captured' }
  | { type: 'reset' }
  | { type: 'peak' }
  | { type: 'stop' };

export interface CapturedRequest {
  path: string;
  body: unknown;
}

/** The agentd request bodies the floor replays, captured from one real turn of each kind. */
export interface FloorTemplates {
  /** The tool turn's two model calls, in order. */
  tool: [unknown, unknown];
  /** The streamed turn's single model call. */
  stream: unknown;
}

/** Every child prints one line like this on stdout when it listens, and sends it over IPC too. */
export interface Ready {
  url: string;
  apiKey?: string;
  projectId?: string;
}
