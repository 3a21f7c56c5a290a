/**
 * agentd's client: `import { createClient } from 'agentd/client'`. Browser-safe: it uses `fetch`
 * and web streams only.
 */
export { createClient, type AgentdClient, type InvokeBody, type InvokeReply, type ListPage, type NativeFrame, type TurnOptions, type VercelChunk } from './client.ts';
export { AgentdError } from './errors.ts';
export {
  allResults,
  asText,
  caseExpected,
  caseFailed,
  caseInput,
  caseOutput,
  compareRuns,
  meanScore,
  type CaseChange,
  type CaseComparison,
  type CaseResult,
} from './evaluation-cases.ts';
export { invokeMany, type InvokeManyOptions, type InvokeManyProgress, type Outcome } from './invoke-many.ts';
export { readFrames } from './frames.ts';
export type { ClientOptions } from './transport.ts';
