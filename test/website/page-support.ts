/*
 * Helpers of the website tests: sleeve with both listeners (the website on HTTPS, the cover
 * art API and its file server on HTTP), releases and art loaded through the cover art domain.
 */
import { randomUUID } from 'node:crypto';
import { loadConfig } from '../../src/config/load.js';
import { addImageTo, addRelease, EVENT_ART, RELEASE_ART, type ArtEntity } from '../../src/cover-art/index.js';
import { addEvent } from '../../src/cover-art/catalogue/events.js';
import { serve, type Server } from '../../src/serve.js';
import { makeJpeg, makePng } from '../helpers/images.js';
import { freePort, type TestEnv } from '../helpers/env.js';

export interface Site {
  server: Server;
  /** https://127.0.0.1:PORT: the website. */
  base: string;
  /** http://127.0.0.1:PORT: the cover art API, SLEEVE_BASE_URL (and its /download the image base). */
  api: string;
}

export async function startSite(t: TestEnv): Promise<Site> {
  const [authPort, apiPort] = [await freePort(), await freePort()];
  const base = `https://127.0.0.1:${authPort}`;
  const api = `http://127.0.0.1:${apiPort}`;
  Object.assign(t.env, { SLEEVE_AUTH_LISTEN: `127.0.0.1:${authPort}`, SLEEVE_AUTH_URL: base, SLEEVE_COVERART_LISTEN: `127.0.0.1:${apiPort}`, SLEEVE_BASE_URL: api });
  const server = await serve(loadConfig(t.env));
  return { server, base, api };
}

/** A new release (in a new group unless given) with a title and date. */
export async function release(site: Site, opts: { group?: string; title?: string; date?: string } = {}): Promise<{ mbid: string; group: string }> {
  const mbid = randomUUID();
  const group = opts.group ?? randomUUID();
  await addRelease(site.server.runtime.coverArt, { mbid, releaseGroup: group, title: opts.title ?? `Album ${mbid.slice(0, 4)}`, date: opts.date });
  // As a command's change reaches the serving processes before it returns.
  await site.server.refreshCaches();
  return { mbid, group };
}

/** A new event of the Event Art Archive, with a name. */
export async function event(site: Site, name: string): Promise<string> {
  const mbid = randomUUID();
  await addEvent(site.server.runtime.coverArt, { mbid, name });
  await site.server.refreshCaches();
  return mbid;
}

/** Adds an image (a JPEG of the size given, or a PNG) to a release, or to an event (`event`), as the operator; returns its id. */
export async function art(
  site: Site,
  mbid: string,
  opts: { types?: string[]; comment?: string; width?: number; height?: number; png?: boolean; edit?: number; approved?: boolean; event?: boolean } = {},
): Promise<string> {
  const [w, h] = [opts.width ?? 320, opts.height ?? 300];
  const bytes = opts.png === true ? await makePng(w, h) : await makeJpeg(w, h);
  const entity: ArtEntity = opts.event === true ? EVENT_ART : RELEASE_ART;
  const entry = await addImageTo(site.server.runtime.coverArt, entity, mbid, { bytes, types: opts.types, comment: opts.comment, edit: opts.edit, approved: opts.approved ?? true });
  await site.server.refreshCaches();
  return entry.id;
}
