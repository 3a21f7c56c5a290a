/**
 * Makes room for one more entry in a Map or Set that holds at most `most`: the oldest inserted go
 * first. For caches and memories keyed by what requests bring (model names, messages), which would
 * otherwise grow with every new one for the life of the process.
 */
export function makeRoom(collection: Map<unknown, unknown> | Set<unknown>, most: number): void {
  for (const key of collection.keys()) {
    if (collection.size < most) return;
    collection.delete(key);
  }
}
