import { useChat, type UseChatHelpers } from '@ai-sdk/react';
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses, lastAssistantMessageIsCompleteWithToolCalls, type UIMessage } from 'ai';
import { createElement as h, useEffect, useMemo } from 'react';
import { createRoot } from 'react-dom/client';

/**
 * The smallest front end a user of agentd would write: `useChat` with `DefaultChatTransport` on
 * the invoke URL of an agentd on another origin, the conversation kept in local storage under the
 * chat id (the session id), `resume: true`. Nothing agentd-specific beyond what docs/api.md says.
 * The test drives it through `window.chat` (the hook's own helpers) and reads what it renders.
 */

interface PageConfig {
  agentd: string;
  projectId: string;
  key: string;
  agent: unknown;
}

declare global {
  interface Window {
    AGENTD: PageConfig;
    chat: UseChatHelpers<UIMessage>;
  }
}

const config = window.AGENTD;
const query = new URLSearchParams(window.location.search);
const chatId = query.get('chat') ?? 'usechat-page';
// `?ref=<slug>` runs a stored configuration instead of the inline template.
const ref = query.get('ref');
const storageKey = `chat:${chatId}`;
const saved = JSON.parse(localStorage.getItem(storageKey) ?? '[]') as UIMessage[];

const sendAutomaticallyWhen = (options: { messages: UIMessage[] }) =>
  lastAssistantMessageIsCompleteWithApprovalResponses(options) || lastAssistantMessageIsCompleteWithToolCalls(options);

function partText(part: UIMessage['parts'][number]): string {
  if (part.type === 'text') return part.text;
  if (part.type === 'step-start') return '';
  if ('toolCallId' in part) return `[${part.type} ${part.state}${part.state === 'output-available' ? ` ${JSON.stringify(part.output)}` : ''}]`;
  return `[${part.type}]`;
}

function App() {
  const transport = useMemo(
    () =>
      new DefaultChatTransport<UIMessage>({
        api: `${config.agentd}/services/agent/v0/invoke?project_id=${encodeURIComponent(config.projectId)}`,
        headers: { authorization: `ApiKey ${config.key}`, 'x-ag-messages-format': 'vercel' },
        body: ref ? { references: { workflow: { slug: ref } } } : { data: { parameters: { agent: config.agent } } },
      }),
    [],
  );
  const chat = useChat({ id: chatId, transport, messages: saved, resume: true, sendAutomaticallyWhen });
  window.chat = chat;
  useEffect(() => localStorage.setItem(storageKey, JSON.stringify(chat.messages)), [chat.messages]);

  return h(
    'main',
    null,
    h('p', { id: 'status' }, chat.status),
    chat.error ? h('p', { role: 'alert' }, chat.error.message) : null,
    ...chat.messages.map((m) => h('article', { key: m.id, className: m.role, 'data-id': m.id }, m.parts.map(partText).join(''))),
  );
}

createRoot(document.getElementById('root')!).render(h(App));
