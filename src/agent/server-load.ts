import { performance } from 'node:perf_hooks';

/** How often the server thread's load is read. */
const WINDOW_MS = 100;
/** The turn threads start once the load first passes this share of `above`, ready before a turn needs them. */
const WARM_FACTOR = 0.55;
/**
 * The share of turns sent away shrinks while the load is under this share of `above`: a band
 * wider than what one step of the share moves the load, so the share settles instead of swinging.
 */
const SHRINK_FACTOR = 0.8;

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

/** The share of turns sent to threads is counted in tenths (0–10), and moves a tenth at each reading. */
const WHOLE = 10;

/**
 * Which turns go to a turn thread, from how busy the server's thread is. There a turn costs a hop
 * each way: messages both ways and the wake-up of another thread that must find a free core. That
 * pays when the server's thread is the bottleneck (turns that keep it working, many at once), and
 * is a loss when it is not (turns that mostly wait for their model), so on a machine of few cores
 * neither "always" nor "never" is right (BENCHMARKS.md, "Turns where the server's thread has
 * room"). And once the server's thread is full, only what it cannot take needs to go: sending
 * every turn away left it running about 60% of the time under full load (its CPU profile) while
 * each turn paid the hop (BENCHMARKS.md, "Both ways batched, a share of the turns to the
 * threads"). So a share of the turns goes, read every 100 ms: it grows by a tenth while the load
 * is over `above`, shrinks by a tenth once it is under (`SHRINK_FACTOR`), and holds between, so it
 * settles at about the least that keeps the thread under the line.
 */
export class ServerLoad {
  readonly #above: number;
  readonly #sample: () => number;
  /** Readings are to begin at the next turn (`start`): none has been taken yet. */
  #unstarted: boolean;
  #timer: NodeJS.Timeout | undefined;
  /** In tenths, so the sums below are exact. */
  #share: number;
  /** Turns owed to the threads at the current share, in tenths; one goes each time it reaches a whole turn. */
  #credit = 0;
  #rising: (() => void) | undefined;

  /**
   * `above` 0 sends every turn to a thread; `sample` is the load reader, the event loop's unless a
   * test gives one. `rising` is called once, the first time the load passes about half the line
   * (`WARM_FACTOR`): the turn threads start then, ready before they are needed, and a server that
   * never gets busy never pays for them (BENCHMARKS.md, "An idle server"). The readings start with the
   * first turn: until then the only work is the server's own start (loading modules, compiling
   * routes), and read as load it started a turn thread (some 40 MB) in every server, busy or not.
   */
  constructor(above: number, options: { sample?: () => number; start?: boolean; rising?: () => void } = {}) {
    this.#above = above;
    this.#sample = options.sample ?? utilizationSampler();
    this.#share = above === 0 ? WHOLE : 0;
    this.#rising = options.rising;
    if (above === 0) this.#risen();
    this.#unstarted = above > 0 && options.start !== false;
  }

  /** The share of turns (0–1) now sent to threads. */
  get share(): number {
    return this.#share / WHOLE;
  }

  /** Whether the turn about to start goes to a thread: the share of them, spread evenly. */
  sendsTurn(): boolean {
    if (this.#unstarted) this.#start();
    if (this.#share === 0) return false;
    this.#credit += this.#share;
    if (this.#credit < WHOLE) return false;
    this.#credit -= WHOLE;
    return true;
  }

  /** Reads the load of the window that just ended. */
  update(): void {
    if (this.#above === 0) return;
    const load = this.#sample();
    if (load > this.#above * WARM_FACTOR) this.#risen();
    if (load > this.#above) this.#share = Math.min(WHOLE, this.#share + 1);
    else if (load < this.#above * SHRINK_FACTOR) this.#share = Math.max(0, this.#share - 1);
    if (this.#share === 0) this.#credit = 0;
  }

  #start(): void {
    this.#unstarted = false;
    // The first window is the first turn's, not the time since the server started.
    this.#sample();
    this.#timer = setInterval(() => this.update(), WINDOW_MS).unref();
  }

  #risen(): void {
    const rising = this.#rising;
    this.#rising = undefined;
    rising?.();
  }

  stop(): void {
    this.#unstarted = false;
    clearInterval(this.#timer);
  }
}
