import { parentPort } from 'node:worker_threads';

/** A turn-pool thread that starts every turn and then dies, as a thread that runs out of memory would. */
parentPort!.on('message', (message: { type: string; id: number; input: { turnId: string; sessionId: string; traceId: string } }) => {
  if (message.type !== 'run') return;
  const { turnId, sessionId, traceId } = message.input;
  parentPort!.postMessage([{ type: 'event', id: message.id, event: { type: 'turn_start', data: { turn_id: turnId, session_id: sessionId, trace_id: traceId } } }]);
  setImmediate(() => process.exit(3));
});
