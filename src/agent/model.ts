import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { APICallError, type LanguageModelV4, type LanguageModelV4CallOptions } from '@ai-sdk/provider';
import type { Config } from '../config.ts';
import { HEADER_VALUE, type ProjectConnection } from '../contract/connections.ts';
import { DEMO_PROVIDER, PROVIDERS, type Provider } from '../contract/providers.ts';
import { AppError } from '../errors.ts';
import { makeRoom } from '../bounded.ts';
import { keepAliveFetch, keepAliveFetchThrough } from '../keep-alive-fetch.ts';
import { refusalIn } from './address-policy.ts';
import { answeredAsChat, unlessAnsweredAsChat } from './chat-answered.ts';
import { baseUrlOf, connectionAddresses, refuseBaseUrl } from './connection-address.ts';
import { learn, wayIn } from './model-facts.ts';
import { endingAtLastEvent } from './sse-end.ts';
import type { EffectiveLlm, EffectiveTemplate } from './template.ts';
import { own } from '../objects.ts';

const WHERE = 'data.parameters.agent.llm';

/**
 * Every provider's HTTP client: a cheaper fetch, measured in BENCHMARKS.md, whose event streams end
 * at their last event (sse-end.ts).
 */
type Fetch = typeof keepAliveFetch;
const modelFetch: Fetch = async (input, init) => endingAtLastEvent(await keepAliveFetch(input, init));

/**
 * The template's `llm` with a project connection applied: the connection's provider (a provider
 * the template names must be the same), and the template's model or else the connection's.
 */
export function settleLlm(llm: EffectiveTemplate['llm'], connection: ProjectConnection | undefined): EffectiveLlm {
  if (llm.connection.mode !== 'project') return llm as EffectiveLlm;
  if (!connection) throw new Error(`connection "${llm.connection.slug}" must be read before the model is resolved`);
  const slug = connection.slug;
  if (llm.provider !== undefined && llm.provider !== connection.provider) {
    throw new AppError(
      'invalid-request',
      `${WHERE}.provider is "${llm.provider}" but connection "${slug}" is a "${connection.provider}" connection; leave ${WHERE}.provider out or set it to "${connection.provider}"`,
    );
  }
  const model = llm.model ?? connection.model;
  if (!model) throw new AppError('invalid-request', `connection "${slug}" has no default model; name one in ${WHERE}.model`);
  return { ...llm, provider: connection.provider, model };
}

/**
 * Resolves the template's `llm` to an AI SDK model over the provider's real HTTP API. With a
 * project connection, its base URL and key are used and the server's environment is not.
 */
export function resolveModel(
  llm: EffectiveTemplate['llm'],
  config: Pick<Config, 'env' | 'openaiCompatible' | 'connections'>,
  secrets: Record<string, string>,
  connection?: ProjectConnection,
): LanguageModelV4 {
  const env = config.env;
  if (connection) return connectionModel(connection, settleLlm(llm, connection).model, config);
  if (llm.connection.mode === 'project' || llm.provider === undefined || llm.model === undefined) {
    throw new Error(`connection "${llm.connection.slug}" must be read before the model is resolved`);
  }
  const key = (name: string) => secrets[name] ?? env[name];
  switch (llm.provider) {
    case 'openai':
      return openAIModel(providerKey('OPENAI_API_KEY', secrets, env, env.OPENAI_BASE_URL), env.OPENAI_BASE_URL || undefined, llm.model);
    case 'anthropic':
      return anthropicModel(providerKey('ANTHROPIC_API_KEY', secrets, env, env.ANTHROPIC_BASE_URL), env.ANTHROPIC_BASE_URL, llm.model);
    case 'ollama':
      return compatibleModel('ollama', withV1(env.OLLAMA_BASE_URL || OLLAMA_LOCAL), key('OLLAMA_API_KEY'), llm.model);
    case 'openai-compatible': {
      const endpoint = compatibleEndpoint(llm, config);
      return compatibleModel(endpoint.slug, endpoint.base_url, endpoint.api_key_env ? key(endpoint.api_key_env) : undefined, llm.model);
    }
    case DEMO_PROVIDER: {
      const url = env.AGENTD_DEMO_MODEL_URL;
      if (!url) {
        throw new AppError(
          'invalid-request',
          `provider "demo" at ${WHERE}.provider is agentd's built-in demo model, which this server does not run: agentd serve starts it only when no provider key is configured (or set AGENTD_DEMO_MODEL_URL to an \`agentd demo-model\`)`,
        );
      }
      return compatibleModel(DEMO_PROVIDER, withV1(url), undefined, llm.model);
    }
    default:
      throw new AppError('invalid-request', `unknown provider "${llm.provider}" at ${WHERE}.provider; known: ${[...PROVIDERS, DEMO_PROVIDER].join(', ')}`);
  }
}

