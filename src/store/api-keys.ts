import { hash, randomBytes, randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import { makeRoom } from '../bounded.ts';
import { nowIso } from './columns.ts';
import { pageSize, type ListWindow } from './cursor.ts';
import type { Notifications } from './notifications.ts';
import type { ApiKeysTable, Database, Role } from './schema.ts';

export interface CreatedApiKey {
  id: string;
  /** The plaintext key. It is not stored, so this is the only time anyone sees it. */
  key: string;
  prefix: string;
  role: Role;
  project_id: string;
}

export interface VerifiedApiKey {
  key_id: string;
  project_id: string;
  role: Role;
}

export interface ApiKeyInfo {
  id: string;
  project_id: string;
  role: Role;
  prefix: string;
  created_at: string;
  revoked_at: string | null;
  last_used_at: string | null;
}

/** Where a revoke is told to the other replicas (PostgreSQL), and heard from them. */
const REVOKED = 'key_revoked';

export interface ApiKeysOptions {
  /** Most verified keys remembered at once. */
  cacheSize?: number;
  /** How long a verification is trusted without asking the database again. */
  cacheTtlMs?: number;
  /** Clock in ms, for tests. */
  now?: () => number;
  /** PostgreSQL: a revoke here is told to every replica, whose caches forget the key at once. */
  notifications?: Notifications | undefined;
  /**
   * SQLite: a number that moves when another connection, such as `agentd keys revoke` in another
   * process, has committed to the database file (`PRAGMA data_version`); the cache is dropped then.
   */
  dataVersion?: (() => number) | undefined;
}

const KEY_PREFIX = 'agd_';
const KEY_PATTERN = /^agd_[A-Za-z0-9_-]{43}$/;
const DISPLAY_PREFIX_LENGTH = KEY_PREFIX.length + 8;

/**
 * A key carries 256 random bits, so nobody can guess one from its hash however fast the hash is:
 * slow password hashes (scrypt, argon2) exist for low-entropy secrets and would only slow every
 * request. An unsalted SHA-256 also lets the hash itself be the lookup key.
 */
export function hashApiKey(key: string): string {
  // The one-shot hash: half the CPU of createHash().update().digest() for a key this short.
  return hash('sha256', key, 'hex');
}

export function createApiKeysRepo(db: Kysely<Database>, options: ApiKeysOptions = {}) {
  const cacheSize = options.cacheSize ?? 10_000;
  const cacheTtlMs = options.cacheTtlMs ?? 60_000;
  const now = options.now ?? Date.now;
  // Map keeps insertion order, so the first entry is the oldest one: evicting it bounds memory.
  // Another replica's revoke cannot reach this cache; the TTL bounds how long a revoked key works there.
  const cache = new Map<string, { value: VerifiedApiKey; expiresAt: number }>();
  // Bumped when a revoke has committed (or, on SQLite, another process has written: it may have
  // been one): a lookup that was in flight across it may have read the key as live and must not
  // cache that, or the revoked key would keep working for a whole TTL.
  let revocations = 0;
  const dataVersion = options.dataVersion;
  let seenVersion: number | undefined;
  let versionRead = false;
  const versionStale = () => void (versionRead = false);

  /**
   * SQLite has no notifications: another process's revoke shows only as a commit this connection
   * did not make, and then the cache goes, all of it (such commits are rare: `agentd keys`, not
   * the checkpoint thread, whose checkpoints leave the number alone). Read once an event-loop
   * iteration, as it takes and drops a WAL read lock (3.7 µs, where a cache hit costs 0.8):
   * a request sent after the revoke committed is read from its socket in a later iteration than
   * any that read the number before the commit, so it is refused all the same.
   */
  function dropIfWrittenElsewhere(): void {
    if (!dataVersion || versionRead) return;
    versionRead = true;
    setImmediate(versionStale);
    const version = dataVersion();
    if (version === seenVersion) return;
    seenVersion = version;
    cache.clear();
    revocations += 1;
  }

  function remember(hash: string, value: VerifiedApiKey): void {
    cache.delete(hash);
    makeRoom(cache, cacheSize);
    cache.set(hash, { value, expiresAt: now() + cacheTtlMs });
  }

  async function create(projectId: string, role: Role): Promise<CreatedApiKey> {
    const key = KEY_PREFIX + randomBytes(32).toString('base64url');
    const id = randomUUID();
    const prefix = key.slice(0, DISPLAY_PREFIX_LENGTH);
    await db
      .insertInto('api_keys')
      .values({
        id,
        project_id: projectId,
        role,
        key_hash: hashApiKey(key),
        key_prefix: prefix,
        created_at: nowIso(),
        revoked_at: null,
        last_used_at: null,
      })
      .execute();
    return { id, key, prefix, role, project_id: projectId };
  }

  /** The key's identity, or undefined for an unknown, malformed or revoked key. */
  async function verify(key: string): Promise<VerifiedApiKey | undefined> {
    // Garbage never reaches the database: a flood of junk headers costs a regex test each.
    if (typeof key !== 'string' || !KEY_PATTERN.test(key)) return undefined;
    const keyHash = hashApiKey(key);
    dropIfWrittenElsewhere();
    const generation = revocations;
    const cached = cache.get(keyHash);
    if (cached) {
      if (cached.expiresAt > now()) return cached.value;
      cache.delete(keyHash);
    }
    const row = await db
      .selectFrom('api_keys')
      .select(['id', 'project_id', 'role'])
      .where('key_hash', '=', keyHash)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    if (!row) return undefined;
    const value: VerifiedApiKey = { key_id: row.id, project_id: row.project_id, role: row.role };
    if (generation === revocations) remember(keyHash, value);
    // Written only here, when the cache missed: a key in use is seen at least once per TTL, and a
    // request that hit the cache costs no write.
    await db.updateTable('api_keys').set({ last_used_at: nowIso() }).where('id', '=', row.id).execute();
    return value;
  }

  /**
   * Revokes a key (within `projectId` when given); true if it was live. The local cache forgets it
   * at once.
   */
  async function revoke(id: string, projectId?: string): Promise<boolean> {
    let query = db
      .updateTable('api_keys')
      .set({ revoked_at: nowIso() })
      .where('id', '=', id)
      .where('revoked_at', 'is', null);
    if (projectId !== undefined) query = query.where('project_id', '=', projectId);
    const row = await query.returning('key_hash').executeTakeFirst();
    forget(row?.key_hash);
    // The hash, not the key: it names the cache entry and is no secret.
    if (row) await options.notifications?.send(REVOKED, row.key_hash);
    return row !== undefined;
  }

  function forget(hash: string | undefined): void {
    revocations += 1;
    if (hash) cache.delete(hash);
  }

  /**
   * A server on PostgreSQL hears the revokes of the others, so a revoked key stops working on
   * every replica within moments, not after the cache's TTL (which still bounds it should a
   * message be lost while the listening connection reconnects). Resolves to the way to stop.
   */
  async function followRevocations(): Promise<() => Promise<void>> {
    if (!options.notifications) return async () => {};
    return options.notifications.listen(REVOKED, (hash) => forget(hash));
  }

  const infoColumns = ['id', 'project_id', 'role', 'key_prefix', 'created_at', 'revoked_at', 'last_used_at'] as const;
  const toInfo = (row: Pick<ApiKeysTable, (typeof infoColumns)[number]>): ApiKeyInfo => ({
    id: row.id,
    project_id: row.project_id,
    role: row.role,
    prefix: row.key_prefix,
    created_at: row.created_at,
    revoked_at: row.revoked_at,
    last_used_at: row.last_used_at,
  });

  /** Keys of a project for display; never the hash. */
  /** Oldest first (then by id); a window's limit reads one more, as toListPage expects. */
  async function list(projectId: string, window: ListWindow = {}): Promise<ApiKeyInfo[]> {
    let query = db.selectFrom('api_keys').select(infoColumns).where('project_id', '=', projectId);
    const { after, limit } = window;
    if (after) query = query.where((eb) => eb.or([eb('created_at', '>', after.key), eb.and([eb('created_at', '=', after.key), eb('id', '>', after.id)])]));
    if (limit !== undefined) query = query.limit(pageSize(limit) + 1);
    const rows = await query.orderBy('created_at').orderBy('id').execute();
    return rows.map(toInfo);
  }

  /** One key of the project for display, revoked or not. */
  async function get(projectId: string, id: string): Promise<ApiKeyInfo | undefined> {
    const row = await db.selectFrom('api_keys').select(infoColumns).where('project_id', '=', projectId).where('id', '=', id).executeTakeFirst();
    return row && toInfo(row);
  }

  return { create, verify, revoke, list, get, followRevocations };
}

export type ApiKeysRepo = ReturnType<typeof createApiKeysRepo>;
