/*
 * The little that code outside src/db may need to know of the database it runs on, as
 * properties and SQL pieces rather than a name to branch on. The one answer per
 * database is chosen from the Kysely instance (a transaction shares its database's),
 * so repository functions taking a database or a transaction need no extra argument.
 */
import { PostgresAdapter, sql, type Kysely, type RawBuilder } from 'kysely';

export type DialectName = 'sqlite' | 'postgres';

export interface SqlDialect {
  readonly name: DialectName;
  /**
   * Whether each query is a round trip to a server (PostgreSQL) rather than a call into
   * this process (SQLite): then one joined query is worth more than two plain ones.
   */
  readonly queriesAreRoundTrips: boolean;
  /** The larger of two values (SQL's GREATEST; SQLite's two-argument MAX). */
  greatest<T>(a: RawBuilder<T>, b: RawBuilder<T>): RawBuilder<T>;
}

const POSTGRES: SqlDialect = {
  name: 'postgres',
  queriesAreRoundTrips: true,
  greatest: (a, b) => sql`GREATEST(${a}, ${b})`,
};

const SQLITE: SqlDialect = {
  name: 'sqlite',
  queriesAreRoundTrips: false,
  greatest: (a, b) => sql`MAX(${a}, ${b})`,
};

/** The dialect of a database or transaction (sleeve runs on these two only). */
export function dialectOf(db: Kysely<any>): SqlDialect {
  return db.getExecutor().adapter instanceof PostgresAdapter ? POSTGRES : SQLITE;
}
