/**
 * Where model steps begin and end, recovered from a native event stream that does not mark them.
 *
 * The rule: a step opens at the first model output (text, thought or tool call) when none is open,
 * and closes when model output arrives after the step has a tool result and every call it made is
 * settled — only then can the loop have gone back to the model. Tool results that arrive with no
 * step open (a continuation resolving calls of the message it continues) stay outside any step,
 * as the AI SDK's own server emits them.
 *
 * If a tool finishes before the model has finished streaming the same step, that step may be
 * split in two; the other error, merging two steps, cannot happen.
 */
export type StepBoundary = 'start-step' | 'finish-step';

export class StepTracker {
  #open = false;
  #unsettled = new Set<string>();
  #results = 0;

  get open(): boolean {
    return this.#open;
  }

  /** Call before each piece of model output; returns the boundaries that must precede it. */
  beforeOutput(): StepBoundary[] {
    if (!this.#open) {
      this.#begin();
      return ['start-step'];
    }
    if (this.#results > 0 && this.#unsettled.size === 0) {
      this.#begin();
      return ['finish-step', 'start-step'];
    }
    return [];
  }

  call(toolCallId: string): void {
    this.#unsettled.add(toolCallId);
  }

  result(toolCallId: string): void {
    if (this.#unsettled.delete(toolCallId)) this.#results++;
  }

  /** Ends the stream; returns the boundary that closes a step still open. */
  end(): StepBoundary[] {
    if (!this.#open) return [];
    this.#open = false;
    return ['finish-step'];
  }

  #begin(): void {
    this.#open = true;
    this.#unsettled.clear();
    this.#results = 0;
  }
}
