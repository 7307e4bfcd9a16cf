/*
 * The pure parts of observability: route labels of the cover art listener, the request id
 * rule, and the rendering of HTTP and import metrics (checked with the strict parser).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { coverArtRoute } from '../../src/cover-art/api/route-label.js';
import { RequestIds } from '../../src/http/request-id.js';
import { Exposition } from '../../src/metrics/exposition.js';
import { HttpMetrics } from '../../src/metrics/http-metrics.js';
import { renderImportMetrics } from '../../src/metrics/import-metrics.js';
import { answerKey } from '../../src/cover-art/index.js';
import { COVER_ART_ROUTES, countOf, parseScrape, valueOf } from './support.js';

const M = '76df3287-6cda-33eb-8e9a-044b5e15ffdd';

describe('cover art route labels', () => {
  const cases: [string, string][] = [
    ['/', '/'],
    ['//', '/'],
    ['/?x=1', '/'],
    ['/./', '/'],
    ['/robots.txt', '/robots.txt'],
    ['/robots.txt?x', '/robots.txt'],
    ['/robots.txt/x', 'other'],
    ['/api', '/api'],
    ['/api/anything/else', '/api'],
    ['/release', 'other'],
    ['/release/', 'other'],
    [`/release/${M}`, '/release/:mbid/'],
    [`/release/${M}/`, '/release/:mbid/'],
    [`/release/${M}/?fmt=json`, '/release/:mbid/'],
    [`/release/${M}?x=/y/z`, '/release/:mbid/'],
    [`/release/${M}/front`, '/release/:mbid/:image'],
    [`/release/${M}/front-250.jpg`, '/release/:mbid/:image'],
    [`/release/not-an-mbid/1234`, '/release/:mbid/:image'],
    [`//release//${M}//back`, '/release/:mbid/:image'],
    [`/./release/./${M}/./front`, '/release/:mbid/:image'],
    [`/release/${M}/front/extra/segments`, '/release/:mbid/:image'],
    [`/release/${M}//`, '/release/:mbid/'],
    [`/release/${M}/./`, '/release/:mbid/'],
    [`/release/${M}//front`, '/release/:mbid/:image'],
    [`/release/${M}/.front`, '/release/:mbid/:image'],
    [`/release//${M}`, '/release/:mbid/'],
    [`/release/./${M}/back`, '/release/:mbid/:image'],
    [`/release/${M}?a=/b/c`, '/release/:mbid/'],
    ['/release/?x', 'other'],
    ['/release//', 'other'],
    [`/release-group/${M}`, '/release-group/:mbid/'],
    [`/release-group/${M}//`, '/release-group/:mbid/'],
    [`/release/${M}/#frag`, '/release/:mbid/:image'],
    [`/release-group/${M}/`, '/release-group/:mbid/'],
    [`/release-group/${M}/front-500`, '/release-group/:mbid/:image'],
    ['/release-group', 'other'],
    ['/releases/x', 'other'],
    ['/releasex/x/y', 'other'],
    ['/RELEASE/x/y', 'other'],
    ['/download/mbid-x/index.json', '/download/*'],
    ['/download', 'other'],
    ['/healthz', '/healthz'],
    ['/readyz', '/readyz'],
    ['/healthz/x', 'other'],
    ['*', 'other'],
    ['http://example.com/release/x/y', 'other'],
    ['/event/x', 'other'],
    ['/%72elease/x/y', 'other'],
  ];
  for (const [url, want] of cases) {
    it(`${url} → ${want}`, () => {
      assert.equal(coverArtRoute(url), want);
      assert.ok(COVER_ART_ROUTES.includes(want));
    });
  }

  it('agrees with how the API reads paths (entity and segment count: its answers\' key), for paths that need no decoding', () => {
    for (const [url, want] of cases) {
      if (url.includes('%') || url === '*' || url.startsWith('http') || url.startsWith('/download/')) continue;
      const segments = answerKey(url).split('/').slice(1).filter((s) => s !== '');
      const [entity, , filename] = segments;
      if (entity === 'release' || entity === 'release-group') {
        const expected = segments.length < 2 ? 'other' : filename === undefined ? `/${entity}/:mbid/` : `/${entity}/:mbid/:image`;
        assert.equal(want, expected, url);
      }
    }
  });
});

describe('request id rule', () => {
  /** Whether a trusted proxy's X-Request-Id is kept as the request's id (docs/observability.md: 1–128 characters). */
  const kept = (ids: RequestIds, given: string): boolean => ids.assign({ headers: { 'x-request-id': given }, socket: { remoteAddress: '10.0.0.1' } }) === given;

  it('takes 1–128 characters of A–Z a–z 0–9 - _ . : / + = @ from a trusted proxy', () => {
    const ids = new RequestIds((address) => address === '10.0.0.1');
    for (const ok of ['a', 'A-b_c.d:e/f+g=h@i', '0f8fad5b-d9cb-469f-a165-70867728950e', 'x'.repeat(128)]) assert.equal(kept(ids, ok), true, ok);
    for (const bad of ['', 'x'.repeat(129), 'a b', 'a\tb', 'a"b', 'a,b', 'a;b', 'a\\b', 'é', 'a\nb', '<script>']) {
      assert.equal(kept(ids, bad), false, JSON.stringify(bad));
    }
    assert.equal(kept(new RequestIds(() => false), 'a'), false, 'not from a client that is not a trusted proxy');
  });

  it('makes ids unique in a process and different between processes (random prefix)', () => {
    const a = new RequestIds(() => false);
    const b = new RequestIds(() => false);
    const ids = new Set(Array.from({ length: 1000 }, () => a.next()));
    assert.equal(ids.size, 1000);
    const [pa] = a.next().split('-');
    const [pb] = b.next().split('-');
    assert.notEqual(pa, pb);
    // Each is an id a trusted proxy could have given (kept as it is when handed back).
    const proxy = new RequestIds(() => true);
    for (const id of ids) assert.equal(kept(proxy, id), true);
  });
});

