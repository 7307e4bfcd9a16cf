/* What the live-catalogue tests share: asking a server and reading its listings. */

/** A change must be answered within this (the promise is 60 s; the tests poll every 50 ms). */
export const SEEN_MS = 20_000;

export interface Answer {
  status: number;
  location: string | null;
  body: unknown;
}

/** What a server answers for `p`, its own address written as BASE; a redirect to its own listing followed. */
export async function answer(base: string, p: string): Promise<Answer> {
  const res = await fetch(`${base}${p}`, { redirect: 'manual', headers: { accept: 'application/json' } });
  const text = (await res.text()).split(base).join('BASE');
  const location = res.headers.get('location')?.split(base).join('BASE') ?? null;
  let body: unknown = text;
  if (res.status === 200 && text.startsWith('{')) body = JSON.parse(text);
  if (res.status === 307 && location?.endsWith('/index.json') === true && location.startsWith('BASE')) {
    const listing = await fetch(location.replace('BASE', base));
    body = { listing: listing.status, json: listing.status === 200 ? JSON.parse((await listing.text()).split(base).join('BASE')) : null };
  }
  return { status: res.status, location, body };
}

/** A release's or an event's listing as the server's redirect leads to it (undefined when there is none). */
export async function listingOf(base: string, entity: 'release' | 'event', mbid: string): Promise<any> {
  const a = await answer(base, `/${entity}/${mbid}/`);
  return (a.body as { json?: any })?.json;
}

/** The image ids of a listing, in its order. */
export const ids = (l: any): number[] => (l?.images ?? []).map((i: any) => Number(i.id));
