import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { isStoreUnavailable } from '../../shared/errors.js';
import { answerKey, handleApiRequest, hostArchive } from './api.js';
import type { CoverArtRouteDeps } from '../deps.js';
import { keyForDownloadPath, serveFile, storeUnavailableResponse, type FileResponse } from '../files/file-server.js';
import { chooseVariant, etagMatches, notModified, type ApiResponse } from './responses.js';

function header(req: FastifyRequest, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v.join(', ') : v;
}

/** Sends an ApiResponse, answering a matching If-None-Match with 304. */
export function sendApiResponse(reply: FastifyReply, response: ApiResponse, ifNoneMatch: string | undefined): FastifyReply {
  const out = etagMatches(ifNoneMatch, response.headers.etag) ? notModified(response) : response;
  return reply.code(out.status).headers(out.headers).send(out.body);
}

/** The cover art API and the file server, as a Fastify plugin. */
export async function coverArtRoutes(app: FastifyInstance, deps: CoverArtRouteDeps): Promise<void> {
  // Request bodies mean nothing here; accept any type and ignore it (the method decides the answer).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, function ignoreBody(_req, _body, done) {
    done(null, undefined);
  });

  if (deps.files !== undefined) {
    const store = deps.files.store;
    // Every method: the file server answers those it does not serve with 405.
    app.all('/download/*', async function downloadFile(req, reply) {
      const rest = req.url.slice('/download/'.length);
      let res: FileResponse;
      try {
        res = await serveFile(store, keyForDownloadPath(rest), req.method, {
          ifNoneMatch: header(req, 'if-none-match'),
          ifModifiedSince: header(req, 'if-modified-since'),
          range: header(req, 'range'),
          ifRange: header(req, 'if-range'),
        });
      } catch (err) {
        if (!isStoreUnavailable(err)) throw err;
        req.log.warn({ err }, 'file store unavailable');
        res = storeUnavailableResponse();
      }
      reply.code(res.status).headers(res.headers);
      // No body (HEAD, 304) is sent as none: an empty string would make Fastify add a charset to the type.
      return reply.send(res.body);
    });
  }

  app.route({
    method: ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'],
    url: '*',
    handler: async function coverArtApi(req, reply) {
      const generation = deps.cache.generation;
      // Kept whole (a thumbnail redirect with its other formats), answered as this request's Accept chooses.
      const whole = await handleApiRequest(deps.api, {
        method: req.method,
        url: req.url,
        httpVersion: req.raw.httpVersion,
        accept: header(req, 'accept'),
        host: header(req, 'host'),
      });
      const response = chooseVariant(whole, header(req, 'accept'));
      if (req.method === 'GET' || req.method === 'HEAD') {
        const key = answerKey(req.url);
        // Never under a file's key: the front door sends those to the file server. The cache is
        // the Cover Art Archive's (keyed on the path alone): other hosts' answers are not kept.
        if (!key.startsWith('/download/') && hostArchive(header(req, 'host'), deps.api.eventHost) === 'cover') deps.cache.set(key, whole, generation);
        if (deps.imageBytes === true && deps.files !== undefined && response.imageKey !== undefined) {
          // SLEEVE_IMAGE_RESPONSE=bytes: the file itself, answered by the file server on the raw response.
          reply.hijack();
          deps.files.answerImage(req.raw, reply.raw, response.imageKey, response.headers['cache-control'], req.headers['x-request-id'] as string, req.log);
          return reply;
        }
      }
      return sendApiResponse(reply, response, header(req, 'if-none-match'));
    },
  });

  // Only methods no route lists get here (TRACE, SEARCH, PROPFIND…): the API answers
  // them too, so its endpoints say 405 (as the interface asks) rather than 404.
  app.setNotFoundHandler(async function otherMethod(req, reply) {
    const response = await handleApiRequest(deps.api, {
      method: req.method,
      url: req.url,
      httpVersion: req.raw.httpVersion,
      accept: header(req, 'accept'),
      host: header(req, 'host'),
    });
    return sendApiResponse(reply, response, undefined);
  });
}
