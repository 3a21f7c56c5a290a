import type { UIMessage, UIMessageChunk } from 'ai';
import { isToolPart, toolNameOf, type ToolPart } from './tool-parts.ts';

type Approval = { id: string; approved?: boolean; reason?: string; descriptor?: unknown; requestReason?: string; isAutomatic?: boolean; signature?: string; inputSchemaInput?: unknown };

/**
 * The UI message stream chunks that build `message`'s parts again from nothing, every step closed
 * (its metadata goes on the stream's `start`). A client that resumes a stream treats it as a
 * replay of the whole message and starts from an empty one (the AI SDK's `resumeStreamIsReplay`),
 * so a replay of a turn that continues a message the client held must first rebuild that message,
 * or the continuation's chunks find no parts to apply to.
 */
export function messageChunks(message: UIMessage): UIMessageChunk[] {
  const out: UIMessageChunk[] = [];
  let stepOpen = false;
  message.parts.forEach((part, index) => {
    const id = `${message.id}-${index}`;
    if (isToolPart(part)) {
      out.push(...toolChunks(part));
      return;
    }
    switch (part.type) {
      case 'step-start':
        if (stepOpen) out.push({ type: 'finish-step' });
        out.push({ type: 'start-step' });
        stepOpen = true;
        break;
      case 'text':
        out.push({ type: 'text-start', id, ...meta(part.providerMetadata) }, { type: 'text-delta', id, delta: part.text }, { type: 'text-end', id });
        break;
      case 'reasoning': {
        // The SDK keeps a reasoning part's stream id on the part.
        const reasoningId = part.id ?? id;
        out.push(
          { type: 'reasoning-start', id: reasoningId, ...meta(part.providerMetadata) },
          { type: 'reasoning-delta', id: reasoningId, delta: part.text },
          { type: 'reasoning-end', id: reasoningId },
        );
        break;
      }
      case 'file':
      case 'reasoning-file':
        out.push({ type: part.type, url: part.url, mediaType: part.mediaType, ...meta(part.providerMetadata) });
        break;
      case 'source-url':
        out.push({ type: 'source-url', sourceId: part.sourceId, url: part.url, ...(part.title !== undefined ? { title: part.title } : {}), ...meta(part.providerMetadata) });
        break;
      case 'source-document':
        out.push({
          type: 'source-document',
          sourceId: part.sourceId,
          mediaType: part.mediaType,
          title: part.title,
          ...(part.filename !== undefined ? { filename: part.filename } : {}),
          ...meta(part.providerMetadata),
        });
        break;
      case 'steering-message':
        out.push({ type: 'steering-message', id: part.id, parts: part.parts });
        break;
      default:
        if (part.type.startsWith('data-')) {
          const data = part as { type: `data-${string}`; id?: string; data: unknown };
          out.push({ type: data.type, ...(data.id !== undefined ? { id: data.id } : {}), data: data.data });
        }
    }
  });
  if (stepOpen) out.push({ type: 'finish-step' });
  return out;
}

function meta<T>(providerMetadata: T | undefined): { providerMetadata?: T } {
  return providerMetadata !== undefined ? { providerMetadata } : {};
}

function toolChunks(part: ToolPart): UIMessageChunk[] {
  const toolCallId = part.toolCallId;
  const call = {
    toolCallId,
    toolName: toolNameOf(part),
    ...(part.type === 'dynamic-tool' ? { dynamic: true } : {}),
    ...(part.title !== undefined ? { title: part.title } : {}),
    ...(part.providerExecuted !== undefined ? { providerExecuted: part.providerExecuted } : {}),
    ...(part.toolMetadata !== undefined ? { toolMetadata: part.toolMetadata } : {}),
  };
  if (part.state === 'input-streaming') return [{ type: 'tool-input-start', ...call }];
  if (part.state === 'output-error' && part.input === undefined) {
    return [{ type: 'tool-input-error', ...call, input: 'rawInput' in part ? part.rawInput : undefined, errorText: part.errorText }];
  }
  const out: UIMessageChunk[] = [{ type: 'tool-input-available', ...call, input: part.input, ...meta(part.callProviderMetadata) }];
  const approval = part.approval as Approval | undefined;
  if (approval !== undefined) {
    out.push({
      type: 'tool-approval-request',
      approvalId: approval.id,
      toolCallId,
      ...(approval.descriptor !== undefined ? { approvalDescriptor: approval.descriptor } : {}),
      ...('inputSchemaInput' in approval ? { inputSchemaInput: approval.inputSchemaInput } : {}),
      ...(approval.requestReason !== undefined ? { reason: approval.requestReason } : {}),
      ...(approval.isAutomatic === true ? { isAutomatic: true } : {}),
      ...(approval.signature !== undefined ? { signature: approval.signature } : {}),
    });
    if (approval.approved !== undefined) {
      out.push({ type: 'tool-approval-response', approvalId: approval.id, approved: approval.approved, ...(approval.reason !== undefined ? { reason: approval.reason } : {}) });
    }
  }
  switch (part.state) {
    case 'output-available':
      out.push({ type: 'tool-output-available', toolCallId, output: part.output, ...(part.preliminary !== undefined ? { preliminary: part.preliminary } : {}), ...meta(part.resultProviderMetadata) });
      break;
    case 'output-error':
      out.push({ type: 'tool-output-error', toolCallId, errorText: part.errorText, ...meta(part.resultProviderMetadata) });
      break;
    case 'output-denied':
      out.push({ type: 'tool-output-denied', toolCallId });
      break;
  }
  return out;
}
