import { EMBED_KEY, EmbedSpec } from '../contract/configs.ts';
import { describeIssue } from '../contract/zod-errors.ts';
import { AppError } from '../errors.ts';
import { isObject } from '../objects.ts';
import type { ConfigsRepo, RevisionRecord } from '../store/configs.ts';
import { resolveReferences } from './references.ts';
import { selectPath } from './select-path.ts';

/**
 * How deep embeds may nest and how many one configuration may hold (the reference's limits), and
 * how much they may bring in altogether (JSON characters): without it, 100 embeds of a revision
 * near the body limit make a small request resolve a gigabyte.
 */
export const EMBED_LIMITS = { depth: 10, count: 100, chars: 10 * 1024 * 1024 } as const;

const child = (base: string, key: string | number) => (typeof key === 'number' ? `${base}[${key}]` : `${base}.${key}`);

/** Where the first `@ag.embed` inside a value is, or undefined when there is none. */
export function findEmbed(value: unknown, base: string): string | undefined {
  if (Array.isArray(value)) {
    for (const [i, item] of value.entries()) {
      const found = findEmbed(item, child(base, i));
      if (found) return found;
    }
  } else if (isObject(value)) {
    if (Object.hasOwn(value, EMBED_KEY)) return base;
    for (const [key, item] of Object.entries(value)) {
      const found = findEmbed(item, child(base, key));
      if (found) return found;
    }
  }
  return undefined;
}

export interface EmbedContext {
  repo: ConfigsRepo;
  projectId: string;
  /** The variant a commit writes to: embedding it would embed the revision being written. */
  committingTo?: string;
  /** The stored revision the value comes from, so embedding it again is seen as a cycle at once. */
  root?: RevisionRecord | undefined;
}

const label = (r: RevisionRecord) => `${r.artifact.kind} "${r.artifact.slug}" v${r.version}`;

/**
 * Replaces every `@ag.embed` in a value with what it names, recursively: an embedded value may
 * embed others. A revision that embeds itself, directly or through others, is a 400, as is going
 * deeper or wider than EMBED_LIMITS; neither can loop or run away.
 */
export async function resolveEmbeds(value: unknown, base: string, context: EmbedContext): Promise<unknown> {
  const seen = { count: 0, chars: 0 };
  // One configuration names the same revision many times over (a tool in every template): each is
  // read from the store, parsed and measured once.
  const found = new Map<string, Promise<RevisionRecord | undefined>>();
  const sizes = new Map<string, number>();
  const walk = async (node: unknown, where: string, chain: readonly RevisionRecord[]): Promise<unknown> => {
    if (Array.isArray(node)) {
      const out: unknown[] = [];
      for (const [i, item] of node.entries()) out.push(await walk(item, child(where, i), chain));
      return out;
    }
    if (!isObject(node)) return node;
    if (!Object.hasOwn(node, EMBED_KEY)) {
      const out: Record<string, unknown> = {};
      for (const [key, item] of Object.entries(node)) out[key] = await walk(item, child(where, key), chain);
      return out;
    }

    const at = child(where, EMBED_KEY);
    const parsed = EmbedSpec.safeParse(node[EMBED_KEY]);
    if (!parsed.success) throw new AppError('invalid-request', describeIssue(at, parsed.error.issues[0]!));
    const spec = parsed.data;
    if (++seen.count > EMBED_LIMITS.count) {
      throw new AppError('embed-limit', `more than ${EMBED_LIMITS.count} @ag.embed references in one configuration (the one over is at ${where})`);
    }
    const lookup = JSON.stringify([spec['@ag.references'], spec['@ag.selector']?.key ?? null]);
    let pending = found.get(lookup);
    if (!pending) {
      pending = resolveReferences(context.repo, context.projectId, spec['@ag.references'], spec['@ag.selector'], {
        environmentItself: true,
        at: { references: `${at}.@ag.references`, selector: `${at}.@ag.selector` },
      });
      found.set(lookup, pending);
    }
    const revision = await pending;
    if (!revision) throw new AppError('invalid-request', `${at}.@ag.references names nothing: give a workflow or environment reference`);
    if (revision.variant.id === context.committingTo || chain.some((r) => r.id === revision.id)) {
      const path = [...chain, revision].map(label).join(' → ');
      throw new AppError('embed-cycle', `the @ag.embed at ${where} leads back to a revision that embeds it (${path}); embeds cannot form a cycle`);
    }
    if (chain.length + 1 > EMBED_LIMITS.depth) {
      throw new AppError('embed-limit', `@ag.embed references nest deeper than ${EMBED_LIMITS.depth} levels (at ${where})`);
    }
    const path = spec['@ag.selector']?.path;
    // A workflow's configuration is its parameters; an environment's, its deployments.
    const selected = path ? selectPath(revision.data, path, `${at}.@ag.selector.path`) : revision.artifact.kind === 'environment' ? revision.data : selectPath(revision.data, 'parameters', `${at} (no @ag.selector.path)`);
    const sizeKey = `${revision.id}\u0000${path ?? ''}`;
    let size = sizes.get(sizeKey);
    if (size === undefined) sizes.set(sizeKey, (size = JSON.stringify(selected)?.length ?? 0));
    seen.chars += size;
    if (seen.chars > EMBED_LIMITS.chars) {
      throw new AppError('embed-limit', `the @ag.embed references of this configuration bring in more than ${EMBED_LIMITS.chars} characters of JSON (passed at ${where})`);
    }
    return walk(selected, where, [...chain, revision]);
  };
  return walk(value, base, context.root ? [context.root] : []);
}
