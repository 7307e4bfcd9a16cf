/*
 * `sleeve keys list` and `sleeve keys rotate`: the keys the authorization service signs
 * id_tokens with (auth/signing-keys.ts; docs/cli.md, "Signing keys"). Neither ever prints a
 * private key: only kids, algorithms, states and times.
 */
import type { KeyInfo } from '../auth/index.js';
import type { Runtime } from '../runtime.js';
import { invalidInput } from '../shared/errors.js';
import { openExisting, type Command, type CommandContext } from './command.js';
import { isoTime, table } from './list-commands.js';

async function withKeys<T>(ctx: CommandContext, usage: string, fn: (rt: Runtime) => Promise<T>): Promise<T> {
  if (ctx.args.length !== 0) throw invalidInput(`usage: sleeve ${usage}`);
  const rt = await openExisting(ctx);
  try {
    return await fn(rt);
  } finally {
    await rt.close();
  }
}

const timeOrNull = (ms: number | null): string | null => (ms === null ? null : isoTime(ms));

function shown(k: KeyInfo) {
  return { kid: k.kid, alg: k.alg, state: k.state, created: isoTime(k.createdAt), retired: timeOrNull(k.retiredAt), expires: timeOrNull(k.expiresAt) };
}

const keysList: Command = {
  name: 'keys list',
  async run(ctx) {
    const keys = (await withKeys(ctx, 'keys list', (rt) => rt.auth.signingKeys.list())).map(shown);
    const human =
      keys.length === 0
        ? 'no signing keys (the authorization listener makes them when it first starts)'
        : table([['KID', 'ALG', 'STATE', 'CREATED', 'RETIRED', 'EXPIRES'], ...keys.map((k) => [k.kid, k.alg, k.state, k.created ?? '-', k.retired ?? '-', k.expires ?? '-'])]);
    ctx.out(human, { keys });
    return 0;
  },
};

const keysRotate: Command = {
  name: 'keys rotate',
  async run(ctx) {
    const active = (await withKeys(ctx, 'keys rotate', (rt) => rt.auth.signingKeys.rotate())).map(shown);
    ctx.out(active.map((k) => `new ${k.alg} key ${k.kid}`).join('\n'), { keys: active });
    return 0;
  },
};

/** The key commands by name, merged with the others' in main.ts. */
export const KEYS_COMMANDS: Record<string, Command> = Object.fromEntries([keysList, keysRotate].map((c) => [c.name, c]));
