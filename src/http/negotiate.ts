import { AppError } from '../errors.ts';

/** `jsonl` is NDJSON under the other name a client may ask for; it is answered under that name. */
export type Wire = 'json' | 'sse' | 'ndjson' | 'jsonl';

// Each wire's media type, in the order `*/*` offers them: JSON first, so a plain client gets one reply.
const TYPES: [Wire, string][] = [
  ['json', 'application/json'],
  ['sse', 'text/event-stream'],
  ['ndjson', 'application/x-ndjson'],
  ['jsonl', 'application/jsonl'],
];

// The wires a wildcard offers: `jsonl` only to a client that names it.
const WILDCARD_WIRES: Record<string, Wire[]> = { 'application/*': ['json', 'ndjson'], 'text/*': ['sse'], '*/*': ['json', 'sse', 'ndjson'] };

interface Range {
  type: string;
  q: number;
  /** Where the client listed it: among equal weights, its order is its preference. */
  at: number;
}

function parseAccept(accept: string): Range[] {
  return accept.split(',').flatMap((item, at) => {
    const [type, ...params] = item.trim().toLowerCase().split(';');
    const qParam = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    const given = qParam ? Number(qParam.slice(2)) : 1;
    // An unreadable weight is ignored rather than read as 0, which would refuse a type the client named.
    const q = Number.isNaN(given) ? 1 : given;
    return type?.trim() ? [{ type: type.trim(), q, at }] : [];
  });
}

/**
 * The wires `accept` allows, most preferred first. A wire takes its weight from the most specific
 * range that matches it (RFC 9110 §12.5.1): `*\/*, application/json;q=0` refuses JSON, however
 * welcome `*\/*` makes everything else.
 */
function acceptable(accept: string | undefined): Wire[] {
  const ranges = accept?.trim() ? parseAccept(accept) : [{ type: '*/*', q: 1, at: 0 }];
  const weighed: { wire: Wire; q: number; at: number; order: number }[] = [];
  for (const [order, [wire, type]] of TYPES.entries()) {
    const offers = (r: Range) => WILDCARD_WIRES[r.type]?.includes(wire) ?? false;
    const exact = ranges.filter((r) => r.type === type);
    const typeWild = ranges.filter((r) => r.type === `${type.split('/')[0]}/*` && offers(r));
    const anyWild = ranges.filter((r) => r.type === '*/*' && offers(r));
    const [best] = [exact, typeWild, anyWild].find((m) => m.length > 0)?.sort((a, b) => b.q - a.q) ?? [];
    if (best && best.q > 0) weighed.push({ wire, q: best.q, at: best.at, order });
  }
  return weighed.sort((a, b) => b.q - a.q || a.at - b.at || a.order - b.order).map((w) => w.wire);
}

const isStream = (w: Wire) => w !== 'json';

function noSupportedType(accept: string | undefined): AppError {
  return new AppError('not-acceptable', `Accept "${accept}" names no supported type; use application/json, text/event-stream, application/x-ndjson or application/jsonl`);
}

/**
 * Decides batch or stream and the wire format (spec §4.1-4.2, §7; design.md §4): `flags.stream`
 * decides what the handler produces, else the most preferred acceptable type; an `Accept` that
 * rules out what the handler produces is a 406, never a silent switch.
 */
export function negotiate(accept: string | undefined, streamFlag: boolean | undefined): { stream: boolean; wire: Wire } {
  const preferred = acceptable(accept);
  if (preferred.length === 0) throw noSupportedType(accept);
  const stream = streamFlag ?? isStream(preferred[0]!);
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

/** The wire of a reply that is only ever a stream (a live turn followed): the first streaming type `accept` allows. */
export function negotiateStream(accept: string | undefined): Exclude<Wire, 'json'> {
  const preferred = acceptable(accept);
  if (preferred.length === 0) throw noSupportedType(accept);
  const wire = preferred.find((w): w is Exclude<Wire, 'json'> => isStream(w));
  if (wire === undefined) {
    throw new AppError('not-acceptable', `this route answers with a stream but Accept "${accept}" only allows a JSON reply; accept text/event-stream, application/x-ndjson or application/jsonl`);
  }
  return wire;
}