describe('rendering', () => {
  it('HTTP metrics: counts by status, cumulative buckets, bounded labels, escaping', () => {
    const http = new HttpMetrics();
    const l = http.listener('coverart');
    l.record('/release/:mbid/:image', 'GET', 307, 0.00005);
    l.record('/release/:mbid/:image', 'GET', 307, 0.0003);
    l.record('/release/:mbid/:image', 'GET', 404, 0.02);
    l.record('/release/:mbid/:image', 'GET', 500, 30);
    l.record('/release/:mbid/:image', 'PROPFIND', 405, 0.001);
    l.record('we"ird\\route\n', 'GET', 200, 0.001);
    http.cacheHits = 5;
    http.rateLimited = 2;
    const out = new Exposition();
    http.render(out);
    const m = parseScrape(out.toString());
    const labels = { listener: 'coverart', route: '/release/:mbid/:image', method: 'GET' };
    assert.equal(valueOf(m, 'sleeve_http_requests_total', { ...labels, status: '307' }), 2);
    assert.equal(valueOf(m, 'sleeve_http_requests_total', { ...labels, status: '404' }), 1);
    assert.equal(valueOf(m, 'sleeve_http_requests_total', { ...labels, status: '500' }), 1);
    assert.equal(valueOf(m, 'sleeve_http_requests_total', { ...labels, method: 'other', status: '405' }), 1);
    assert.equal(valueOf(m, 'sleeve_http_request_duration_seconds_bucket', { ...labels, le: '0.0001' }), 1);
    assert.equal(valueOf(m, 'sleeve_http_request_duration_seconds_bucket', { ...labels, le: '0.0005' }), 2);
    assert.equal(valueOf(m, 'sleeve_http_request_duration_seconds_bucket', { ...labels, le: '0.025' }), 3);
    assert.equal(valueOf(m, 'sleeve_http_request_duration_seconds_bucket', { ...labels, le: '10' }), 3, '30 s is over the last bound');
    assert.equal(valueOf(m, 'sleeve_http_request_duration_seconds_bucket', { ...labels, le: '+Inf' }), 4);
    assert.equal(valueOf(m, 'sleeve_http_request_duration_seconds_count', labels), 4);
    assert.ok(Math.abs((valueOf(m, 'sleeve_http_request_duration_seconds_sum', labels) ?? 0) - 30.02035) < 1e-9);
    // One series per bound, 0.1 ms … 10 s (docs/observability.md), in order, then +Inf.
    const bounds = m.samples.filter((s) => s.name === 'sleeve_http_request_duration_seconds_bucket' && s.labels.method === 'GET' && s.labels.route === labels.route).map((s) => s.labels.le);
    assert.equal(bounds[0], '0.0001');
    assert.deepEqual(bounds.slice(-2), ['10', '+Inf']);
    assert.equal(new Set(bounds).size, bounds.length);
    assert.deepEqual(bounds.slice(0, -1).map(Number), bounds.slice(0, -1).map(Number).sort((a, b) => a - b));
    assert.equal(valueOf(m, 'sleeve_http_requests_total', { listener: 'coverart', route: 'we"ird\\route\n', method: 'GET', status: '200' }), 1, 'label values escaped and read back');
    assert.equal(countOf(m, 'sleeve_response_cache_total', { result: 'hit' }), 5);
    assert.equal(valueOf(m, 'sleeve_rate_limited_total'), 2);
  });

  it('HTTP metrics keep at most 64 routes per listener; more count as other', () => {
    const http = new HttpMetrics();
    const l = http.listener('auth');
    for (let i = 0; i < 100; i++) l.record(`/r${i}`, 'GET', 200, 0.001);
    const out = new Exposition();
    http.render(out);
    const m = parseScrape(out.toString());
    const routes = new Set(m.samples.filter((s) => s.name === 'sleeve_http_requests_total').map((s) => s.labels.route));
    assert.equal(routes.size, 65);
    assert.equal(valueOf(m, 'sleeve_http_requests_total', { listener: 'auth', route: 'other', method: 'GET', status: '200' }), 36);
  });

  it('import metrics, from a summary of runs', () => {
    const out = new Exposition();
    renderImportMetrics(out, { runs: { succeeded: 3, failed: 1, interrupted: 2 }, running: true, lastSuccessAt: 1_700_000_000_500, lastDurationMs: 65_000, lastRows: 1234 });
    const m = parseScrape(out.toString());
    assert.equal(valueOf(m, 'sleeve_import_runs_total', { result: 'succeeded' }), 3);
    assert.equal(valueOf(m, 'sleeve_import_runs_total', { result: 'failed' }), 1);
    assert.equal(valueOf(m, 'sleeve_import_runs_total', { result: 'interrupted' }), 2);
    assert.equal(valueOf(m, 'sleeve_import_running'), 1);
    assert.equal(valueOf(m, 'sleeve_import_last_success_timestamp_seconds'), 1_700_000_000.5);
    assert.equal(valueOf(m, 'sleeve_import_last_duration_seconds'), 65);
    assert.equal(valueOf(m, 'sleeve_import_last_success_rows_read'), 1234);
    const none = new Exposition();
    renderImportMetrics(none, { runs: { succeeded: 0, failed: 0, interrupted: 0 }, running: false, lastSuccessAt: undefined, lastDurationMs: undefined, lastRows: undefined });
    const n = parseScrape(none.toString());
    assert.equal(valueOf(n, 'sleeve_import_running'), 0);
    assert.equal(valueOf(n, 'sleeve_import_runs_total', { result: 'failed' }), 0);
    assert.equal(n.types.has('sleeve_import_last_success_timestamp_seconds'), false);
  });
});