/** The AGENTD_OPENAI_COMPATIBLE endpoint the template's connection slug names. */
function compatibleEndpoint(llm: EffectiveTemplate['llm'], config: Pick<Config, 'openaiCompatible'>): Config['openaiCompatible'][string] & { slug: string } {
  const slug = llm.connection.slug;
  const endpoint = slug ? own(config.openaiCompatible, slug) : undefined;
  if (slug && endpoint) return { ...endpoint, slug };
  const known = Object.keys(config.openaiCompatible);
  throw new AppError(
    'invalid-request',
    `provider "openai-compatible" needs ${WHERE}.connection.slug naming an endpoint configured in AGENTD_OPENAI_COMPATIBLE` +
      (known.length ? ` (configured: ${known.join(', ')})` : ' (none is configured on this server)'),
  );
}

/** Where a coding-agent harness sends its model calls, and with which key. */
export interface ModelEndpoint {
  provider: Provider;
  /** As the provider's own tools take it: no `/v1` after an Anthropic base URL. */
  baseUrl: string;
  apiKey: string;
  model: string;
}

/**
 * The template's model as an endpoint for a harness process that speaks one of `providers` itself,
 * from the same places a built-in turn takes it: a project connection, the request's secrets, the
 * server's environment.
 */
export function harnessEndpoint(llm: EffectiveLlm, providers: readonly Provider[], config: Pick<Config, 'env' | 'openaiCompatible' | 'connections'>, secrets: Record<string, string>, connection?: ProjectConnection): ModelEndpoint {
  const provider = llm.provider as Provider;
  if (!providers.includes(provider)) {
    throw new AppError('invalid-request', `this harness calls its model over the ${providers.join(' or ')} API: set ${WHERE}.provider to ${providers.map((p) => `"${p}"`).join(' or ')} (with a model of it), or use a connection of it`);
  }
  // Names are checked where they resolve: the harness's relay (harness-turn.ts).
  if (connection?.base_url) refuseBaseUrl(connection.base_url, connectionAddresses(config.connections.allowedHosts), baseUrlOf(connection));
  const env = config.env;
  const key = (name: string, baseURL: string | undefined) => (connection ? connectionKey(connection) : providerKey(name, secrets, env, baseURL));
  const model = llm.model;
  switch (provider) {
    case 'anthropic': {
      const base = (connection ? connection.base_url : env.ANTHROPIC_BASE_URL) || ANTHROPIC_PUBLIC;
      return { provider, baseUrl: base.replace(/\/+$/, '').replace(/\/v1$/, ''), apiKey: key('ANTHROPIC_API_KEY', env.ANTHROPIC_BASE_URL), model };
    }
    case 'openai':
      return { provider, baseUrl: (connection ? connection.base_url : env.OPENAI_BASE_URL) || OPENAI_PUBLIC, apiKey: key('OPENAI_API_KEY', env.OPENAI_BASE_URL), model };
    case 'ollama':
      return { provider, baseUrl: withV1((connection ? connection.base_url : undefined) ?? (env.OLLAMA_BASE_URL || OLLAMA_LOCAL)), apiKey: (connection ? connectionKey(connection) : undefined) ?? own(secrets, 'OLLAMA_API_KEY') ?? env.OLLAMA_API_KEY ?? '', model };
    case 'openai-compatible': {
      if (connection) {
        if (!connection.base_url) throw new AppError('invalid-request', `connection "${connection.slug}" is "openai-compatible" and has no base_url; create it again with one`);
        return { provider, baseUrl: connection.base_url, apiKey: connectionKey(connection), model };
      }
      const endpoint = compatibleEndpoint(llm, config);
      const apiKey = endpoint.api_key_env ? (own(secrets, endpoint.api_key_env) ?? env[endpoint.api_key_env] ?? '') : '';
      return { provider, baseUrl: endpoint.base_url, apiKey, model };
    }
  }
}

