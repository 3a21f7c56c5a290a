import type { FastifyRequest } from 'fastify';
import { AppError } from '../errors.ts';
import type { VerifiedApiKey } from '../store/api-keys.ts';
import type { Store } from '../store/db.ts';
import type { Role } from '../store/schema.ts';

const RANK: Record<Role, number> = { viewer: 0, editor: 1, admin: 2 };

export interface Principal {
  projectId: string;
  role: Role;
  keyId: string;
}

const SCHEME = /^(?:apikey|bearer)\s+(\S+)\s*$/i;

export interface AuthorizeOptions {
  /**
   * The services surface names its project in every call (spec §4.1). On `/api` a missing
   * `project_id` means the key's own project, as the reference takes it (design.md §4).
   */
  projectRequired?: boolean;
}

/** How the services surface authorizes: its calls always name their project. */
export const SERVICES: AuthorizeOptions = { projectRequired: true };

/**
 * Who is calling (spec §5): no or unknown key → 401. The app runs it as a request arrives, before
 * its body is read, so a caller without a valid key is told that first, whatever it sent, and its
 * body is never parsed; `authorize` then decides what the key may do.
 */
export async function authenticate(store: Store, request: FastifyRequest): Promise<VerifiedApiKey> {
  const header = request.headers.authorization;
  const match = header ? SCHEME.exec(header) : null;
  if (!match) {
    throw new AppError('unauthenticated', header ? 'the Authorization header must be "ApiKey <key>"' : 'missing credential: send "Authorization: ApiKey <key>"');
  }
  const key = await store.apiKeys.verify(match[1]!);
  if (!key) throw new AppError('unauthenticated', 'the API key is invalid or revoked');
  request.verifiedKey = key;
  return key;
}

/**
 * Authorizes a request for one project (spec §5, design.md §4): no or unknown key → 401; a
 * missing `project_id` where one is required → 400; a key of another project, or a role below
 * the one the route's doc names (route-doc.ts) → 403. A key of another project gets the same
 * answer whether that project exists or not.
 */
export async function authorize(store: Store, request: FastifyRequest, options: AuthorizeOptions = {}): Promise<Principal> {
  // The role the API reference states is the role checked: one value, so the two cannot disagree.
  const need = request.routeOptions.config.doc?.role;
  if (need === undefined) throw new Error(`${request.method} ${request.routeOptions.url} authorizes its requests but has no doc to take the role from (src/http/route-doc.ts)`);
  const key = request.verifiedKey ?? (await authenticate(store, request));
  const given = (request.query as Record<string, unknown> | undefined)?.project_id;
  if (Array.isArray(given)) {
    throw new AppError('invalid-request', 'the query parameter project_id is given more than once; give it once');
  }
  const projectId = given === undefined && !options.projectRequired ? key.project_id : given;
  if (typeof projectId !== 'string' || projectId === '') {
    throw new AppError('missing-project-id', 'the query parameter project_id is required, e.g. ?project_id=<your project id>');
  }
  if (key.project_id !== projectId) throw new AppError('forbidden', `this API key may not act in project "${projectId}"`);
  if (RANK[key.role] < RANK[need]) {
    throw new AppError('forbidden', `this API key's role "${key.role}" may not do this; it needs the "${need}" role or higher`);
  }
  return { projectId, role: key.role, keyId: key.key_id };
}
