/** The model providers a template's `llm.provider` and a project connection name (design.md §4 "Connections"). */
export const PROVIDERS = ['openai', 'anthropic', 'ollama', 'openai-compatible'] as const;
export type Provider = (typeof PROVIDERS)[number];

/**
 * agentd's built-in demo model: the loopback fake model that echoes what it is told, which
 * `agentd serve` starts in its own process when no provider is configured, so a first run answers
 * with no account. Its address is AGENTD_DEMO_MODEL_URL (an `agentd demo-model` works too).
 */
export const DEMO_PROVIDER = 'demo';
