/**
 * The bounds of an evaluation run's settings, in a module of their own so that `agentd eval run`
 * checks its flags against them (exit 2 naming the flag) without loading the schemas' zod.
 */
export const RUN_LIMITS = {
  repeats: 100,
  batchSize: 1000,
  maxRetries: 20,
  /** Whole seconds between attempts of a case (spec §8). */
  retryDelayS: 3600,
} as const;
