import type { UIMessage } from 'ai';
import type { EffectiveTemplate } from '../agent/template.ts';
import type { Message } from '../contract/messages.ts';

/**
 * What a paused turn stores, once beside its interactions, so any process can continue it later.
 * Stored masked: secrets the conversation repeats never reach the database.
 */
export interface PausedState {
  template: EffectiveTemplate;
  history: Message[];
  /** The stored configuration the paused turn ran as, recorded again on its continuation. */
  references?: unknown;
  /** The stored revision it ran, when references named one. */
  revision?: unknown;
  /** The Vercel-format message the paused turn itself continued, which its continuation goes on. */
  continues?: UIMessage;
}
