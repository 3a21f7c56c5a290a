/**
 * mulberry32: numbers in [0, 1) that repeat for a seed. Small and good enough for what the tests
 * and benchmarks draw (mutations of a request, a model's latencies), where a failure or a figure
 * must come out the same on the next run.
 */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
