import type { Usage } from '../contract/events.ts';

/**
 * A turn reports usage once per model call; every projection reports the turn's total, so the
 * parts are summed. `cost` stays absent unless some part priced its call.
 */
export function addUsage(sum: Usage | undefined, part: Usage): Usage {
  if (sum === undefined) return { ...part };
  const total: Usage = {
    input: sum.input + part.input,
    output: sum.output + part.output,
    total: sum.total + part.total,
  };
  if (sum.cost !== undefined || part.cost !== undefined) total.cost = (sum.cost ?? 0) + (part.cost ?? 0);
  return total;
}
