import type { Message } from './messages.ts';

/**
 * Where a native message came from when a conversion made it out of something else the caller
 * sent (a Vercel tool part, a content block of the reference's format). An error found in it
 * later then names the place in the request the caller wrote, not an index in the converted list.
 */
const sources = new WeakMap<Message, string>();

export function sourced<M extends Message>(message: M, path: string): M {
  sources.set(message, path);
  return message;
}

/**
 * The request path of `messages[index]`: its source when it was converted, else its own place,
 * followed by `detail` (the field at fault, which a converted message's source does not have).
 */
export function messagePath(messages: readonly Message[], index: number, detail = ''): string {
  return sources.get(messages[index]!) ?? `data.inputs.messages[${index}]${detail}`;
}
