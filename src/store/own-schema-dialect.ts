import { PostgresDialect, sql, type DatabaseIntrospector, type DatabaseMetadataOptions, type Kysely, type SchemaMetadata, type TableMetadata } from 'kysely';
import { DEFAULT_MIGRATION_LOCK_TABLE, DEFAULT_MIGRATION_TABLE } from 'kysely/migration';

interface ColumnRow {
  table: string;
  kind: string;
  schema: string;
  column: string;
  type: string;
  type_schema: string;
  not_null: boolean;
  has_default: boolean;
  auto_incrementing: boolean;
  description: string | null;
}

/**
 * The tables of the connection's own schema (its `current_schema()`), which is all Kysely's
 * migrator asks about. Kysely's own PostgreSQL introspector lists every schema's tables and
 * resolves each one by name (`has_schema_privilege`, `pg_get_serial_sequence`), so a schema that
 * another client of the same server drops meanwhile fails the whole query, and with it agentd's
 * migration at start ("schema … does not exist", seen in CI, where test files drop their schemas
 * while others start). Here nothing outside agentd's schema is read, and nothing is resolved by name.
 */
class OwnSchemaIntrospector implements DatabaseIntrospector {
  readonly #db: Kysely<unknown>;
  readonly #inner: DatabaseIntrospector;

  constructor(db: Kysely<unknown>, inner: DatabaseIntrospector) {
    this.#db = db;
    this.#inner = inner;
  }

  getSchemas(): Promise<SchemaMetadata[]> {
    return this.#inner.getSchemas();
  }

  async getTables(options: DatabaseMetadataOptions = { withInternalKyselyTables: false }): Promise<TableMetadata[]> {
    const { rows } = await sql<ColumnRow>`
      select c.relname as "table", c.relkind as kind, ns.nspname as schema, a.attname as "column",
             typ.typname as type, dtns.nspname as type_schema, a.attnotnull as not_null, a.atthasdef as has_default,
             (a.attidentity <> '' or coalesce(pg_get_expr(ad.adbin, ad.adrelid) like 'nextval(%', false)) as auto_incrementing,
             col_description(a.attrelid, a.attnum) as description
      from pg_catalog.pg_attribute a
      join pg_catalog.pg_class c on c.oid = a.attrelid
      join pg_catalog.pg_namespace ns on ns.oid = c.relnamespace
      join pg_catalog.pg_type typ on typ.oid = a.atttypid
      join pg_catalog.pg_namespace dtns on dtns.oid = typ.typnamespace
      left join pg_catalog.pg_attrdef ad on ad.adrelid = a.attrelid and ad.adnum = a.attnum
      where ns.nspname = current_schema() and c.relkind in ('r', 'v', 'p', 'f') and a.attnum >= 0 and not a.attisdropped
      order by c.relname, a.attnum`.execute(this.#db);
    const tables = new Map<string, TableMetadata>();
    for (const row of rows) {
      if (!options.withInternalKyselyTables && (row.table === DEFAULT_MIGRATION_TABLE || row.table === DEFAULT_MIGRATION_LOCK_TABLE)) continue;
      let table = tables.get(row.table);
      if (!table) {
        table = { name: row.table, schema: row.schema, isView: row.kind === 'v', isForeign: row.kind === 'f', columns: [] };
        tables.set(row.table, table);
      }
      table.columns.push({
        name: row.column,
        dataType: row.type,
        dataTypeSchema: row.type_schema,
        isNullable: !row.not_null,
        hasDefaultValue: row.has_default,
        isAutoIncrementing: row.auto_incrementing,
        ...(row.description === null ? {} : { comment: row.description }),
      });
    }
    return [...tables.values()];
  }
}

/** Kysely's PostgreSQL dialect, introspecting agentd's own schema only (above). */
export class OwnSchemaPostgresDialect extends PostgresDialect {
  override createIntrospector(db: Kysely<any>): DatabaseIntrospector {
    return new OwnSchemaIntrospector(db, super.createIntrospector(db));
  }
}
