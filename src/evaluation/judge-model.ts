import type { Config } from '../config.ts';
import { resolveModel, serverKeys } from '../agent/model.ts';
import { makeRedactor } from '../telemetry/redact.ts';
import type { Tracing } from '../telemetry/tracing.ts';
import type { Complete } from './evaluators.ts';

/**
 * The model `llm_judge` asks: the server's own providers, as a self-managed template would reach
 * them (the judge's `llm`, else the server's default model), over the same AI SDK providers.
 * With spans exported, the AI SDK's own spans of the call join the case's trace, with no prompt
 * or answer in them, as agentd's own spans hold none.
 */
export function judgeModel(config: Pick<Config, 'env' | 'openaiCompatible' | 'connections' | 'defaultLlm'>, tracing?: Tracing): Complete {
  // The reply and a provider's error end up in stored scores that viewers read; either may repeat the key.
  const redact = makeRedactor(serverKeys(config));
  return async ({ system, prompt, provider, model, trace }) => {
    const llm = { provider: provider ?? config.defaultLlm.provider, model: model ?? config.defaultLlm.model, connection: { mode: 'self_managed' as const }, extras: {} };
    // `ai` loads here, with the first judge, not with every server (3.4 MB of heap).
    const { generateText } = await import('ai');
    const ask = (telemetry: Parameters<typeof generateText>[0]['telemetry']) => generateText({ model: resolveModel(llm, config, {}), system, prompt, maxRetries: 1, telemetry });
    try {
      const result =
        tracing && trace
          ? await tracing.within(trace, () => ask({ integrations: [tracing.aiSdk], recordInputs: false, recordOutputs: false, functionId: 'llm_judge' }))
          : await ask({ isEnabled: false });
      return redact(result.text);
    } catch (error) {
      throw new Error(redact(error instanceof Error ? error.message : String(error)));
    }
  };
}
