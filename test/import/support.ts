/* Helpers shared by the import tests. */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { loadConfig } from '../../src/config/load.js';
import type { TestEnv } from '../helpers/env.js';

const INT8_OID = 20;

/** Runs a query (`?` placeholders) against the env's database over a connection of its own; int8 as numbers. */
export async function query<T = Record<string, any>>(t: TestEnv, sql: string, params: unknown[] = []): Promise<T[]> {
  const cfg = loadConfig(t.env).database;
  if (cfg.kind === 'sqlite') {
    const { default: Sqlite } = await import('better-sqlite3');
    const db = new Sqlite(cfg.file, { readonly: true });
    try {
      return db.prepare(sql).all(...params) as T[];
    } finally {
      db.close();
    }
  }
  const client = new pg.Client({
    connectionString: cfg.url,
    types: {
      getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
        oid === INT8_OID ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
    },
  });
  await client.connect();
  try {
    let i = 0;
    return (await client.query(sql.replace(/\?/g, () => `$${++i}`), params)).rows as T[];
  } finally {
    await client.end();
  }
}

/** Lines in all files of a dump's mbdump/ folder: what an import of it reads. */
export async function dumpLines(dir: string): Promise<number> {
  const mb = path.join(dir, 'mbdump');
  let n = 0;
  for (const f of await readdir(mb)) {
    const text = await readFile(path.join(mb, f), 'utf8');
    if (text !== '') n += text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
  }
  return n;
}
