import { AbstractChat, DefaultChatTransport, type ChatInit, type ChatState, type ChatStatus, type UIMessage } from 'ai';

/**
 * `useChat` without React: `@ai-sdk/react` is only an `AbstractChat` over a state object that
 * re-renders on change. Everything that talks to the server (request bodies, SSE parsing, part
 * state machine, automatic re-sends) is the SDK's own code, which is the point of using it.
 */

class MemoryChatState<M extends UIMessage> implements ChatState<M> {
  status: ChatStatus = 'ready';
  error: Error | undefined = undefined;
  messages: M[];

  constructor(messages: M[] = []) {
    this.messages = messages;
  }

  // New arrays on every change, as React's state does, so a held reference is a true snapshot.
  pushMessage = (message: M): void => {
    this.messages = this.messages.concat(message);
  };

  popMessage = (): void => {
    this.messages = this.messages.slice(0, -1);
  };

  replaceMessage = (index: number, message: M): void => {
    this.messages = [...this.messages.slice(0, index), this.snapshot(message), ...this.messages.slice(index + 1)];
  };

  snapshot = <T>(thing: T): T => structuredClone(thing);
}

export interface SentRequest {
  url: string;
  headers: Record<string, string>;
  body: Record<string, any>;
}

export class HeadlessChat<M extends UIMessage = UIMessage> extends AbstractChat<M> {
  /** Every POST the transport made, in order, as the server received it. */
  readonly sent: SentRequest[] = [];
  #finished = 0;
  #waiters: { count: number; resolve: () => void }[] = [];

  constructor(init: ChatInit<M>) {
    const { messages, onFinish, ...rest } = init;
    super({
      ...rest,
      state: new MemoryChatState<M>(messages),
      onFinish: (event) => {
        onFinish?.(event);
        this.#finished++;
        this.#waiters = this.#waiters.filter((w) => (w.count <= this.#finished ? (w.resolve(), false) : true));
      },
    });
  }

  get finishedRequests(): number {
    return this.#finished;
  }

  /**
   * Resolves once `count` responses in total have finished. Status alone cannot tell: between a
   * response and the automatic re-send it triggers, the chat is briefly 'ready'.
   */
  async untilFinished(count: number, timeoutMs = 10_000): Promise<void> {
    if (this.#finished >= count) return;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`chat finished ${this.#finished} of ${count} responses (status ${this.status}, error ${this.error?.message})`)),
        timeoutMs,
      );
      this.#waiters.push({ count, resolve: () => (clearTimeout(timer), resolve()) });
    });
  }
}

export interface AgentdChatOptions<M extends UIMessage> extends Omit<ChatInit<M>, 'transport'> {
  /** The invoke URL including `?project_id=`. */
  api: string;
  apiKey: string;
  /** Extra request body, merged by the transport next to `{id, messages, trigger, messageId}`. */
  body?: object;
}

/** A chat wired to agentd exactly as a front end would configure `useChat`'s transport. */
export function agentdChat<M extends UIMessage = UIMessage>(options: AgentdChatOptions<M>): HeadlessChat<M> {
  const { api, apiKey, body, ...init } = options;
  let chat: HeadlessChat<M> | undefined;
  const transport = new DefaultChatTransport<M>({
    api,
    headers: { Authorization: `ApiKey ${apiKey}`, 'x-ag-messages-format': 'vercel' },
    ...(body !== undefined ? { body } : {}),
    fetch: async (input, request) => {
      const headers = Object.fromEntries(new Headers(request?.headers).entries());
      const sentBody = typeof request?.body === 'string' ? (JSON.parse(request.body) as Record<string, any>) : {};
      chat?.sent.push({ url: String(input), headers, body: sentBody });
      return fetch(input, request);
    },
  });
  chat = new HeadlessChat<M>({ ...init, transport });
  return chat;
}
