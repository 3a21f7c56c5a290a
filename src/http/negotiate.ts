import { AppError } from '../errors.ts';

/** `jsonl` is NDJSON under the other name a client may ask for; it is answered under that name. */
export type Wire = 'json' | 'sse' | 'ndjson' | 'jsonl';

interface Range {
  wires: Wire[];
  q: number;
}

const RANGES: Record<string, Wire[]> = {
  'application/json': ['json'],
  'text/event-stream': ['sse'],
  'application/x-ndjson': ['ndjson'],
  'application/jsonl': ['jsonl'],
  'application/*': ['json', 'ndjson'],
  'text/*': ['sse'],
  '*/*': ['json', 'sse', 'ndjson'],
};

function parseAccept(accept: string): Range[] {
  const ranges: Range[] = [];
  for (const item of accept.split(',')) {
    const [type, ...params] = item.trim().toLowerCase().split(';');
    const qParam = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    const given = qParam ? Number(qParam.slice(2)) : 1;
    // An unreadable weight is ignored rather than read as 0, which would refuse a type the client named.
    const q = Number.isNaN(given) ? 1 : given;
    const wires = type ? RANGES[type.trim()] : undefined;
    if (wires && q > 0) ranges.push({ wires, q });
  }
  // Stable sort keeps the caller's order among equal weights.
  return ranges.sort((a, b) => b.q - a.q);
}

const isStream = (w: Wire) => w !== 'json';

/**
 * Decides batch or stream and the wire format (spec §4.1-4.2, §7; design.md §4): `flags.stream`
 * decides what the handler produces, else the most preferred acceptable type; an `Accept` that
 * rules out what the handler produces is a 406, never a silent switch.
 */
export function negotiate(accept: string | undefined, streamFlag: boolean | undefined): { stream: boolean; wire: Wire } {
  const ranges = accept?.trim() ? parseAccept(accept) : [{ wires: RANGES['*/*']!, q: 1 }];
  if (ranges.length === 0) {
    throw new AppError('not-acceptable', `Accept "${accept}" names no supported type; use application/json, text/event-stream, application/x-ndjson or application/jsonl`);
  }
  const preferred = ranges.flatMap((r) => r.wires);
  const stream = streamFlag ?? (ranges[0]!.wires.length === 1 && isStream(ranges[0]!.wires[0]!));
  const wire = preferred.find((w) => isStream(w) === stream);
  if (!wire) {
    throw new AppError(
      'not-acceptable',
      stream
        ? `the request asks for a stream (flags.stream is true, or the body is useChat's, which is answered with its stream) but Accept "${accept}" only allows a JSON reply; accept text/event-stream, application/x-ndjson or application/jsonl, or set flags.stream to false`
        : `the request asks for a single JSON reply but Accept "${accept}" only allows a stream; accept application/json, or set flags.stream to true`,
    );
  }
  return { stream, wire };
}
