import type { JSONRPCMessage, MCPTransport } from '@ai-sdk/mcp';

/**
 * Tells the server of each tool call the client gave up on (its deadline, the turn's stop), as MCP
 * asks of a client that cancels: a `notifications/cancelled` naming the request. The SDK only stops
 * waiting, and a server does not take a dropped connection for a cancel (on `sse` nothing is even
 * dropped: the call was a POST answered at once), so the tool ran on, writing, for nobody.
 *
 * Done on the transport: the SDK keeps its request ids to itself, and the transport sees each call
 * go out with its signal, and each answer come in.
 */
export function cancelAbandonedCalls(transport: MCPTransport): void {
  const pending = new Map<string | number, () => void>();
  const send = transport.send.bind(transport);
  const deliver = transport.onmessage;
  transport.onmessage = (message) => {
    if ('id' in message && !('method' in message) && message.id !== undefined) pending.get(message.id)?.();
    deliver?.(message);
  };
  transport.send = (message, options) => {
    const signal = options?.signal;
    if ('method' in message && message.method === 'tools/call' && 'id' in message && signal && !signal.aborted) {
      const { id } = message;
      const cancel = () => {
        pending.delete(id);
        const notice: JSONRPCMessage = { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: reasonOf(signal.reason) } };
        // Best effort: a server gone, or a client closing, has nothing left to stop.
        send(notice).catch(() => undefined);
      };
      signal.addEventListener('abort', cancel, { once: true });
      pending.set(id, () => {
        pending.delete(id);
        signal.removeEventListener('abort', cancel);
      });
    }
    return send(message, options);
  };
}

function reasonOf(reason: unknown): string {
  return reason instanceof Error && /timed out/i.test(reason.message) ? 'the call took longer than agentd waits (AGENTD_MCP_CALL_TIMEOUT_MS)' : 'the turn stopped';
}