/**
 * A connection without a base URL goes to the provider's public API, named here because the SDK
 * would otherwise take OPENAI_BASE_URL / ANTHROPIC_BASE_URL from the server's environment and send
 * the project's key wherever the operator pointed the server's own traffic.
 */
function connectionModel(connection: ProjectConnection, model: string, config: Pick<Config, 'env' | 'connections'>): LanguageModelV4 {
  const apiKey = connectionKey(connection);
  const via = connection.base_url === undefined ? undefined : checkedVia(connection, connection.base_url, config.connections.allowedHosts);
  switch (connection.provider) {
    case 'openai':
      return openAIModel(apiKey, connection.base_url ?? OPENAI_PUBLIC, model, via);
    case 'anthropic':
      return anthropicModel(apiKey, connection.base_url, model, via);
    case 'ollama':
      // Ollama has no public endpoint: unset means the one this server uses.
      return compatibleModel('ollama', withV1(connection.base_url ?? (config.env.OLLAMA_BASE_URL || OLLAMA_LOCAL)), apiKey, model, via);
    case 'openai-compatible':
      if (!connection.base_url) throw new AppError('invalid-request', `connection "${connection.slug}" is "openai-compatible" and has no base_url; create it again with one`);
      return compatibleModel(connection.slug, connection.base_url, apiKey, model, via);
  }
}

/** How a model's calls go out other than over modelFetch: `open` gives the fetch when the model is made, `key` tells such a model from others. */
interface Via {
  key: string;
  open: () => Fetch;
}

/**
 * A connection's base URL, which a project admin chose: its calls go through the connection
 * address policy's dispatcher, which checks each connection opened (a redirect's too) on the
 * address connected to, and a refusal fails the turn as a 400 naming the base URL. A literal
 * address is refused when the model is made, before the turn starts, and behind a proxy, where the
 * dispatcher is not used, that is the check there is.
 */
function checkedVia(connection: ProjectConnection, baseUrl: string, allowed: readonly string[] | undefined): Via {
  const addresses = connectionAddresses(allowed);
  const open = (): Fetch => {
    const where = baseUrlOf(connection);
    refuseBaseUrl(baseUrl, addresses, where);
    const checked = keepAliveFetchThrough(addresses.dispatcherFor());
    return async (input, init) => {
      try {
        return endingAtLastEvent(await checked(input, init));
      } catch (error) {
        // An AppError, which the provider's SDK passes on as it is: not a network failure to retry.
        const refused = refusalIn(error);
        if (refused) throw new AppError('invalid-request', `${where}: ${refused.message}`, { cause: error });
        throw error;
      }
    };
  };
  return { key: `${connection.slug} ${addresses.serial}`, open };
}

/**
 * Where each model made here sends its calls (base URL and model), so what a turn learns about a
 * server (it only streams, it never streams) is kept for that server alone.
 */
const endpoints = new WeakMap<object, string>();

function at<M extends LanguageModelV4>(baseURL: string, model: M): M {
  endpoints.set(model, `${baseURL} ${model.modelId}`);
  return model;
}

/** The server a model's calls go to, for what is learnt about it; the provider's name when unknown. */
export function endpointOf(model: LanguageModelV4): string {
  return endpoints.get(model) ?? `${model.provider}:${model.modelId}`;
}

/**
 * How a provider's calls go out. With no key (a server of your own), without the auth header the
 * provider would fill with an empty key: a proxy in front of such a server may refuse that.
 */
function http(apiKey: string, authHeader: string, fetch: Fetch): { fetch: Fetch } {
  if (apiKey !== '') return { fetch };
  return {
    fetch: (input, init) => {
      const headers = new Headers(init?.headers);
      headers.delete(authHeader);
      return fetch(input, { ...init, headers });
    },
  };
}

/**
 * Models are made once and kept for the turns after: a provider's model builds its response
 * schemas when it is made (the OpenAI-compatible chat model's stream schema alone cost about
 * 0.45 ms of CPU per turn, BENCHMARKS.md), and a server's turns use the same few models. Keyed by
 * everything a model is made from, its key included (the model holds that either way); past
 * KEPT_MODELS the least recently used goes.
 */
