import { generateText } from 'ai';
import type { Config } from '../config.ts';
import { resolveModel, serverKeys } from '../agent/model.ts';
import { makeRedactor } from '../telemetry/redact.ts';
import type { Complete } from './evaluators.ts';

/**
 * The model `llm_judge` asks: the server's own providers, as a self-managed template would reach
 * them (the judge's `llm`, else the server's default model), over the same AI SDK providers.
 */
export function judgeModel(config: Pick<Config, 'env' | 'openaiCompatible' | 'defaultLlm'>): Complete {
  // The reply and a provider's error end up in stored scores that viewers read; either may repeat the key.
  const redact = makeRedactor(serverKeys(config));
  return async ({ system, prompt, provider, model }) => {
    const llm = { provider: provider ?? config.defaultLlm.provider, model: model ?? config.defaultLlm.model, connection: { mode: 'self_managed' as const }, extras: {} };
    try {
      const result = await generateText({ model: resolveModel(llm, config, {}), system, prompt, maxRetries: 1 });
      return redact(result.text);
    } catch (error) {
      throw new Error(redact(error instanceof Error ? error.message : String(error)));
    }
  };
}
