import { makeRoom } from '../bounded.ts';

/**
 * What turns learn about model servers: which of a base URL's ways in answers (model.ts), and
 * that an endpoint only streams or never streams (model-call.ts). Each thread that runs turns
 * has its own copy of these facts; one thread's discovery is told to the others (turn-pool.ts),
 * so a server is found out once per process, not once per thread, and no other thread spends a
 * model call (or, on a test double, a scripted answer) finding it out again.
 */
export type ModelFact = { kind: 'way-in'; base: string; index: number } | { kind: 'stream-only'; endpoint: string } | { kind: 'never-streams'; endpoint: string };

/** For each base URL of our own: which of its ways in answered (see openAIModel). */
export const wayIn = new Map<string, number>();
/** Endpoints that answered a non-streaming call with something unreadable: they only stream. */
export const streamOnly = new Set<string>();
/** Endpoints that answered a streaming call with one JSON body: they never stream. */
export const neverStreams = new Set<string>();

/** Endpoints are named by the request's model name as well: a process remembers this many of each kind. */
export const MAX_FACTS = 1000;

const listeners = new Set<(fact: ModelFact) => void>();

/** Records a fact told by another thread; false when it was known already. */
export function applyFact(fact: ModelFact): boolean {
  switch (fact.kind) {
    case 'way-in':
      if (wayIn.get(fact.base) === fact.index) return false;
      if (!wayIn.has(fact.base)) makeRoom(wayIn, MAX_FACTS);
      wayIn.set(fact.base, fact.index);
      return true;
    case 'stream-only':
      if (streamOnly.has(fact.endpoint)) return false;
      makeRoom(streamOnly, MAX_FACTS);
      streamOnly.add(fact.endpoint);
      return true;
    case 'never-streams':
      if (neverStreams.has(fact.endpoint)) return false;
      makeRoom(neverStreams, MAX_FACTS);
      neverStreams.add(fact.endpoint);
      return true;
  }
}

/** Records what a turn of this thread found out, and tells whoever listens when it is news. */
export function learn(fact: ModelFact): void {
  if (applyFact(fact)) for (const listener of listeners) listener(fact);
}

/** Hears every fact learnt on this thread from now on; returns the function that stops it. */
export function onLearned(listener: (fact: ModelFact) => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

/** Every fact this thread knows, for a thread that starts now. */
export function knownFacts(): ModelFact[] {
  return [
    ...[...wayIn].map(([base, index]): ModelFact => ({ kind: 'way-in', base, index })),
    ...[...streamOnly].map((endpoint): ModelFact => ({ kind: 'stream-only', endpoint })),
    ...[...neverStreams].map((endpoint): ModelFact => ({ kind: 'never-streams', endpoint })),
  ];
}
