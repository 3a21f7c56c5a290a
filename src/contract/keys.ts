import { z } from 'zod';
import { withExample } from './example.ts';

/** API keys over HTTP (design.md §4 "Auth"): who a key is, and an admin's keys of the project. */

const KeyRole = z.enum(['viewer', 'editor', 'admin']);

export const KeyView = z.object({
  id: z.string(),
  /** The key's first characters, enough to tell keys apart; the rest is never stored. */
  prefix: z.string(),
  role: KeyRole,
  created_at: z.string(),
  /** When the key was last seen; refreshed at most once a minute. */
  last_used_at: z.string().optional(),
  revoked_at: z.string().optional(),
});
export type KeyView = z.infer<typeof KeyView>;

export const KeyCreate = withExample(z.strictObject({ role: KeyRole.default('editor') }), { role: 'viewer' });

/** The new key with its secret, shown this once. */
export const KeyCreated = KeyView.extend({ key: z.string() });

export const KeyList = z.object({ count: z.number().int(), keys: z.array(KeyView), next: z.string().optional() });

/** The calling key and its project: what a console shows after signing in. */
export const KeySelf = z.object({ project: z.object({ id: z.string(), name: z.string() }), key: KeyView });
export type KeySelf = z.infer<typeof KeySelf>;
