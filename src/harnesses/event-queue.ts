/**
 * Values pushed by callbacks (a child process's messages), read in order by one `for await`.
 * Ends once closed and drained.
 */
export class EventQueue<T> implements AsyncIterable<T> {
  readonly #items: T[] = [];
  #closed = false;
  #wake: (() => void) | undefined;

  push(item: T): void {
    if (this.#closed) return;
    this.#items.push(item);
    this.#wake?.();
  }

  close(): void {
    this.#closed = true;
    this.#wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T> {
    for (;;) {
      while (this.#items.length) yield this.#items.shift()!;
      if (this.#closed) return;
      await new Promise<void>((resolve) => (this.#wake = resolve));
      this.#wake = undefined;
    }
  }
}
