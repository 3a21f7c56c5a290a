import { createRequire } from 'node:module';

/**
 * A `/metrics` page read as a scraper reads it: by a real Prometheus text-format parser
 * (parse-prometheus-text-format, after Prometheus' own prom2json), and held to what a scraper
 * relies on and that parser lets pass: every sample line well formed (a label value's quote,
 * backslash or newline escaped), each family's HELP and TYPE once and before its samples, no series
 * twice, and each histogram whole (buckets that never fall, `+Inf` equal to `_count`). The
 * parser folds a histogram's series into one when they have labels besides `le`, so histograms
 * are checked on the sample lines.
 */

interface ParsedFamily {
  name: string;
  type: string;
  metrics: Array<{ labels?: Record<string, string>; value?: string }>;
}

const require = createRequire(import.meta.url);
const parsePrometheusTextFormat = require('parse-prometheus-text-format') as (text: string) => ParsedFamily[];

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*';
const LABEL = `([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\\\\n]|\\\\[\\\\"n])*)"`;
const SAMPLE = new RegExp(`^(${NAME})(?:\\{((?:${LABEL})(?:,${LABEL})*)?\\})? (\\S+)(?: -?\\d+)?$`);
const unescape = (value: string) => value.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));

/** A page's samples, each family's type by name; throws naming the first rule the page breaks. */
export function readMetrics(text: string): { samples: Sample[]; types: Map<string, string> } {
  const families = parsePrometheusTextFormat(text);
  const types = new Map(families.map((family) => [family.name, family.type.toLowerCase()]));
  const described = new Map<string, { help?: true; type?: string; sampled?: true }>();
  const familyOf = (name: string) => {
    const base = /^(.*)_(bucket|count|sum)$/.exec(name)?.[1];
    return base && ['histogram', 'summary'].includes(described.get(base)?.type ?? '') ? described.get(base) : described.get(name);
  };
  const samples: Sample[] = [];
  const series = new Set<string>();
  for (const [i, line] of text.split('\n').entries()) {
    const at = `line ${i + 1} (${JSON.stringify(line)})`;
    const meta = /^# (HELP|TYPE) (\S+)(?: (.*))?$/.exec(line);
    if (meta) {
      const family = described.get(meta[2]!) ?? {};
      if (family.sampled) throw new Error(`${at}: ${meta[1]} after the family's samples`);
      if (meta[1] === 'HELP') {
        if (family.help) throw new Error(`${at}: a second HELP`);
        family.help = true;
      } else {
        if (family.type) throw new Error(`${at}: a second TYPE`);
        family.type = meta[3];
      }
      described.set(meta[2]!, family);
      continue;
    }
    if (line === '' || line.startsWith('#')) continue;
    const match = SAMPLE.exec(line);
    if (!match || Number.isNaN(Number(match.at(-1)!.replace(/Inf$/, 'Infinity')))) throw new Error(`${at}: not a sample`);
    const family = familyOf(match[1]!);
    if (!family?.help || !family.type) throw new Error(`${at}: no HELP and TYPE before it`);
    family.sampled = true;
    const labels = Object.fromEntries([...(match[2] ?? '').matchAll(new RegExp(LABEL, 'g'))].map((m) => [m[1]!, unescape(m[2]!)]));
    const key = seriesKey(match[1]!, labels, true);
    if (series.has(key)) throw new Error(`${at}: series ${key} twice`);
    series.add(key);
    samples.push({ name: match[1]!, labels, value: Number(match.at(-1)!.replace(/Inf$/, 'Infinity')) });
  }
  // The parser read every counter's and gauge's series as the lines say.
  for (const family of families.filter((f) => f.type === 'COUNTER' || f.type === 'GAUGE')) {
    for (const metric of family.metrics) {
      if (!samples.some((s) => s.name === family.name && seriesKey(s.name, s.labels, true) === seriesKey(family.name, metric.labels ?? {}, true))) {
        throw new Error(`the parser read ${seriesKey(family.name, metric.labels ?? {}, true)}, which no line has`);
      }
    }
  }
  for (const [name, type] of described) if (type.type === 'histogram') checkHistogram(name, samples);
  return { samples, types };
}

function checkHistogram(name: string, samples: Sample[]): void {
  const byLabels = new Map<string, { buckets: Array<[number, number]>; count?: number }>();
  for (const sample of samples) {
    const { le, ...rest } = sample.labels;
    const key = seriesKey(name, rest, true);
    const entry = byLabels.get(key) ?? { buckets: [] };
    if (sample.name === `${name}_bucket`) entry.buckets.push([le === '+Inf' ? Infinity : Number(le), sample.value]);
    else if (sample.name === `${name}_count`) entry.count = sample.value;
    else continue;
    byLabels.set(key, entry);
  }
  for (const [key, { buckets, count }] of byLabels) {
    buckets.sort((a, b) => a[0] - b[0]);
    for (let j = 1; j < buckets.length; j++) if (buckets[j]![1] < buckets[j - 1]![1]) throw new Error(`${key}: bucket le=${buckets[j]![0]} holds fewer than the one below it`);
    if (buckets.at(-1)?.[0] !== Infinity || buckets.at(-1)![1] !== count) throw new Error(`${key}: its +Inf bucket is not its _count`);
  }
}

/** `name{label="value",…}`, the labels sorted; `replica` left out unless `withReplica`. */
export function seriesKey(name: string, labels: Record<string, string>, withReplica = false): string {
  const shown = Object.entries(labels).filter(([key]) => withReplica || key !== 'replica').sort(([a], [b]) => a.localeCompare(b));
  return `${name}{${shown.map(([key, value]) => `${key}=${JSON.stringify(value)}`).join(',')}}`;
}

/** The value of each series, by seriesKey. */
export function valuesOf(samples: Sample[]): Map<string, number> {
  return new Map(samples.map((s) => [seriesKey(s.name, s.labels), s.value]));
}
