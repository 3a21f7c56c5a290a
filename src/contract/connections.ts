import { z } from 'zod';
import { withExample } from './example.ts';
import { PROVIDERS, type Provider } from './providers.ts';

/**
 * Project connections (design.md §4 "Connections"): a provider, its base URL and an API key stored
 * in the project, named by a slug that templates use as `llm.connection: {mode: "project", slug}`.
 * The key goes in and never comes out; a view shows only its last characters.
 */

/** A project connection as a turn uses it, its API key decrypted. Lives only as long as the turn. */
export interface ProjectConnection {
  slug: string;
  provider: Provider;
  base_url?: string;
  model?: string;
  api_key: string;
}

/** What an HTTP header can carry, and so what an API key can be: printable ASCII without spaces. */
export const HEADER_VALUE = /^[\x21-\x7E]+$/;

export const ConnectionSlug = z
  .string()
  .regex(/^[a-z0-9][a-z0-9_-]{0,62}$/, { message: 'a slug is 1-63 lowercase letters, digits, "_" or "-", starting with a letter or digit' });

export const ConnectionCreate = withExample(
  z
    .strictObject({
      slug: ConnectionSlug,
      provider: z.enum(PROVIDERS),
      base_url: z
        .url({ protocol: /^https?$/, message: 'base_url must be an http(s) URL' })
        .max(2048)
        // Viewers read base_url back; a key belongs in api_key, which is sealed and never returned.
        .refine((url) => !/^[a-z]+:\/\/[^/?#]*@/i.test(url), { message: 'base_url must not carry a user name or password; put the key in api_key' })
        .describe(
          "The provider's API at an address of your own; without it, the provider's public API. Refused (400) at a link-local address or a cloud metadata service (169.254.169.254, fd00:ec2::254, …), or outside AGENTD_CONNECTION_ALLOWED_HOSTS where the operator set it; a host name is checked as it resolves, each time agentd connects",
        )
        .optional(),
      api_key: z
        .string()
        .min(1)
        .max(4096)
        // An HTTP header cannot carry anything else: such a key would fail every call as the provider's fault.
        .regex(HEADER_VALUE, { message: 'api_key must be the key itself, printable ASCII without spaces (a placeholder such as "sk-…" is not one)' })
        .describe("The provider's API key: stored encrypted, never returned"),
      model: z.string().min(1).max(256).optional(),
    })
    // Such an endpoint has no default address: without one the connection could not be used.
    .refine((c) => c.provider !== 'openai-compatible' || c.base_url !== undefined, {
      message: 'provider "openai-compatible" needs base_url',
      path: ['base_url'],
    })
    .meta({ anyOf: [{ properties: { provider: { enum: PROVIDERS.filter((p) => p !== 'openai-compatible') } } }, { required: ['base_url'] }] }),
  { slug: 'team-openai', provider: 'openai', api_key: 'sk-proj-REPLACE-WITH-YOUR-KEY', model: 'gpt-5-mini' },
);
export type ConnectionCreate = z.infer<typeof ConnectionCreate>;

export const ConnectionView = z.object({
  id: z.string(),
  project_id: z.string(),
  slug: z.string(),
  provider: z.enum(PROVIDERS),
  base_url: z.string().optional(),
  model: z.string().optional(),
  key_hint: z.string().describe('"…" and the last characters of the key (4, fewer for a key shorter than 16), to tell keys apart'),
  created_at: z.string(),
  updated_at: z.string(),
});
export type ConnectionView = z.infer<typeof ConnectionView>;

export const ConnectionList = z.object({
  count: z.number().int(),
  connections: z.array(ConnectionView),
  next: z.string().optional(),
});
export type ConnectionList = z.infer<typeof ConnectionList>;
