import type { Compilable, CompiledQuery, Kysely, QueryResult } from 'kysely';
import { registerHotStatement, type SqliteStatements } from './connect.js';
import { batchStatements } from './write-batch.js';

const SENTINEL = '\u0000sleeve-param:';

/**
 * A query built and compiled once, then run with new parameter values: for the hot
 * paths, where building and compiling with Kysely would cost more than running the SQL.
 * `build` receives a placeholder for each name; those placeholders must be used as
 * values (not in identifiers or as limits), and each exactly where its value belongs.
 * The compiled form is kept per dialect, so a transaction of the same database shares it.
 */
export function preparedQuery<P extends string, R>(names: readonly P[], build: (db: Kysely<any>, params: Record<P, any>) => Compilable<R>) {
  const compiled = new Map<unknown, { query: CompiledQuery<R>; slots: (P | undefined)[] }>();
  function entryFor(db: Kysely<any>): { query: CompiledQuery<R>; slots: (P | undefined)[] } {
    const adapter = db.getExecutor().adapter.constructor;
    let entry = compiled.get(adapter);
    if (entry === undefined) {
      const params = Object.fromEntries(names.map((n) => [n, `${SENTINEL}${n}`])) as Record<P, string>;
      const query = build(db, params).compile();
      const slots = query.parameters.map((p) => (typeof p === 'string' && p.startsWith(SENTINEL) ? (p.slice(SENTINEL.length) as P) : undefined));
      for (const n of names) if (!slots.includes(n)) throw new Error(`prepared query does not use its parameter ${n}`);
      entry = { query, slots };
      compiled.set(adapter, entry);
      registerHotStatement(query.sql);
    }
    return entry;
  }
  function parametersOf(entry: { query: CompiledQuery<R>; slots: (P | undefined)[] }, values: Record<P, unknown>): unknown[] {
    return entry.query.parameters.map((p, i) => {
      const slot = entry.slots[i];
      return slot === undefined ? p : values[slot];
    });
  }
  async function run(db: Kysely<any>, values: Record<P, unknown>): Promise<QueryResult<R>> {
    const entry = entryFor(db);
    const parameters = parametersOf(entry, values);
    // In a write batch's open SQLite transaction the statement runs on the connection the batch
    // holds, as Kysely's SQLite driver would run it, without Kysely's executor, connection
    // provider and their promises around it (docs/decisions.md, "Token endpoint CPU: the batch's
    // statements run directly").
    const statements = batchStatements(db);
    if (statements !== undefined) return runOnSqlite<R>(statements, entry.query.sql, parameters);
    return db.executeQuery<R>({ ...entry.query, parameters });
  }
  /** The SQL text in `db`'s dialect and its parameters for `values`, for a caller that runs it itself (a read on the calling thread). */
  run.statement = (db: Kysely<any>, values: Record<P, unknown>): { sql: string; parameters: unknown[] } => {
    const entry = entryFor(db);
    return { sql: entry.query.sql, parameters: parametersOf(entry, values) };
  };
  return run;
}

/** What Kysely's SQLite driver (0.28) answers for a statement: its rows, or the changes and the last insert's rowid. */
function runOnSqlite<R>(statements: SqliteStatements, sql: string, parameters: readonly unknown[]): QueryResult<R> {
  const stmt = statements.prepare(sql);
  if (stmt.reader) return { rows: stmt.all(parameters) as R[] };
  const { changes, lastInsertRowid } = stmt.run(parameters);
  return { numAffectedRows: BigInt(changes), insertId: BigInt(lastInsertRowid), rows: [] };
}
