import type { AgentdClient } from '../../src/client/index.ts';

/**
 * A session's interactions as the interactions API tells them now. A stored turn keeps its calls'
 * approvals as they stood when it paused; these say which were answered since, here or elsewhere.
 */

type Interaction = Awaited<ReturnType<AgentdClient['interactions']['query']>>['interactions'][number];
export type InteractionState = Pick<Interaction, 'status' | 'answer'>;

export interface SessionInteractions {
  /** Every one still waiting for an answer. */
  pending: Interaction[];
  /** The pending ones and the newest answered ones, by id (the id a stored call's approval names). */
  byId: ReadonlyMap<string, InteractionState>;
}

export async function readInteractions(client: AgentdClient, sessionId: string): Promise<SessionInteractions> {
  const [pending, answered] = await Promise.all([
    client.interactions.query({ session_id: sessionId, status: 'pending' }),
    client.interactions.query({ session_id: sessionId, status: ['responded', 'resolved', 'cancelled'], order: 'descending', limit: 200 }),
  ]);
  return { pending: pending.interactions, byId: new Map([...answered.interactions, ...pending.interactions].map((i) => [i.id, i])) };
}
