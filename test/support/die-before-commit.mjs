// Loaded with `node --import` into an agentd process under test: the process kills itself
// (SIGKILL, as `kill -9` or the OOM killer would) at the last moment before a chosen write becomes
// durable. AGENTD_TEST_DIE_AT is a regular expression matched against each statement's SQL and its
// parameters (JSON); on SQLite the process dies at the COMMIT of the group that holds the first
// statement matching it (sqlite-driver.ts commits several statements at once), on PostgreSQL
// before that statement is sent, since each one commits by itself there.
import { createRequire } from 'node:module';
import { StatementSync } from 'node:sqlite';

const pattern = process.env.AGENTD_TEST_DIE_AT ? new RegExp(process.env.AGENTD_TEST_DIE_AT, 'i') : undefined;
const die = () => process.kill(process.pid, 'SIGKILL');
const matches = (sql, parameters) => pattern.test(`${sql} ${JSON.stringify(parameters, (_, v) => (typeof v === 'bigint' ? String(v) : v))}`);

if (pattern) {
  let doomed = false;
  for (const method of ['run', 'all', 'get', 'iterate']) {
    const original = StatementSync.prototype[method];
    StatementSync.prototype[method] = function (...parameters) {
      if (doomed && /^\s*commit\b/i.test(this.sourceSQL)) die();
      if (matches(this.sourceSQL, parameters)) doomed = true;
      return original.apply(this, parameters);
    };
  }
  const pg = createRequire(import.meta.url)('pg');
  const query = pg.Client.prototype.query;
  pg.Client.prototype.query = function (config, values, callback) {
    const sql = typeof config === 'string' ? config : config?.text;
    if (typeof sql === 'string' && matches(sql, Array.isArray(values) ? values : (config?.values ?? []))) die();
    return query.call(this, config, values, callback);
  };
}
