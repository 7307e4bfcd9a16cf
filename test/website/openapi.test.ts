/*
 * The OpenAPI document against the real answers: it is OpenAPI 3.1 in structure (its
 * references resolve, every operation documents its answers), every path called here is in
 * it, and each JSON answer validates against the schema documented for its status (ajv,
 * JSON Schema 2020-12, as OpenAPI 3.1 uses).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { addApp, addUser, Browser, request } from '../helpers/auth.js';
import { cliInProcess, DIALECT, makeTestEnv, pollUntil, type TestEnv } from '../helpers/env.js';
import { makeJpeg } from '../helpers/images.js';
import { signIn } from '../auth/support.js';
import { call, multipart, REDIRECT_URI, startSite, toolToken, type Site } from './support.js';

const RELEASE = '33333333-2222-4333-8444-555555555501';
const GROUP = '33333333-2222-4333-8444-5555555555a1';
const EVENT = '33333333-2222-4333-8444-5555555555e1';

type Doc = {
  openapi: string;
  info: { title: string; version: string };
  servers: { url: string }[];
  paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema: object }> }> }>>;
  components: { schemas: Record<string, object> };
};

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'];

describe(`the OpenAPI document (${DIALECT})`, () => {
  let t: TestEnv;
  let site: Site;
  let alice: Browser;
  let app: { client_id: string; client_secret: string };
  let doc: Doc;
  let ajv: Ajv2020;
  const called = new Set<string>();

  /** The documented path template that `pathname` matches on `origin`. */
  function templateOf(origin: string, pathname: string): string {
    const candidates = Object.keys(doc.paths).filter((tpl) => {
      const re = new RegExp(`^${tpl.replace(/[.]/g, '\\.').replace(/\{[^}]+\}/g, '[^/]+')}$`);
      return re.test(pathname);
    });
    // A literal path wins over a templated one, as OpenAPI says.
    const tpl = candidates.sort((a, b) => (a.match(/\{/g)?.length ?? 0) - (b.match(/\{/g)?.length ?? 0))[0];
    assert.ok(tpl !== undefined, `${pathname} is not in the document`);
    const pathItem = doc.paths[tpl] as { servers?: { url: string }[] };
    const servers = pathItem.servers ?? doc.servers;
    assert.ok(servers.some((s) => s.url === origin), `${pathname}: ${origin} is among its servers`);
    return tpl;
  }

  /** Checks a real answer against the document: its status documented, its JSON body valid. */
  function check(url: string, method: string, status: number, body: string): void {
    const { origin, pathname } = new URL(url);
    const tpl = templateOf(origin, pathname);
    called.add(`${method} ${tpl}`);
    const op = doc.paths[tpl]?.[method.toLowerCase()];
    assert.ok(op !== undefined, `${method} ${tpl} is documented`);
    const answer = op.responses[String(status)];
    assert.ok(answer !== undefined, `${method} ${tpl}: status ${status} is documented`);
    const schema = answer.content?.['application/json']?.schema;
    if (schema === undefined) return;
    const validate = ajv.compile(schema);
    assert.ok(validate(JSON.parse(body)), `${method} ${tpl} ${status}: ${ajv.errorsText(validate.errors)}\n${body.slice(0, 400)}`);
  }

  before(async () => {
    // Sizes and formats beyond the interface's: the listings then carry thumbnail_formats, and the redirects Vary.
    t = await makeTestEnv({ SLEEVE_THUMBNAIL_SIZES: '250,500,600,1200', SLEEVE_THUMBNAIL_FORMATS: 'jpeg,webp,avif' });
    site = await startSite(t);
    await addUser(t, 'alice');
    app = await addApp(t, 'alice', 'confidential', REDIRECT_URI, 'Documented tool');
    await cliInProcess(t.env, ['release', 'add', RELEASE, '--release-group', GROUP]);
    await cliInProcess(t.env, ['event', 'add', EVENT]);
    alice = await signIn(site.web, 'alice');
    const res = await request(`${site.web}/api/openapi.json`);
    assert.equal(res.status, 200);
    doc = res.json();
    // The document's schemas, reachable from each response schema by its own references.
    const rebased = JSON.parse(JSON.stringify(doc).replaceAll('"#/components/schemas/', '"openapi.json#/components/schemas/')) as Doc;
    doc = rebased;
    ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true });
    ajv.addSchema({ $id: 'openapi.json', $defs: {}, components: rebased.components } as object);
  });

  after(async () => {
    await site?.server.close();
    await t?.cleanup();
  });

  it('is OpenAPI 3.1 in structure: info, servers for both listeners, operations with answers, references that resolve', () => {
    assert.equal(doc.openapi, '3.1.0');
    assert.equal(typeof doc.info.title, 'string');
    assert.equal(typeof doc.info.version, 'string');
    assert.deepEqual(doc.servers.map((s) => s.url).sort(), [site.web, site.art].sort());
    const ids = new Set<string>();
    for (const [p, item] of Object.entries(doc.paths)) {
      assert.match(p, /^\//);
      for (const [method, op] of Object.entries(item)) {
        if (method === 'servers' || method === 'summary' || method === 'description' || method === 'parameters') continue;
        assert.ok(METHODS.includes(method), `${p}: ${method}`);
        const o = op as { operationId?: string; responses: object; parameters?: { in: string; name: string }[] };
        assert.ok(o.operationId !== undefined && !ids.has(o.operationId), `${p} ${method}: a unique operationId`);
        ids.add(o.operationId);
        assert.ok(Object.keys(o.responses).length > 0);
        // Every path template parameter is declared.
        for (const name of p.match(/\{([^}]+)\}/g) ?? []) assert.ok(o.parameters?.some((x) => x.in === 'path' && `{${x.name}}` === name), `${p} ${method} declares ${name}`);
      }
    }
    const refs = JSON.stringify(doc).match(/"openapi\.json#\/components\/schemas\/[^"]+"/g) ?? [];
    assert.ok(refs.length > 0);
    for (const r of refs) assert.ok(r.slice('"openapi.json#/components/schemas/'.length, -1) in doc.components.schemas, r);
    for (const [name, schema] of Object.entries(doc.components.schemas)) assert.doesNotThrow(() => ajv.compile(schema), name);
  });

  it('the real answers of the write API, the OAuth endpoints and the cover art API validate against it', async () => {
    const tok = await toolToken(site, alice, app, 'cover_art profile');
    const auth = { authorization: `Bearer ${tok}` };
    const api = `${site.web}/api/cover-art`;
    const go = async (url: string, opts: Parameters<typeof call>[1] = {}) => {
      const res = await call(url, opts);
      check(url, opts.method ?? (opts.body === undefined && opts.json === undefined ? 'GET' : 'POST'), res.status, res.body);
      return res;
    };

    await go(`${api}/release/${RELEASE}/images`, { headers: auth });
    const m = multipart([{ name: 'file', value: await makeJpeg(300, 300), filename: 'a.jpg' }, { name: 'types', value: 'Front' }]);
    const added = await go(`${api}/release/${RELEASE}/images`, { method: 'POST', headers: { ...auth, 'content-type': m.type }, body: m.body });
    assert.equal(added.status, 201);
    const id = added.json().id as string;
    const m2 = multipart([{ name: 'file', value: Buffer.from('nope'), filename: 'b.jpg' }]);
    assert.equal((await go(`${api}/release/${RELEASE}/images`, { method: 'POST', headers: { ...auth, 'content-type': m2.type }, body: m2.body })).status, 400);
    assert.equal((await go(`${api}/release/${RELEASE}/images/${id}`, { headers: auth })).status, 200);
    assert.equal((await go(`${api}/release/${RELEASE}/images/${id}`, { method: 'PATCH', headers: auth, json: { comment: 'documented' } })).status, 200);
    // Edit notes: given back with the change (the answers' documented edit_note), refused beyond their bound.
    const noted = await go(`${api}/release/${RELEASE}/images/${id}`, { method: 'PATCH', headers: auth, json: { comment: 'noted', edit_note: ' why ' } });
    assert.equal(noted.json().edit_note, 'why');
    assert.equal((await go(`${api}/release/${RELEASE}/images/${id}`, { method: 'PATCH', headers: auth, json: { comment: 'x', edit_note: 'x'.repeat(2001) } })).status, 400);
    const m3 = multipart([{ name: 'file', value: await makeJpeg(120, 120), filename: 'n.jpg' }, { name: 'edit_note', value: 'scanned' }]);
    const withNote = await go(`${api}/release/${RELEASE}/images`, { method: 'POST', headers: { ...auth, 'content-type': m3.type }, body: m3.body });
    assert.equal(withNote.json().edit_note, 'scanned');
    assert.equal((await go(`${api}/release/${RELEASE}/images/${withNote.json().id}`, { method: 'DELETE', headers: { ...auth, 'content-length': '22' }, json: { edit_note: 'a test' } })).status, 204);
    assert.equal((await go(`${api}/release/${RELEASE}/images/${id}`, { method: 'PATCH', headers: { ...auth, 'if-match': '"x"' }, json: { comment: 'x' } })).status, 409);
    assert.equal((await go(`${api}/release/${RELEASE}/order`, { method: 'PUT', headers: auth, json: { images: [id], edit_note: 'one' } })).json().edit_note, 'one');
    assert.equal((await go(`${api}/release/${RELEASE}/order`, { method: 'PUT', headers: auth, json: { images: [] } })).status, 400);
    assert.equal((await go(`${api}/release-group/${GROUP}/cover`, { method: 'PUT', headers: auth, json: { release: RELEASE, edit_note: 'chosen' } })).json().edit_note, 'chosen');
    assert.equal((await go(`${api}/release/${RELEASE}/images`)).status, 401);

    // An event's images (the Event Art Archive), through the same write API.
    const events = `${site.web}/api/event-art/event/${EVENT}`;
    assert.equal((await go(`${events}/images`, { headers: auth })).status, 200);
    const poster = multipart([{ name: 'file', value: await makeJpeg(200, 300), filename: 'p.jpg' }, { name: 'types', value: 'Poster' }, { name: 'edit_note', value: 'from the venue' }]);
    const posted = await go(`${events}/images`, { method: 'POST', headers: { ...auth, 'content-type': poster.type }, body: poster.body });
    assert.equal(posted.status, 201, posted.body);
    const eid = posted.json().id as string;
    assert.equal((await go(`${events}/images/${eid}`, { headers: auth })).status, 200);
    assert.equal((await go(`${events}/images/${eid}`, { method: 'PATCH', headers: auth, json: { comment: 'the poster', edit_note: 'typo' } })).status, 200);
    assert.equal((await go(`${events}/images/${eid}`, { method: 'PATCH', headers: auth, json: { types: ['Front'] } })).status, 400);
    assert.equal((await go(`${events}/order`, { method: 'PUT', headers: auth, json: { images: [eid], edit_note: 'one' } })).status, 200);
    assert.equal((await go(`${events}/order`, { method: 'PUT', headers: { ...auth, 'if-match': '"x"' }, json: { images: [eid] } })).status, 409);
    const second = multipart([{ name: 'file', value: await makeJpeg(120, 120), filename: 'q.jpg' }]);
    const other = await go(`${events}/images`, { method: 'POST', headers: { ...auth, 'content-type': second.type }, body: second.body });
    assert.equal((await go(`${events}/images/${other.json().id}`, { method: 'DELETE', headers: auth })).status, 204);
    assert.equal((await go(`${site.web}/api/event-art/event/${GROUP}/images`, { headers: auth })).status, 404);
    assert.equal((await go(`${site.web}/oauth2/userinfo`, { headers: auth })).status, 200);
    assert.equal((await go(`${site.web}/.well-known/oauth-authorization-server`)).status, 200);
    assert.equal((await go(`${site.web}/.well-known/openid-configuration`)).status, 200);
    assert.equal((await go(`${site.web}/.well-known/jwks.json`)).status, 200);
    assert.equal((await go(`${site.web}/api/openapi.json`)).status, 200);
    const form = (f: Record<string, string>) => ({ method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(f).toString() });
    const creds = { client_id: app.client_id, client_secret: app.client_secret };
    const intro = await go(`${site.web}/oauth2/introspect`, form({ token: tok, ...creds }));
    assert.equal(intro.json().active, true);
    assert.equal((await go(`${site.web}/oauth2/token`, form({ grant_type: 'authorization_code', code: 'nope', redirect_uri: REDIRECT_URI, ...creds }))).status, 400);
    assert.equal((await go(`${site.web}/oauth2/revoke`, form({ token: tok, ...creds }))).status, 200);
    assert.equal((await go(`${site.web}/oauth2/userinfo`, { headers: auth })).status, 401);
    const authorize = await go(`${site.web}/oauth2/authorize?${new URLSearchParams({ client_id: app.client_id, response_type: 'code', redirect_uri: REDIRECT_URI, scope: 'cover_art' })}`);
    assert.equal(authorize.status, 200);
    assert.equal((await go(`${site.web}/api/cover-art/release/${RELEASE}/images/${id}`, { method: 'DELETE', headers: { authorization: `Bearer ${await toolToken(site, alice, app, 'cover_art')}` } })).status, 204);

    // The cover art API, on its own listener.
    const art = async (pathname: string) => {
      const res = await fetch(`${site.art}${pathname}`, { redirect: 'manual', headers: { accept: 'application/json' } });
      const body = await res.text();
      check(`${site.art}${pathname}`, 'GET', res.status, body);
      return res.status;
    };
    const again = multipart([{ name: 'file', value: await makeJpeg(200, 200), filename: 'c.jpg' }, { name: 'types', value: 'Front' }]);
    const tok2 = await toolToken(site, alice, app, 'cover_art');
    assert.equal((await call(`${api}/release/${RELEASE}/images`, { method: 'POST', headers: { authorization: `Bearer ${tok2}`, 'content-type': again.type }, body: again.body })).status, 201);
    assert.equal(await art(`/release/${RELEASE}/`), 307);
    assert.equal(await art(`/release/${RELEASE}/front-250`), 307);
    assert.equal(await art(`/release-group/${GROUP}/`), 200);
    assert.equal(await art(`/release-group/${GROUP}/front`), 307);
    assert.equal(await art(`/release/not-an-mbid/`), 400);
    assert.equal(await art(`/event/${EVENT}/`), 307);
    assert.equal(await art(`/event/${EVENT}/front-250`), 307);
    assert.equal(await art(`/event/${EVENT}/back`), 400);
    assert.equal(await art(`/event/${GROUP}/`), 404);

    // Sizes and formats beyond the interface's (SLEEVE_THUMBNAIL_SIZES, SLEEVE_THUMBNAIL_FORMATS).
    const webp = await fetch(`${site.art}/release/${RELEASE}/front-600`, { redirect: 'manual', headers: { accept: 'image/webp,*/*;q=0.8' } });
    check(`${site.art}/release/${RELEASE}/front-600`, 'GET', webp.status, await webp.text());
    assert.equal(webp.status, 307);
    assert.match(String(webp.headers.get('location')), /_thumb600\.webp$/);
    assert.equal(webp.headers.get('vary'), 'Accept');
    const documented = doc.paths['/release/{mbid}/{image}']?.get?.responses['307'] as { headers?: Record<string, unknown> };
    assert.ok(documented.headers?.Vary !== undefined, 'the redirect documents Vary');
    // A 600 px JPEG made on demand: the listing then names its dimensions, and its formats.
    const jpeg600 = await fetch(`${site.art}/release/${RELEASE}/front-600`);
    assert.equal(jpeg600.status, 200);
    await jpeg600.arrayBuffer();
    const groupListing = async (): Promise<any> => (await fetch(`${site.art}/release-group/${GROUP}/`, { headers: { accept: 'application/json' } })).json();
    const { value: listed } = await pollUntil(groupListing, (l) => l.images[0]?.thumbnail_dimensions?.['600'] !== undefined, 10_000);
    assert.deepEqual(listed.images[0].thumbnail_formats, ['jpeg', 'webp', 'avif']);
    assert.deepEqual(listed.images[0].thumbnail_dimensions['600'], { width: 200, height: 200 });
    assert.equal(await art(`/release-group/${GROUP}/`), 200);

    // Every operation of the write API was called, and every read path of both archives.
    const write = (prefix: string) => [`GET ${prefix}/images`, `POST ${prefix}/images`, `GET ${prefix}/images/{id}`, `PATCH ${prefix}/images/{id}`, `DELETE ${prefix}/images/{id}`, `PUT ${prefix}/order`];
    const read = ['/release/{mbid}/', '/release/{mbid}/{image}', '/release-group/{mbid}/', '/release-group/{mbid}/{image}', '/event/{mbid}/', '/event/{mbid}/{image}'].map((p) => `GET ${p}`);
    for (const op of [...write('/api/cover-art/release/{mbid}'), ...write('/api/event-art/event/{mbid}'), 'PUT /api/cover-art/release-group/{mbid}/cover', ...read]) {
      assert.ok(called.has(op), op);
    }
  });
});
