import { performance } from 'node:perf_hooks';

/** How often the server thread's load is read. */
const WINDOW_MS = 100;
/** Turns come back to the server's thread once its load falls under this share of `above`. */
const RETURN_FACTOR = 0.55;

/** The server thread's event-loop utilization (0–1) since the previous call. */
export function utilizationSampler(): () => number {
  let last = performance.eventLoopUtilization();
  return () => {
    const now = performance.eventLoopUtilization();
    const { utilization } = performance.eventLoopUtilization(now, last);
    last = now;
    return utilization;
  };
}

/**
 * Whether the server's thread is busy enough that a turn is better off on a turn thread. There a
 * turn costs a hop each way: about 0.3 ms of CPU, and the wake-up of another thread that must find
 * a free core. That pays when the server's thread is the bottleneck (turns that keep it working,
 * many at once), and is a loss when it is not (turns that mostly wait for their model), so on a
 * machine of few cores neither "always" nor "never" is right (BENCHMARKS.md, "Turns where the
 * server's thread has room"). Read every 100 ms, with hysteresis: turns go to threads once the
 * load passes `above`, and come back only when it falls well under it, since sending turns away
 * is what lowers it.
 */
export class ServerLoad {
  readonly #above: number;
  readonly #sample: () => number;
  readonly #timer: NodeJS.Timeout | undefined;
  #busy: boolean;
  #rising: (() => void) | undefined;

  /**
   * `above` 0 sends every turn to a thread; `sample` is the load reader, the event loop's unless a
   * test gives one. `rising` is called once, the first time the load passes the line turns come
   * back under: the turn threads start then, ready before they are needed, and a server that
   * never gets busy never pays for them (BENCHMARKS.md, idle memory).
   */
  constructor(above: number, options: { sample?: () => number; start?: boolean; rising?: () => void } = {}) {
    this.#above = above;
    this.#sample = options.sample ?? utilizationSampler();
    this.#busy = above === 0;
    this.#rising = options.rising;
    if (this.#busy) this.#risen();
    this.#timer = above > 0 && options.start !== false ? setInterval(() => this.update(), WINDOW_MS).unref() : undefined;
  }

  get busy(): boolean {
    return this.#busy;
  }

  /** Reads the load of the window that just ended. */
  update(): void {
    if (this.#above === 0) return;
    const load = this.#sample();
    if (load > this.#above * RETURN_FACTOR) this.#risen();
    this.#busy = this.#busy ? load > this.#above * RETURN_FACTOR : load > this.#above;
  }

  #risen(): void {
    const rising = this.#rising;
    this.#rising = undefined;
    rising?.();
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}
