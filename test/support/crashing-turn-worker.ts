import { parentPort } from 'node:worker_threads';

type Message = { type: string; id: number; input: { turnId: string; sessionId: string; traceId: string } };

/** A turn-pool thread that starts every turn and then dies, as a thread that runs out of memory would. */
parentPort!.on('message', (batch: Message[]) => {
  for (const message of batch) {
    if (message.type !== 'run') continue;
    const { turnId, sessionId, traceId } = message.input;
    parentPort!.postMessage([{ type: 'event', id: message.id, event: { type: 'turn_start', data: { turn_id: turnId, session_id: sessionId, trace_id: traceId } } }]);
    setImmediate(() => process.exit(3));
  }
});
