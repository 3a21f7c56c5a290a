import type { MCPTransport } from '@ai-sdk/mcp';

/**
 * The client's answers to a server's requests (`ping`, and those the SDK refuses: sampling,
 * roots…) go out one at a time; one the SDK sends while another is on its way is dropped. The SDK
 * answers each request at once, over HTTP with a request of its own (and, its answer taken with a
 * 202, a try at the server's event stream): a server streaming pings during a call held the
 * thread every project's turns share for over a second in every three, and ended the call past its
 * deadline.
 */
export function answerOneAtATime(transport: MCPTransport): void {
  const send = transport.send.bind(transport);
  let answering = false;
  transport.send = async (message, options) => {
    if ('method' in message || !('id' in message)) return send(message, options);
    if (answering) return;
    answering = true;
    try {
      await send(message, options);
    } finally {
      answering = false;
    }
  };
}
