/**
 * Row types of the database as Kysely sees it. Kept to what both engines store the same way:
 * ids and ISO-8601 timestamps are text, structured values are JSON text (`*_json`), booleans are
 * 0/1 integers. Repositories translate rows to the records callers use; nothing else reads rows.
 */

import type { InteractionStatus } from '../contract/interactions.ts';
import type { TurnStatus } from '../contract/sessions.ts';

export type Role = 'viewer' | 'editor' | 'admin';
export const ROLES: readonly Role[] = ['viewer', 'editor', 'admin'];

// The API reports these values as stored, so the contract is where the sets are defined.
export type { InteractionStatus, TurnStatus };

interface ProjectsTable {
  id: string;
  name: string;
  created_at: string;
}

export interface ApiKeysTable {
  id: string;
  project_id: string;
  role: Role;
  key_hash: string;
  key_prefix: string;
  created_at: string;
  revoked_at: string | null;
  last_used_at: string | null;
}

interface SessionsTable {
  project_id: string;
  id: string;
  created_at: string;
  updated_at: string;
}

export interface TurnsTable {
  id: string;
  project_id: string;
  session_id: string;
  status: TurnStatus;
  stop_reason: string | null;
  trace_id: string;
  span_id: string;
  parent_span_id: string | null;
  request_json: string | null;
  output_json: string | null;
  usage_json: string | null;
  error_json: string | null;
  started_at: string;
  ended_at: string | null;
}

export interface InteractionsTable {
  id: string;
  project_id: string;
  session_id: string;
  turn_id: string;
  kind: string;
  status: InteractionStatus;
  tool_call_id: string;
  request_json: string;
  answer_json: string | null;
  resolution_json: string | null;
  created_at: string;
  updated_at: string;
}

/** What a paused turn needs to go on out of band: the conversation so far and its template (sessions/paused-state.ts). */
interface PausedStatesTable {
  turn_id: string;
  project_id: string;
  session_id: string;
  state_json: string;
  created_at: string;
}

export interface SessionLeasesTable {
  project_id: string;
  session_id: string;
  turn_id: string;
  holder: string;
  expires_at: string;
  cancel_requested: number;
  started_at: string;
}

export interface ConnectionsTable {
  id: string;
  project_id: string;
  slug: string;
  provider: string;
  base_url: string | null;
  model: string | null;
  /** base64 of iv | tag | ciphertext (secret-box.ts); never the key itself. */
  api_key_ciphertext: string;
  key_hint: string;
  created_at: string;
  updated_at: string;
}

/** What an artifact is: a workflow (of one of the three families), an environment or a test set. */
export type ArtifactKind = 'workflow' | 'environment' | 'testset';

/** A workflow or an environment: the named thing whose variants hold revisions. */
export interface ArtifactsTable {
  id: string;
  project_id: string;
  kind: ArtifactKind;
  /** workflow | application | evaluator for workflows; null for environments. */
  family: string | null;
  slug: string;
  name: string | null;
  description: string | null;
  created_at: string;
  updated_at: string;
}

interface VariantsTable {
  id: string;
  project_id: string;
  artifact_id: string;
  slug: string;
  created_at: string;
}

/** Immutable once written: a new configuration is a new row with the next version. */
interface RevisionsTable {
  id: string;
  project_id: string;
  artifact_id: string;
  variant_id: string;
  version: number;
  slug: string;
  data_json: string;
  message: string | null;
  created_at: string;
}

export interface EvaluationRunsTable {
  id: string;
  project_id: string;
  name: string | null;
  description: string | null;
  status: string;
  /** What runs: the resolved steps, repeats, concurrency and evaluators (EvaluationSpec). */
  spec_json: string;
  tags_json: string | null;
  meta_json: string | null;
  flags_json: string | null;
  error_json: string | null;
  /** Set when the run ends: its metrics as they were then. */
  metrics_json: string | null;
  cancel_requested: number;
  created_at: string;
  updated_at: string;
  started_at: string | null;
  ended_at: string | null;
}

/** One of a run's `batch_size` places for a running case (PostgreSQL's claims; see migration 0011). */
interface EvaluationSlotsTable {
  run_id: string;
  slot: number;
  /** The case that last took it: the slot is taken while that case is running. */
  result_id: string | null;
}

/** One test case × repeat of a run: its current state and every attempt so far. */
export interface EvaluationResultsTable {
  id: string;
  project_id: string;
  run_id: string;
  testcase_id: string;
  repeat_idx: number;
  status: string;
  /** A case waiting to be retried is not claimed before this time. */
  not_before: string | null;
  claimed_by: string | null;
  /** While running: when the claim lapses unless its holder renews it. */
  claim_expires_at: string | null;
  attempts_json: string;
  output_json: string | null;
  error_json: string | null;
  scores_json: string | null;
  duration_ms: number | null;
  tokens: number | null;
  cost: number | null;
  trace_id: string | null;
  session_id: string | null;
  created_at: string;
  updated_at: string;
}

export interface Database {
  projects: ProjectsTable;
  api_keys: ApiKeysTable;
  sessions: SessionsTable;
  turns: TurnsTable;
  interactions: InteractionsTable;
  paused_states: PausedStatesTable;
  session_leases: SessionLeasesTable;
  connections: ConnectionsTable;
  artifacts: ArtifactsTable;
  variants: VariantsTable;
  revisions: RevisionsTable;
  evaluation_runs: EvaluationRunsTable;
  evaluation_results: EvaluationResultsTable;
  evaluation_slots: EvaluationSlotsTable;
}
