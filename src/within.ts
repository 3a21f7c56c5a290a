/**
 * What `promise` settles to, or undefined once `ms` have passed without it: for a wait that must
 * not hang on a database that never answers (a probe, a scrape). The promise itself goes on.
 */
export function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), ms)));
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}
