import { parentPort, workerData } from 'node:worker_threads';
import { newId } from '../ids.ts';
import { applyFact, onLearned } from './model-facts.ts';
import { resolveModel } from './model.ts';
import { pricingFrom } from './pricing.ts';
import { runTurn } from './turn.ts';
import { batchedPerPass, fromColumns, toWire, type FromPool, type ToPool, type WorkerData } from './turn-wire.ts';

/**
 * A thread of the turn pool (turn-pool.ts): runs turns as the server's own thread would — the
 * model's HTTP client, the AI SDK's parsing and the tools all cost CPU here instead — and posts
 * each turn's events back as they come.
 */
const { settings, facts } = workerData as WorkerData;
const pricing = pricingFrom(settings.prices);
const port = parentPort!;
for (const fact of facts) applyFact(fact);
const running = new Map<number, AbortController>();
const post = batchedPerPass<ToPool>((batch) => port.postMessage(batch));

// What a turn here finds out about a model server goes to the server's thread with the pass's
// other messages, and it tells the other threads; what they found out arrives as `fact` messages.
onLearned((fact) => post({ type: 'fact', fact }));

port.on('message', (batch: FromPool[]) => {
  for (const message of batch) {
    if (message.type === 'abort') running.get(message.id)?.abort(new Error(message.reason));
    else if (message.type === 'fact') applyFact(message.fact);
    else void run(message);
  }
});

async function run({ id, input }: Extract<FromPool, { type: 'run' }>): Promise<void> {
  const controller = new AbortController();
  running.set(id, controller);
  try {
    const { secrets, connection, history, ...turn } = input;
    const model = resolveModel(turn.template.llm, settings, secrets, connection);
    for await (const event of runTurn({ ...turn, history: fromColumns(history), model, config: settings, pricing, signal: controller.signal, newInteractionId: newId })) {
      post({ type: 'event', id, event });
    }
    post({ type: 'end', id });
  } catch (error) {
    post({ type: 'error', id, error: toWire(error) });
  } finally {
    running.delete(id);
  }
}