const kept = new Map<string, LanguageModelV4>();
const KEPT_MODELS = 64;

function keep(parts: Array<string | undefined>, via: Via | undefined, make: (fetch: Fetch) => LanguageModelV4): LanguageModelV4 {
  const key = JSON.stringify(via ? [...parts, via.key] : parts);
  let model = kept.get(key);
  if (model) kept.delete(key);
  else model = make(via ? via.open() : modelFetch);
  makeRoom(kept, KEPT_MODELS);
  kept.set(key, model);
  return model;
}

function anthropicModel(apiKey: string, baseURL: string | undefined, modelId: string, via?: Via): LanguageModelV4 {
  const base = withV1(baseURL || ANTHROPIC_PUBLIC);
  return keep(['anthropic', base, apiKey, modelId], via, (fetch) => at(base, createAnthropic({ ...http(apiKey, 'x-api-key', fetch), apiKey, baseURL: base })(modelId)));
}

function compatibleModel(name: string, baseURL: string, apiKey: string | undefined, modelId: string, via?: Via): LanguageModelV4 {
  return keep(['compatible', name, baseURL, apiKey, modelId], via, (fetch) => at(baseURL, createOpenAICompatible({ fetch, name, baseURL, apiKey, includeUsage: true })(modelId)));
}

const ANTHROPIC_PUBLIC = 'https://api.anthropic.com';
const OLLAMA_LOCAL = 'http://127.0.0.1:11434';

/**
 * A base URL as Anthropic's and Ollama's own tools take it (ANTHROPIC_BASE_URL, an Ollama host):
 * without the `/v1` that the AI SDK's providers want after it. One that already ends in `/v1` is
 * kept as it is.
 */
function withV1(url: string): string {
  const trimmed = url.replace(/\/+$/, '');
  return trimmed.endsWith('/v1') ? trimmed : `${trimmed}/v1`;
}

const OPENAI_PUBLIC = 'https://api.openai.com/v1';

/**
 * How servers answer a path they do not serve: most with 404 or 405, but small servers and test
 * doubles also with 400, 422 (a catch-all route that fails validation) or 501. Only calls made
 * before the server is known are moved on by them, so a genuine 400 costs one extra call, once.
 */
const NOT_SERVED = new Set([400, 404, 405, 422, 501]);

/**
 * An OpenAI model over the Responses API. OpenAI's own API always has it; a server that
 * OPENAI_BASE_URL or a connection points at may not. Such a server is asked, in turn, over the
 * Responses API and over Chat Completions (llama.cpp, older vLLM and gateways have only that),
 * each at the base URL as given and, when that is a bare origin, at its `/v1` (where every
 * OpenAI-compatible server has them). A refusal (`NOT_SERVED`), or an answer in Chat Completions'
 * shape from a server that routes nothing (chat-answered.ts), moves on to the next; the first
 * that answers is used for that base URL from then on, with no more trying. At OpenAI's
 * API a 404 means something else (an unknown model), so nothing else is tried there either.
 */
function openAIModel(apiKey: string, baseURL: string | undefined, modelId: string, via?: Via): LanguageModelV4 {
  const base = baseURL ?? OPENAI_PUBLIC;
  return keep(['openai', base, apiKey, modelId, String(wayIn.get(base))], via, (fetch) => openAIModelAt(apiKey, base, modelId, fetch));
}

