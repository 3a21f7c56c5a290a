import { parentPort } from 'node:worker_threads';

/**
 * A turn thread whose turn with secrets dies of an uncaught error that quotes its key, as a bug in
 * a provider or a tool could: what the pool tells that thread's other turns is under test.
 */
type Run = { type: string; id: number; input: { turnId: string; sessionId: string; traceId: string; secrets?: Record<string, string> } };
parentPort!.on('message', (batch: Run[]) => {
  for (const message of batch) {
    if (message.type !== 'run') continue;
    const { turnId, sessionId, traceId, secrets } = message.input;
    parentPort!.postMessage([{ type: 'event', id: message.id, event: { type: 'turn_start', data: { turn_id: turnId, session_id: sessionId, trace_id: traceId } } }]);
    const key = secrets?.OPENAI_API_KEY;
    if (key) {
      setTimeout(() => {
        throw new Error(`provider socket closed for key ${key}`);
      }, 50);
    }
  }
});
