import { fileURLToPath } from 'node:url';

/** Whether DATABASE_URL (or a URL like it) names PostgreSQL. Apart from db.ts so that reading the settings loads no database driver. */
export const isPostgresUrl = (url: string | undefined): url is string => url !== undefined && /^postgres(ql)?:/i.test(url);

/** The SQLite file a non-PostgreSQL DATABASE_URL names; anything else is refused, saying what to write. */
export function sqlitePathFromUrl(url: string): string {
  if (url.startsWith('file://')) return fileURLToPath(url);
  for (const scheme of ['sqlite://', 'sqlite:', 'file:']) {
    if (url.startsWith(scheme)) {
      const rest = url.slice(scheme.length);
      if (rest === '') break;
      return rest;
    }
  }
  // Not echoed: a URL of another database may carry its password.
  throw new Error('DATABASE_URL is not one agentd reads: write sqlite:<path>, file:<path> or postgres://user:password@host:5432/db (or leave it unset for <AGENTD_DATA_DIR>/agentd.db)');
}
