import { PostgresAdapter, sql, type Kysely } from 'kysely';

// Frozen in time: this file imports nothing of sleeve's own.

/**
 * Client ID Metadata Documents (docs/decisions.md, "Client ID Metadata Documents: a row without
 * an owner"): a client whose client_id is the https URL of its document gets an
 * `oauth_application` row when a user first allows it, so that its grants, codes and tokens are
 * those of any application. Nobody registered it, so `owner_id` may be null (PostgreSQL drops the
 * NOT NULL; SQLite, which cannot, rebuilds the table as its manual says, with foreign keys off so
 * that the rows pointing at it stay). A code records the SHA-256 of the document it was issued
 * under (`document_hash`), so that a document changed before the exchange is noticed.
 */
export async function up(db: Kysely<any>): Promise<void> {
  if (isPostgres(db)) await sql`alter table oauth_application alter column owner_id drop not null`.execute(db);
  else await rebuildSqlite(db, false);
  await db.schema.alterTable('oauth_code').addColumn('document_hash', 'text').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('oauth_code').dropColumn('document_hash').execute();
  await db.deleteFrom('oauth_application').where('owner_id', 'is', null).execute();
  if (isPostgres(db)) await sql`alter table oauth_application alter column owner_id set not null`.execute(db);
  else await rebuildSqlite(db, true);
}

function isPostgres(db: Kysely<any>): boolean {
  return db.getExecutor().adapter instanceof PostgresAdapter;
}

/** SQLite's twelve steps (https://sqlite.org/lang_altertable.html#otheralter) for oauth_application with `owner_id` nullable or not. */
async function rebuildSqlite(db: Kysely<any>, ownerRequired: boolean): Promise<void> {
  await sql`pragma foreign_keys = off`.execute(db);
  try {
    await sql`begin`.execute(db);
    try {
      await sql`create table oauth_application_new (
        id integer primary key,
        owner_id integer ${sql.raw(ownerRequired ? 'not null ' : '')}references account (id) on delete cascade,
        name text not null,
        kind text not null check (kind in ('confidential', 'public')),
        client_id text not null unique,
        secret_hash text not null,
        redirect_uri text,
        created_at bigint not null,
        resource_server integer not null default 0,
        id_token_alg text not null default 'RS256',
        rotate_refresh integer not null default 0,
        require_dpop integer not null default 0
      )`.execute(db);
      const columns = sql.raw('id, owner_id, name, kind, client_id, secret_hash, redirect_uri, created_at, resource_server, id_token_alg, rotate_refresh, require_dpop');
      await sql`insert into oauth_application_new (${columns}) select ${columns} from oauth_application`.execute(db);
      await sql`drop table oauth_application`.execute(db);
      await sql`alter table oauth_application_new rename to oauth_application`.execute(db);
      await sql`create index oauth_application_idx_owner on oauth_application (owner_id)`.execute(db);
      const broken = await sql`pragma foreign_key_check`.execute(db);
      if (broken.rows.length > 0) throw new Error(`oauth_application rebuild: ${broken.rows.length} foreign keys no longer hold`);
      await sql`commit`.execute(db);
    } catch (err) {
      await sql`rollback`.execute(db);
      throw err;
    }
  } finally {
    await sql`pragma foreign_keys = on`.execute(db);
  }
}