function openAIModelAt(apiKey: string, base: string, modelId: string, fetch: Fetch): LanguageModelV4 {
  const openAI = (root: string) => createOpenAI({ ...http(apiKey, 'authorization', fetch), apiKey, baseURL: root });
  if (base === OPENAI_PUBLIC) return at(base, openAI(base).responses(modelId));
  const root = base.replace(/\/+$/, '');
  const roots = URL.parse(root)?.pathname === '/' ? [root, `${root}/v1`] : [root];
  const candidates = new Map<number, LanguageModelV4>();
  const candidate = (i: number): LanguageModelV4 => {
    let model = candidates.get(i);
    if (!model) {
      const provider = openAI(roots[Math.floor(i / 2)]!);
      model = i % 2 === 0 ? provider.responses(modelId) : provider.chat(modelId);
      candidates.set(i, model);
    }
    return model;
  };
  const known = wayIn.get(base);
  if (known !== undefined) return at(base, candidate(known));
  async function call<K extends 'doGenerate' | 'doStream'>(method: K, options: LanguageModelV4CallOptions): Promise<Awaited<ReturnType<LanguageModelV4[K]>>> {
    const last = roots.length * 2 - 1;
    // When every way fails, the answer that said most (a 400's reason) over a later "no such path".
    let telling: unknown;
    for (let i = wayIn.get(base) ?? 0; ; i++) {
      try {
        const model = candidate(i);
        const result = method === 'doStream' ? await unlessAnsweredAsChat(await model.doStream(options)) : await model.doGenerate(options);
        learn({ kind: 'way-in', base, index: i });
        return result as Awaited<ReturnType<LanguageModelV4[K]>>;
      } catch (error) {
        if (!APICallError.isInstance(error)) throw error;
        const status = error.statusCode ?? 0;
        if (!NOT_SERVED.has(status) && !answeredAsChat(error)) throw error;
        if (NOT_SERVED.has(status) && status !== 404 && status !== 405) telling ??= error;
        if (i === last) throw telling ?? error;
      }
    }
  }
  const first = candidate(0);
  return at(base, {
    specificationVersion: 'v4',
    provider: first.provider,
    modelId,
    supportedUrls: first.supportedUrls,
    doGenerate: (options) => call('doGenerate', options),
    doStream: (options) => call('doStream', options),
  });
}

/** The provider keys of the server's own environment: an upstream error or a model may echo them. */
export function serverKeys(config: Pick<Config, 'env' | 'openaiCompatible'>): Array<string | undefined> {
  const { env, openaiCompatible } = config;
  return [
    env.OPENAI_API_KEY,
    env.ANTHROPIC_API_KEY,
    env.OLLAMA_API_KEY,
    ...Object.values(openaiCompatible).map((endpoint) => (endpoint.api_key_env ? env[endpoint.api_key_env] : undefined)),
  ];
}

/**
 * The provider's key. The provider's own API needs one; a server of your own at a base URL may not
 * (a local model server often has no keys), so there a call without one goes without an auth header.
 */
function providerKey(name: string, secrets: Record<string, string>, env: Config['env'], baseURL: string | undefined): string {
  const sent = own(secrets, name);
  const value = sent ?? env[name];
  if (!value && baseURL) return '';
  if (!value) {
    throw new AppError('upstream-auth', `no API key for the model provider: set ${name} in the server's environment or pass it in the request's secrets.${name}`);
  }
  // The HTTP client cannot put such a value in a header and fails the call as if the provider's
  // answer were unusable (a 502 blaming the provider); a copied placeholder ("sk-…") is the usual one.
  if (!HEADER_VALUE.test(value)) {
    if (sent !== undefined) throw new AppError('invalid-request', `secrets.${name} is not an API key: it holds a space or a character outside printable ASCII (a placeholder copied from an example?)`);
    throw new AppError('upstream-auth', `${name} in the server's environment is not an API key: it holds a space or a character outside printable ASCII`);
  }
  return value;
}

/** A connection's key, which one stored before keys were held to what a header can carry may not be. */
function connectionKey(connection: ProjectConnection): string {
  if (HEADER_VALUE.test(connection.api_key)) return connection.api_key;
  throw new AppError(
    'upstream-auth',
    `connection "${connection.slug}" holds an api_key no HTTP header can carry (a space or a character outside printable ASCII): delete it and create it again with the key itself`,
  );
}

/**
 * Provider options a turn sends: the template's `llm.extras` (keyed by provider, as the AI SDK
 * takes them) over agentd's defaults. The Responses API defaults to `store: false`, so each request
 * carries the whole conversation instead of referring to items the server is assumed to keep;
 * self-hosted Responses servers keep nothing.
 */
export function providerOptionsFor(llm: Pick<EffectiveLlm, 'provider' | 'extras'>): Record<string, Record<string, unknown>> {
  const options: Record<string, Record<string, unknown>> = llm.provider === 'openai' ? { openai: { store: false } } : {};
  for (const [provider, value] of Object.entries(llm.extras)) {
    if (value && typeof value === 'object' && !Array.isArray(value)) options[provider] = { ...options[provider], ...(value as Record<string, unknown>) };
  }
  return options;
}
