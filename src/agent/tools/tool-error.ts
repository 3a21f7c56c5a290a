/**
 * A failure the model caused and can fix (bad path, missing text, command timed out). The AI SDK
 * turns a thrown error into a tool-error result, so the message is written for the model to act on.
 */
export class ToolError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ToolError';
  }
}
