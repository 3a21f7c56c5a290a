import type { GenerateTextResult, TextStreamPart, ToolSet } from 'ai';

type Part = TextStreamPart<ToolSet>;

/**
 * A finished `generateText` run retold as the parts `streamText` would have streamed, so one
 * reader (turn.ts) turns either into the turn's events. Taken when nobody reads the turn as it is
 * written (a JSON reply, an evaluation case): the non-streaming call costs about a third of the
 * CPU of the streaming one (BENCHMARKS.md), and the turn's events are the same, only all at the end.
 *
 * Only the fields turn.ts reads are filled in; the casts say so.
 */
export function* generatedParts(result: GenerateTextResult<ToolSet, any, any>): Generator<Part> {
  // Calls the caller decided on (approved and run, or denied) before the first step: streamText
  // streams their outcomes first; generateText leaves them as the first response messages.
  const stepMessages = result.steps.reduce((count, step) => count + step.response.messages.length, 0);
  const initial = result.responseMessages.slice(0, result.responseMessages.length - stepMessages);
  for (const message of initial) {
    if (message.role !== 'tool') continue;
    for (const part of message.content) {
      if (part.type !== 'tool-result') continue;
      const output = part.output;
      const ids = { toolCallId: part.toolCallId, toolName: part.toolName };
      if (output.type === 'execution-denied') yield { type: 'tool-output-denied', ...ids } as Part;
      else if (output.type === 'error-text' || output.type === 'error-json') yield { type: 'tool-error', ...ids, error: output.value } as Part;
      else if ('value' in output) yield { type: 'tool-result', ...ids, output: output.value } as Part;
    }
  }

  for (const [index, step] of result.steps.entries()) {
    yield { type: 'start-step' } as Part;
    for (const [at, part] of step.content.entries()) {
      const id = `s${index}-${at}`;
      switch (part.type) {
        case 'text':
          yield { type: 'text-start', id } as Part;
          yield { type: 'text-delta', id, text: part.text } as Part;
          yield { type: 'text-end', id } as Part;
          break;
        case 'reasoning':
          yield { type: 'reasoning-start', id } as Part;
          yield { type: 'reasoning-delta', id, text: part.text } as Part;
          yield { type: 'reasoning-end', id } as Part;
          break;
        case 'tool-call':
        case 'tool-result':
        case 'tool-error':
        case 'tool-approval-request':
          yield part as Part;
          break;
        case 'tool-approval-response':
          yield part as Part;
          // A call the gate denied: streamText follows the response with the denial itself.
          if (!part.approved) yield { type: 'tool-output-denied', toolCallId: part.toolCall.toolCallId, toolName: part.toolCall.toolName } as Part;
          break;
        default:
          break;
      }
    }
    yield { type: 'finish-step', usage: step.usage } as Part;
  }
  yield { type: 'finish', finishReason: result.finishReason } as Part;
}
