import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import type { LanguageModel } from 'ai';
import type { Config } from '../config.ts';
import { AppError } from '../errors.ts';
import type { EffectiveTemplate } from './template.ts';

export const PROVIDERS = ['openai', 'anthropic', 'ollama', 'openai-compatible'] as const;

const WHERE = 'data.parameters.agent.llm';

/** Resolves the template's `llm` to an AI SDK model over the provider's real HTTP API. */
export function resolveModel(
  llm: EffectiveTemplate['llm'],
  config: Pick<Config, 'env' | 'openaiCompatible'>,
  secrets: Record<string, string>,
): LanguageModel {
  const env = config.env;
  if (llm.connection.mode === 'project') {
    throw new AppError('not-implemented', `project connections (${WHERE}.connection.mode "project") are not available yet; use "self_managed"`);
  }
  const key = (name: string) => secrets[name] ?? env[name];
  switch (llm.provider) {
    case 'openai':
      return createOpenAI({ apiKey: requireKey(key('OPENAI_API_KEY'), 'OPENAI_API_KEY'), baseURL: env.OPENAI_BASE_URL || undefined }).responses(llm.model);
    case 'anthropic':
      return createAnthropic({ apiKey: requireKey(key('ANTHROPIC_API_KEY'), 'ANTHROPIC_API_KEY'), baseURL: env.ANTHROPIC_BASE_URL || undefined })(llm.model);
    case 'ollama':
      return createOpenAICompatible({
        name: 'ollama',
        baseURL: env.OLLAMA_BASE_URL || 'http://127.0.0.1:11434/v1',
        apiKey: key('OLLAMA_API_KEY'),
        includeUsage: true,
      })(llm.model);
    case 'openai-compatible': {
      const slug = llm.connection.slug;
      const endpoint = slug ? config.openaiCompatible[slug] : undefined;
      if (!slug || !endpoint) {
        const known = Object.keys(config.openaiCompatible);
        throw new AppError(
          'invalid-request',
          `provider "openai-compatible" needs ${WHERE}.connection.slug naming an endpoint configured in AGENTD_OPENAI_COMPATIBLE` +
            (known.length ? ` (configured: ${known.join(', ')})` : ' (none is configured on this server)'),
        );
      }
      return createOpenAICompatible({
        name: slug,
        baseURL: endpoint.base_url,
        apiKey: endpoint.api_key_env ? key(endpoint.api_key_env) : undefined,
        includeUsage: true,
      })(llm.model);
    }
    default:
      throw new AppError('invalid-request', `unknown provider "${llm.provider}" at ${WHERE}.provider; known: ${PROVIDERS.join(', ')}`);
  }
}

function requireKey(value: string | undefined, name: string): string {
  if (!value) {
    throw new AppError('upstream-auth', `no API key for the model provider: set ${name} in the server's environment or pass it in the request's secrets.${name}`);
  }
  return value;
}

/**
 * Provider options a turn sends: the template's `llm.extras` (keyed by provider, as the AI SDK
 * takes them) over agentd's defaults. The Responses API defaults to `store: false`, so each request
 * carries the whole conversation instead of referring to items the server is assumed to keep;
 * self-hosted Responses servers keep nothing.
 */
export function providerOptionsFor(llm: Pick<EffectiveTemplate['llm'], 'provider' | 'extras'>): Record<string, Record<string, unknown>> {
  const options: Record<string, Record<string, unknown>> = llm.provider === 'openai' ? { openai: { store: false } } : {};
  for (const [provider, value] of Object.entries(llm.extras)) {
    if (value && typeof value === 'object' && !Array.isArray(value)) options[provider] = { ...options[provider], ...(value as Record<string, unknown>) };
  }
  return options;
}
