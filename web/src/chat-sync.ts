import { getToolName, isToolUIPart, type UIMessage } from 'ai';
import { useEffect, useState } from 'react';
import type { AgentdClient } from '../../src/client/index.ts';
import type { Message } from '../../src/contract/messages.ts';
import { nativeToUi } from '../../src/stream/native-to-ui.ts';
import { useAuth } from './auth.tsx';
import { readInteractions, type InteractionState, type SessionInteractions } from './interactions.ts';

/**
 * The chat's conversation lives in the browser, but a turn goes on (or ends) without it: answered
 * from the session page or an API client, stopped, cut off by a reload. What the server kept of
 * the session is read whenever the chat settles, and the conversation held here brought up to date.
 */

type Turn = Awaited<ReturnType<AgentdClient['sessions']['get']>>['turns'][number];

export interface ServerState extends SessionInteractions {
  /** The session's latest turns, newest first (none for a session the server has not seen). */
  turns: Turn[];
}

/** Part states of a call whose result this browser has not seen. */
const OPEN = new Set(['input-streaming', 'input-available', 'approval-requested', 'approval-responded']);

/**
 * The id of the chat message a turn wrote into, as its Vercel stream names it: a continuation goes
 * on with the message it continues (answered in band, that message is in its request; through the
 * API, it is the paused turn's), any other turn builds one named for itself.
 */
function messageOf(turn: Turn, byId: ReadonlyMap<string, Turn>): string {
  const continues = turn.request?.continues;
  if (typeof continues === 'object' && continues !== null && 'id' in continues && typeof continues.id === 'string') return continues.id;
  if (typeof continues === 'string') {
    const paused = byId.get(continues);
    return paused ? messageOf(paused, byId) : `msg-${continues}`;
  }
  return `msg-${turn.id}`;
}

/**
 * A continuation this browser never saw, folded into the message it continues, as the server
 * builds that message: the answers given elsewhere go on their calls, then the turn's output. A
 * continuation opens with the results of the calls it was answered for; only when this browser
 * has not seen the first of those is the turn unseen (one followed live, even in part, is not).
 */
function fold(message: UIMessage, turn: Turn, interactions: ReadonlyMap<string, InteractionState>): UIMessage | undefined {
  const output = (turn.outputs?.messages ?? []) as Message[];
  const first = output[0];
  if (!first || first.role !== 'tool' || first.tool_name !== undefined) return undefined;
  const call = message.parts.find((p) => isToolUIPart(p) && p.toolCallId === first.tool_call_id);
  if (!call || !isToolUIPart(call) || !OPEN.has(call.state)) return undefined;
  const answers = message.parts.flatMap((p): Message[] => {
    if (!isToolUIPart(p) || p.state !== 'approval-requested') return [];
    const answer = interactions.get(p.approval.id)?.answer;
    if (typeof answer?.approved !== 'boolean') return [];
    const approval = { id: p.approval.id, approved: answer.approved, ...(typeof answer.reason === 'string' ? { reason: answer.reason } : {}) };
    return [{ role: 'tool', content: '', tool_call_id: p.toolCallId, tool_name: getToolName(p), input: p.input, approval }];
  });
  return nativeToUi([...answers, ...output], { continues: message })[0];
}

/** How a turn ended, on its message, as its stream's last word says it. */
const withEnding = (message: UIMessage, turn: Turn): UIMessage => ({ ...message, metadata: { ...(message.metadata ?? {}), stop_reason: turn.stop_reason ?? turn.status } });

/**
 * The conversation with what the server kept written in: continuations it never saw, how each
 * message's turn ended (a Stop, a failure) when that is not what it shows, and the answer to the
 * last message sent from here when none of it arrived (stopped before its first word, or left
 * before it streamed). Undefined: nothing to change. A turn still running is left to the stream.
 */
export function reconcile(messages: readonly UIMessage[], state: ServerState): UIMessage[] | undefined {
  const byId = new Map(state.turns.map((turn) => [turn.id, turn]));
  const oldestFirst = [...state.turns].reverse();
  const newest = state.turns[0];
  if (messages.at(-1)?.role === 'user' && newest && newest.status !== 'running' && newest.request?.continues === undefined && !messages.some((m) => m.id === `msg-${newest.id}`)) {
    const id = `msg-${newest.id}`;
    const built = nativeToUi((newest.outputs?.messages ?? []) as Message[], { messageId: id })[0];
    return [...messages, withEnding({ id, role: 'assistant', parts: built?.parts ?? [] }, newest)];
  }
  let changed = false;
  const next = messages.map((held) => {
    const turns = held.role === 'assistant' ? oldestFirst.filter((turn) => messageOf(turn, byId) === held.id) : [];
    if (!turns.length || turns.some((turn) => turn.status === 'running')) return held;
    let message = held;
    for (const turn of turns) message = fold(message, turn, state.byId) ?? message;
    const last = turns.at(-1)!;
    if ((message.metadata as { stop_reason?: string } | undefined)?.stop_reason !== (last.stop_reason ?? last.status)) message = withEnding(message, last);
    if (message !== held) changed = true;
    return message;
  });
  return changed ? next : undefined;
}

/**
 * What the server kept of the session, read when `settled` becomes true (the chat opened, or a
 * turn it followed ended) and on `refresh`, then every second while the server still runs a turn
 * the chat does not follow (a stopped one, until its record says so).
 */
export function useServerState(sessionId: string, settled: boolean) {
  const { client } = useAuth();
  const [state, setState] = useState<ServerState>();
  const [error, setError] = useState<unknown>();
  const [reads, setReads] = useState(0);
  useEffect(() => {
    if (!settled) return;
    let current = true;
    void (async () => {
      while (current) {
        try {
          // A session the server has not seen yet (a new chat) has no turns.
          const [session, interactions] = await Promise.all([client.sessions.get(sessionId, { limit: 20 }).catch(() => undefined), readInteractions(client, sessionId)]);
          if (!current) return;
          setState({ turns: session?.turns ?? [], ...interactions });
          setError(undefined);
          // A stopped turn lets go of the session a moment before its record says how it ended.
          if (!session?.live_turn && session?.turns[0]?.status !== 'running') return;
        } catch (failure) {
          if (current) setError(failure);
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, 1000));
      }
    })();
    return () => {
      current = false;
    };
  }, [client, sessionId, settled, reads]);
  return { state, error, refresh: () => setReads((n) => n + 1) };
}
