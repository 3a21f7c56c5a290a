/**
 * Where a server's CPU went, from a `--cpu-prof` profile (BENCH_PROFILE=1 npm run bench):
 *
 *   node bench/profile-summary.ts bench/results/profiles/<run>-<server>/<file>.cpuprofile [fromS toS]
 *
 * Each busy sample is charged to the innermost frame that belongs to a package or to agentd's
 * src/ (or bench/), so Node internals count for whoever called them (undici for fetch, the AI SDK for its web
 * streams). Samples with no such frame at all (web-stream callbacks run from the microtask queue)
 * are shown as "node internals". `fromS toS` keeps one window of the profile, e.g. one scenario:
 * the per-second busy line printed first shows where the loaded windows are.
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

const [file, from, to] = process.argv.slice(2);
if (!file) {
  process.stderr.write('usage: node bench/profile-summary.ts <file.cpuprofile> [fromS toS]\n');
  process.exit(2);
}
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

let t = profile.startTime;
const times = profile.timeDeltas.map((d) => (t += d));
const isIdle = (id: number) => nodes.get(id)!.callFrame.functionName === '(idle)';

const perSecond = new Map<number, [busy: number, all: number]>();
profile.samples.forEach((id, i) => {
  const second = Math.floor((times[i]! - profile.startTime) / 1e6);
  const entry = perSecond.get(second) ?? [0, 0];
  entry[1]++;
  if (!isIdle(id)) entry[0]++;
  perSecond.set(second, entry);
});
console.log('busy % per second:', [...perSecond].map(([s, [b, n]]) => `${s}:${Math.round((100 * b) / n)}`).join(' '));

const lo = from === undefined ? -Infinity : profile.startTime + Number(from) * 1e6;
const hi = to === undefined ? Infinity : profile.startTime + Number(to) * 1e6;

function owner(url: string): string | undefined {
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1];
  const src = /\/((?:src|bench)\/[^/]+(?:\/[^/.]+)?)/.exec(url);
  return src ? src[1] : undefined;
}

const byOwner = new Map<string, number>();
let busy = 0;
let total = 0;
profile.samples.forEach((id, i) => {
  if (times[i]! < lo || times[i]! >= hi) return;
  total++;
  if (isIdle(id)) return;
  busy++;
  let who: string | undefined;
  for (let cur: number | undefined = id; cur !== undefined && who === undefined; cur = parent.get(cur)) {
    who = owner(nodes.get(cur)!.callFrame.url);
  }
  const leaf = nodes.get(id)!.callFrame.functionName;
  who ??= leaf.startsWith('(') ? leaf : 'node internals';
  byOwner.set(who, (byOwner.get(who) ?? 0) + 1);
});

console.log(`window: ${total} samples, ${busy} busy (${((100 * busy) / Math.max(1, total)).toFixed(0)}%)`);
for (const [who, n] of [...byOwner].sort((a, b) => b[1] - a[1])) {
  if (n / busy < 0.003) break;
  console.log(`${((100 * n) / busy).toFixed(1).padStart(6)}%  ${who}`);
}
