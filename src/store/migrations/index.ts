import type { Migration } from 'kysely/migration';
import { initial } from './0001_initial.ts';
import { sessionLeases } from './0002_session_leases.ts';
import { interactionListing } from './0003_interaction_listing.ts';
import { connections } from './0004_connections.ts';
import { configs } from './0005_configs.ts';
import { evaluations } from './0006_evaluations.ts';
import { evaluationClaims } from './0007_evaluation_claims.ts';
import { claimExpiryIndex } from './0008_claim_expiry_index.ts';
import { sessionListing } from './0009_session_listing.ts';
import { apiKeyLastUsed } from './0010_api_key_last_used.ts';
import { evaluationSlots } from './0011_evaluation_slots.ts';
import { runningClaimsIndex } from './0012_running_claims_index.ts';
import { pausedStates } from './0013_paused_states.ts';
import { interactionLookups } from './0014_interaction_lookups.ts';

/**
 * Every migration, by name. Kysely applies them in name order, so names start with a zero-padded
 * sequence number; listing them in code (not scanning a folder) keeps them working when bundled.
 */
export const migrations: Record<string, Migration> = {
  '0001_initial': initial,
  '0002_session_leases': sessionLeases,
  '0003_interaction_listing': interactionListing,
  '0004_connections': connections,
  '0005_configs': configs,
  '0006_evaluations': evaluations,
  '0007_evaluation_claims': evaluationClaims,
  '0008_claim_expiry_index': claimExpiryIndex,
  '0009_session_listing': sessionListing,
  '0010_api_key_last_used': apiKeyLastUsed,
  '0011_evaluation_slots': evaluationSlots,
  '0012_running_claims_index': runningClaimsIndex,
  '0013_paused_states': pausedStates,
  '0014_interaction_lookups': interactionLookups,
};
