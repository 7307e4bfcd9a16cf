import type { FastifyInstance } from 'fastify';
import { EDIT_NOTE_MAX_LENGTH } from '../cover-art/index.js';
import { COMMENT_MAX_LENGTH } from './changes.js';
import type { WebsiteDeps } from './deps.js';
import { EVENT_PAGES, RELEASE_PAGES, type SiteEntity } from './entities.js';

/*
 * The OpenAPI 3.1 description of sleeve's public HTTP API: the cover art read API and the Event
 * Art Archive's (on the cover art listener), the write API for tools (a release's images and an
 * event's) and the OAuth 2.0 / OpenID Connect endpoints (on the website's listener). Served at
 * /api/openapi.json; the tests check real answers against its schemas.
 */

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const json = (schema: object, description: string) => ({ description, content: { 'application/json': { schema } } });
const apiError = (description: string) => json(ref('ApiError'), description);
const oauthError = (description: string) => json(ref('OAuthError'), description);
const mbid = (name = 'mbid', what = 'release') => ({ name, in: 'path', required: true, description: `The ${what}'s MBID`, schema: { type: 'string', format: 'uuid' } });
const imageId = { name: 'id', in: 'path', required: true, description: 'The image id, in its one spelling (no leading zeros)', schema: { type: 'string', pattern: '^(0|[1-9][0-9]{0,15})$' } };
const ifMatch = {
  name: 'If-Match',
  in: 'header',
  required: false,
  description: 'The ETag of the listing the change is based on; when it no longer matches, the answer is 409 conflict',
  schema: { type: 'string' },
};
/** An image's comment: as long as the website's forms take, at most. */
const COMMENT = { type: 'string', maxLength: COMMENT_MAX_LENGTH };
/** The editor's note on a change, stored with its edit (trimmed; the upload page's edit note). */
const EDIT_NOTE = {
  type: 'string',
  maxLength: EDIT_NOTE_MAX_LENGTH,
  description: `Why the change is made, stored with its edit as the upload page's edit note: trimmed, at most ${EDIT_NOTE_MAX_LENGTH} characters once trimmed (400 beyond); shown with the edit (pending edits, the website's edit pages)`,
};
const redirect = (description: string) => ({ description, headers: { Location: { schema: { type: 'string', format: 'uri' } } } });
const formBody = (properties: Record<string, object>, required: string[]) => ({
  required: true,
  content: { 'application/x-www-form-urlencoded': { schema: { type: 'object', properties, required } } },
});

/** The write API's refusals of a token (RFC 6750), common to every operation. */
const TOKEN_REFUSALS = {
  '401': { ...apiError('No token, or a token invalid, expired or revoked (invalid_token); a DPoP-bound token without a valid proof (invalid_token, invalid_dpop_proof); WWW-Authenticate carries the challenge'), headers: { 'WWW-Authenticate': { schema: { type: 'string' } } } },
  '403': { ...apiError('The token lacks the cover_art scope (insufficient_scope)'), headers: { 'WWW-Authenticate': { schema: { type: 'string' } } } },
};

/** What the thumbnail redirects do beyond the interface's three JPEG sizes (docs/file-serving.md, "Sizes and formats made on demand"). */
const THUMBNAIL_NOTE =
  'Besides 250, 500 and 1200, the sizes the operator allows (SLEEVE_THUMBNAIL_SIZES, e.g. 100,250,300,500,600,1200,2000) are answered the same way: ' +
  '-600 is a 307 to …_thumb600.jpg, made on its first request, never upscaled. Any other size keeps the real service\'s answer. ' +
  'With WebP or AVIF on (SLEEVE_THUMBNAIL_FORMATS), a thumbnail redirect whose Accept prefers image/webp or image/avif (q-values honoured; q=0 refuses) ' +
  'goes to …_thumb{N}.webp or .avif, and every such answer, the JPEG one too, carries Vary: Accept; -600.webp or -600.avif in the path asks for that format whatever Accept says. ' +
  'With the defaults every answer is the interface\'s, without Vary.';
const IMAGE_NAME = 'front, back, or an id; optionally -250, -500, -1200 or an allowed size (SLEEVE_THUMBNAIL_SIZES), and .webp or .avif when that format is on';
const thumbnailRedirect = {
  description: 'To the image file (a thumbnail in the format chosen by Accept when WebP or AVIF is on)',
  headers: {
    Location: { schema: { type: 'string', format: 'uri' } },
    Vary: { description: 'Accept, on a thumbnail redirect when SLEEVE_THUMBNAIL_FORMATS names WebP or AVIF (the answer then depends on Accept); absent otherwise', schema: { type: 'string' } },
  },
};

function coverArtReadPaths(server: { url: string }[]): Record<string, object> {
  const common = { servers: server };
  const tags = ['Cover art (read)'];
  return {
    '/release/{mbid}/': {
      ...common,
      get: {
        operationId: 'getReleaseListing',
        tags,
        summary: "A release's listing: a redirect to its index.json",
        parameters: [mbid()],
        responses: { '307': redirect('To the listing (index.json)'), '400': { description: 'Not a valid MBID' }, '404': { description: 'No cover art for the release' }, '406': { description: 'Accept does not allow JSON' } },
      },
    },
    '/release/{mbid}/{image}': {
      ...common,
      get: {
        operationId: 'getReleaseImage',
        tags,
        summary: 'An image or thumbnail: front, back or an image id, with -250, -500, -1200 or a size the operator allows',
        description: THUMBNAIL_NOTE,
        parameters: [mbid(), { name: 'image', in: 'path', required: true, schema: { type: 'string' }, description: IMAGE_NAME }],
        responses: { '307': thumbnailRedirect, '400': { description: 'Not a valid MBID or image name' }, '404': { description: 'No such image' } },
      },
    },
    '/release-group/{mbid}/': {
      ...common,
      get: {
        operationId: 'getReleaseGroupListing',
        tags,
        summary: "The listing of the release group's chosen release",
        parameters: [mbid('mbid', 'release group')],
        responses: { '200': json(ref('Listing'), 'The listing'), '400': { description: 'Not a valid MBID' }, '404': { description: 'No cover art for the release group' } },
      },
    },
    '/release-group/{mbid}/{image}': {
      ...common,
      get: {
        operationId: 'getReleaseGroupFront',
        tags,
        summary: "The group's front image (front, front-250, front-500, front-1200, or a size the operator allows)",
        description: THUMBNAIL_NOTE,
        parameters: [mbid('mbid', 'release group'), { name: 'image', in: 'path', required: true, schema: { type: 'string' }, description: 'front, optionally with -250, -500, -1200 or an allowed size, and .webp or .avif when that format is on' }],
        responses: { '307': thumbnailRedirect, '400': { description: 'Not front' }, '404': { description: 'No cover art for the release group' } },
      },
    },
  };
}

/** The Event Art Archive's paths (docs/api.md, "Events"): as eventartarchive.org answers them. */
function eventReadPaths(server: { url: string }[]): Record<string, object> {
  const common = { servers: server };
  const tags = ['Event art (read)'];
  const event = mbid('mbid', 'event');
  return {
    '/event/{mbid}/': {
      ...common,
      get: {
        operationId: 'getEventListing',
        tags,
        summary: "An event's listing: a redirect to its index.json (link field `event`, entries without `back`)",
        parameters: [event],
        responses: { '307': redirect('To the listing (index.json)'), '400': { description: 'Not a valid MBID' }, '404': { description: 'No artwork for the event' }, '406': { description: 'Accept does not allow JSON' } },
      },
    },
    '/event/{mbid}/{image}': {
      ...common,
      get: {
        operationId: 'getEventImage',
        tags,
        summary: "An image or thumbnail: front (the first image typed Poster, never a PDF) or an image id, with -250, -500, -1200 or a size the operator allows",
        description: THUMBNAIL_NOTE,
        parameters: [event, { name: 'image', in: 'path', required: true, schema: { type: 'string' }, description: 'front or an id (there is no back); optionally -250, -500, -1200 or an allowed size, and .webp or .avif when that format is on' }],
        responses: { '307': thumbnailRedirect, '400': { description: 'Not a valid MBID or image name' }, '404': { description: 'No such image' } },
      },
    },
  };
}

/** How the write API's operations and answers of an entity's images are named in the document. */
interface WriteNames {
  ops: { list: string; add: string; get: string; edit: string; remove: string; reorder: string };
  entry: string;
  changedEntry: string;
  changedListing: string;
  editorListing: string;
}

const WRITE_NAMES: Record<SiteEntity['name'], WriteNames> = {
  release: {
    ops: { list: 'listImages', add: 'addImage', get: 'getImage', edit: 'editImage', remove: 'removeImage', reorder: 'reorderImages' },
    entry: 'ListingImage',
    changedEntry: 'ChangedImage',
    changedListing: 'ChangedListing',
    editorListing: 'EditorListing',
  },
  event: {
    ops: { list: 'listEventArt', add: 'addEventArt', get: 'getEventArt', edit: 'editEventArt', remove: 'removeEventArt', reorder: 'reorderEventArt' },
    entry: 'EventListingImage',
    changedEntry: 'ChangedEventImage',
    changedListing: 'ChangedEventListing',
    editorListing: 'EventEditorListing',
  },
};

/** The write API's paths of a release's (or an event's) images: list and add, and one image's change and removal. */
function imageWritePaths(entity: SiteEntity): Record<string, object> {
  const tags = WRITE_TAGS;
  const security = WRITE_SECURITY;
  const names = WRITE_NAMES[entity.name];
  const owner = mbid('mbid', entity.name);
  const base = `${entity.apiPrefix}/${entity.name}/{mbid}`;
  return {
    [`${base}/images`]: {
      get: {
        operationId: names.ops.list,
        tags,
        security,
        summary: `The ${entity.name}'s listing as the ${entity.word} API serves it, with its ETag, and the changes waiting for an approver`,
        parameters: [owner],
        responses: { '200': { ...json(ref(names.editorListing), 'The listing and its pending edits'), headers: { ETag: { schema: { type: 'string' } } } }, ...TOKEN_REFUSALS, '400': apiError('Not a valid MBID'), '404': apiError(`No such ${entity.name}`) },
      },
      post: {
        operationId: names.ops.add,
        tags,
        security,
        summary: 'Adds an image (streamed; at most SLEEVE_UPLOAD_MAX_BYTES)',
        parameters: [owner, ifMatch],
        requestBody: {
          required: true,
          content: {
            'multipart/form-data': {
              schema: {
                type: 'object',
                required: ['file'],
                properties: { file: { type: 'string', contentMediaType: 'application/octet-stream' }, types: { type: 'array', items: { type: 'string' } }, comment: COMMENT, edit_note: EDIT_NOTE },
              },
            },
          },
        },
        responses: {
          '201': { ...json(ref(names.changedEntry), 'The new entry (with edit_note as stored when one was given)'), headers: { Location: { schema: { type: 'string', format: 'uri' } }, ETag: { schema: { type: 'string' } } } },
          ...TOKEN_REFUSALS,
          '400': apiError('Not an image, truncated, too many pixels, an unknown type, a comment or edit note too long, a bad field'),
          '404': apiError(`No such ${entity.name}`),
          '409': apiError('The listing changed (If-Match)'),
          '413': apiError('The file is larger than the limit'),
          '415': apiError('Not multipart/form-data'),
          '429': apiError("Two uploads of the token's user are in progress already (Retry-After)"),
          '503': apiError('Too many uploads at once (Retry-After), or the store is unavailable'),
        },
      },
    },
    [`${base}/images/{id}`]: {
      get: {
        operationId: names.ops.get,
        tags,
        security,
        summary: 'One entry of the listing',
        parameters: [owner, imageId],
        responses: { '200': json(ref(names.entry), 'The entry'), ...TOKEN_REFUSALS, '404': apiError(`No such ${entity.name} or image`) },
      },
      patch: {
        operationId: names.ops.edit,
        tags,
        security,
        summary: "Changes an image's types (replacing them) or comment",
        parameters: [owner, imageId, ifMatch],
        requestBody: {
          required: true,
          content: {
            'application/json': {
              schema: { type: 'object', additionalProperties: false, properties: { types: { type: 'array', items: { type: 'string' } }, comment: COMMENT, edit_note: EDIT_NOTE } },
            },
          },
        },
        responses: { '200': json(ref(names.changedEntry), 'The entry (with edit_note as stored when one was given)'), ...TOKEN_REFUSALS, '400': apiError('Bad JSON, an unknown type, a comment or edit note too long'), '404': apiError(`No such ${entity.name} or image`), '409': apiError('The listing changed (If-Match)') },
      },
      delete: {
        operationId: names.ops.remove,
        tags,
        security,
        summary: 'Removes an image',
        parameters: [owner, imageId, ifMatch],
        requestBody: {
          required: false,
          description: 'Optional: the edit note',
          content: { 'application/json': { schema: { type: 'object', additionalProperties: false, properties: { edit_note: EDIT_NOTE } } } },
        },
        responses: { '204': { description: 'Removed' }, ...TOKEN_REFUSALS, '400': apiError('Bad JSON, an edit note too long'), '404': apiError(`No such ${entity.name} or image`), '409': apiError('The listing changed (If-Match)') },
      },
    },
  };
}

/** The write API's order of a release's (or an event's) images. */
function orderWritePath(entity: SiteEntity): Record<string, object> {
  const tags = WRITE_TAGS;
  const security = WRITE_SECURITY;
  const names = WRITE_NAMES[entity.name];
  const owner = mbid('mbid', entity.name);
  const base = `${entity.apiPrefix}/${entity.name}/{mbid}`;
  return {
    [`${base}/order`]: {
      put: {
        operationId: names.ops.reorder,
        tags,
        security,
        summary: `Puts the ${entity.name}'s images in this order (every image once)`,
        parameters: [owner, ifMatch],
        requestBody: {
          required: true,
          content: { 'application/json': { schema: { type: 'object', required: ['images'], additionalProperties: false, properties: { images: { type: 'array', items: { type: 'string' } }, edit_note: EDIT_NOTE } } } },
        },
        responses: {
          '200': { ...json(ref(names.changedListing), 'The listing in its new order (with edit_note as stored when one was given)'), headers: { ETag: { schema: { type: 'string' } } } },
          ...TOKEN_REFUSALS,
          '400': apiError('An image missing or named twice'),
          '404': apiError(`No such ${entity.name}, or an image of another ${entity.name}`),
          '409': apiError('The listing changed (If-Match)'),
        },
      },
    },
  };
}

const WRITE_TAGS = ['Cover art (write)'];
const WRITE_SECURITY = [{ bearer: ['cover_art'] }];

/** The write API: a release's images and an event's, their order, a group's cover. */
function writePaths(): Record<string, object> {
  const tags = WRITE_TAGS;
  const security = WRITE_SECURITY;
  return {
    ...imageWritePaths(RELEASE_PAGES),
    ...orderWritePath(RELEASE_PAGES),
    ...imageWritePaths(EVENT_PAGES),
    ...orderWritePath(EVENT_PAGES),
    '/api/cover-art/release-group/{mbid}/cover': {
      put: {
        operationId: 'setGroupCover',
        tags,
        security,
        summary: "Chooses the release whose art is the group's",
        parameters: [mbid('mbid', 'release group')],
        requestBody: {
          required: true,
          content: { 'application/json': { schema: { type: 'object', required: ['release'], additionalProperties: false, properties: { release: { type: 'string', format: 'uuid' }, edit_note: EDIT_NOTE } } } },
        },
        responses: { '200': json(ref('ChangedListing'), "The group's listing (with edit_note as stored when one was given)"), ...TOKEN_REFUSALS, '400': apiError('A release of another group'), '404': apiError('No such group or release') },
      },
    },
    '/api/openapi.json': {
      get: { operationId: 'openApi', tags: ['Documentation'], summary: 'This document', security: [], responses: { '200': json({ type: 'object' }, 'OpenAPI 3.1') } },
    },
  };
}

function oauthPaths(): Record<string, object> {
  const tags = ['OAuth 2.0 and OpenID Connect'];
  const clientAuth = [{ clientBasic: [] }, {}];
  return {
    '/oauth2/authorize': {
      get: {
        operationId: 'authorize',
        tags,
        summary: 'The authorization endpoint (a page: sign-in and consent)',
        parameters: ['response_type', 'client_id', 'redirect_uri', 'scope', 'state', 'code_challenge', 'code_challenge_method', 'access_type', 'approval_prompt', 'nonce', 'response_mode'].map(
          (name) => ({ name, in: 'query', required: ['response_type', 'client_id'].includes(name), schema: { type: 'string' } }),
        ),
        responses: { '200': { description: 'The sign-in or consent page', content: { 'text/html': {} } }, '302': redirect('Back to the client with a code or an error'), '400': { description: 'An error page' } },
      },
    },
    '/oauth2/token': {
      post: {
        operationId: 'token',
        tags,
        security: clientAuth,
        summary: 'Exchanges a code or a refresh token for tokens',
        requestBody: formBody(
          Object.fromEntries(['grant_type', 'code', 'redirect_uri', 'refresh_token', 'code_verifier', 'client_id', 'client_secret'].map((n) => [n, { type: 'string' }])),
          ['grant_type'],
        ),
        responses: { '200': json(ref('TokenResponse'), 'Tokens'), '400': oauthError('A bad request or grant'), '401': oauthError('Client authentication failed') },
      },
    },
    '/oauth2/revoke': {
      post: {
        operationId: 'revoke',
        tags,
        security: clientAuth,
        summary: 'Revokes a token (RFC 7009)',
        requestBody: formBody({ token: { type: 'string' }, token_type_hint: { type: 'string' }, client_id: { type: 'string' }, client_secret: { type: 'string' } }, ['token']),
        responses: { '200': { description: 'Revoked (or unknown)' }, '400': oauthError('A bad request'), '401': oauthError('Client authentication failed') },
      },
    },
    '/oauth2/introspect': {
      post: {
        operationId: 'introspect',
        tags,
        security: clientAuth,
        summary: 'Token introspection (RFC 7662)',
        requestBody: formBody({ token: { type: 'string' }, token_type_hint: { type: 'string' }, client_id: { type: 'string' }, client_secret: { type: 'string' } }, ['token']),
        responses: { '200': json(ref('Introspection'), 'Whether the token is active, and its facts'), '400': oauthError('A bad request'), '401': oauthError('Client authentication failed') },
      },
    },
    '/oauth2/userinfo': {
      get: {
        operationId: 'userinfo',
        tags,
        security: [{ bearer: ['profile'] }, { bearer: ['openid'] }],
        summary: "The token's user (profile or openid scope)",
        responses: { '200': json(ref('Userinfo'), 'The claims'), '401': oauthError('No token, or an invalid one'), '403': oauthError('The token lacks the profile scope') },
      },
    },
    '/.well-known/oauth-authorization-server': {
      get: { operationId: 'metadata', tags, summary: 'Authorization server metadata (RFC 8414)', responses: { '200': json(ref('Metadata'), 'The metadata') } },
    },
    '/.well-known/openid-configuration': {
      get: { operationId: 'openidConfiguration', tags, summary: 'OpenID Connect discovery (the same document)', responses: { '200': json(ref('Metadata'), 'The metadata') } },
    },
    '/.well-known/jwks.json': {
      get: { operationId: 'jwks', tags, summary: 'The id_token signing keys (public)', responses: { '200': json(ref('Jwks'), 'The JWK Set') } },
    },
  };
}

/** A change's answer carries the edit note as stored (null when blank) when the request gave one. */
const NOTE_ANSWER = { type: ['string', 'null'], description: 'The edit note as stored (trimmed; null when blank); present only when the request gave edit_note' };

const LISTING_IMAGE = {
  type: 'object',
  required: ['approved', 'back', 'comment', 'edit', 'front', 'id', 'image', 'thumbnails', 'types'],
  additionalProperties: false,
  properties: {
    approved: { type: 'boolean' },
    back: { type: 'boolean' },
    comment: { type: 'string' },
    edit: { type: 'integer', minimum: 0 },
    front: { type: 'boolean' },
    id: { type: 'string', pattern: '^(0|[1-9][0-9]{0,15})$' },
    image: { type: 'string', format: 'uri' },
    thumbnails: {
      type: 'object',
      required: ['1200', '250', '500', 'large', 'small'],
      additionalProperties: false,
      properties: Object.fromEntries(['1200', '250', '500', 'large', 'small'].map((k) => [k, { type: 'string', format: 'uri' }])),
    },
    types: { type: 'array', items: { type: 'string' } },
    // sleeve's additive fields (docs/interface.md, "Additive fields"): present only when known, never with SLEEVE_LISTING_FIELDS=caa.
    width: { type: 'integer', minimum: 1, description: 'The original as displayed (after EXIF orientation); absent when unknown' },
    height: { type: 'integer', minimum: 1, description: 'The original as displayed (after EXIF orientation); absent when unknown' },
    size: { type: 'integer', minimum: 0, description: 'Bytes of the original as stored; absent when unknown' },
    mime_type: { type: 'string', enum: ['image/jpeg', 'image/png', 'image/gif', 'application/pdf'], description: 'Absent when unknown' },
    thumbnail_dimensions: {
      type: 'object',
      description:
        'The thumbnails that exist, by nominal size (the interface\'s three, and sizes made on demand under SLEEVE_THUMBNAIL_SIZES once made); never upscaled, so a small original\'s are smaller. Absent when unknown',
      additionalProperties: {
        type: 'object',
        required: ['width', 'height'],
        additionalProperties: false,
        properties: { width: { type: 'integer', minimum: 1 }, height: { type: 'integer', minimum: 1 } },
      },
    },
    thumbnail_formats: {
      type: 'array',
      items: { type: 'string', enum: ['jpeg', 'webp', 'avif'] },
      minItems: 2,
      uniqueItems: true,
      description: 'The formats its thumbnails are answered in (SLEEVE_THUMBNAIL_FORMATS); present only when more than JPEG is on, never for a PDF',
    },
  },
};

const LISTING = {
  type: 'object',
  required: ['images', 'release'],
  additionalProperties: false,
  properties: { images: { type: 'array', items: ref('ListingImage') }, release: { type: 'string', format: 'uri' } },
};

/** An event's entry: a release's without `back` (the Event Art Archive's indexer writes none). */
const EVENT_LISTING_IMAGE = {
  ...LISTING_IMAGE,
  required: LISTING_IMAGE.required.filter((k) => k !== 'back'),
  properties: Object.fromEntries(Object.entries(LISTING_IMAGE.properties).filter(([k]) => k !== 'back')),
};

/** An event's listing: its link field is `event`. */
const EVENT_LISTING = {
  type: 'object',
  required: ['event', 'images'],
  additionalProperties: false,
  properties: { event: { type: 'string', format: 'uri' }, images: { type: 'array', items: ref('EventListingImage') } },
};

const PENDING = {
  type: 'array',
  description: 'Edits waiting for an approver (SLEEVE_APPROVAL=review), oldest first; the listing does not show them yet, except additions (approved: false)',
  items: {
    type: 'object',
    required: ['edit', 'kind', 'image', 'editor', 'created', 'before', 'after'],
    additionalProperties: false,
    properties: {
      edit: { type: 'integer' },
      kind: { type: 'string' },
      image: { type: ['string', 'null'] },
      editor: { type: ['string', 'null'] },
      created: { type: 'string', format: 'date-time' },
      before: {},
      after: {},
      edit_note: { type: ['string', 'null'], description: "The editor's note on the change (the upload page's edit note), or null" },
    },
  },
};

/** A listing as the write API gives it to editors: with the edits waiting (`pending`). */
const editorListing = (link: 'release' | 'event', entry: string) => ({
  type: 'object',
  required: ['images', link, 'pending'],
  additionalProperties: false,
  properties: { images: { type: 'array', items: ref(entry) }, [link]: { type: 'string', format: 'uri' }, pending: PENDING },
});

const SCHEMAS = {
  ListingImage: LISTING_IMAGE,
  Listing: LISTING,
  ChangedImage: { ...LISTING_IMAGE, properties: { ...LISTING_IMAGE.properties, edit_note: NOTE_ANSWER } },
  ChangedListing: { ...LISTING, properties: { ...LISTING.properties, edit_note: NOTE_ANSWER } },
  EditorListing: editorListing('release', 'ListingImage'),
  EventListingImage: EVENT_LISTING_IMAGE,
  EventListing: EVENT_LISTING,
  ChangedEventImage: { ...EVENT_LISTING_IMAGE, properties: { ...EVENT_LISTING_IMAGE.properties, edit_note: NOTE_ANSWER } },
  ChangedEventListing: { ...EVENT_LISTING, properties: { ...EVENT_LISTING.properties, edit_note: NOTE_ANSWER } },
  EventEditorListing: editorListing('event', 'EventListingImage'),
  ApiError: {
    type: 'object',
    required: ['error', 'error_description'],
    additionalProperties: false,
    properties: {
      error: { type: 'string', enum: ['invalid_request', 'invalid_token', 'invalid_dpop_proof', 'insufficient_scope', 'not_found', 'conflict', 'too_large', 'temporarily_unavailable'] },
      error_description: { type: 'string' },
    },
  },
  OAuthError: { type: 'object', required: ['error'], properties: { error: { type: 'string' }, error_description: { type: 'string' } } },
  TokenResponse: {
    type: 'object',
    required: ['access_token', 'token_type', 'expires_in'],
    properties: { access_token: { type: 'string' }, token_type: { type: 'string' }, expires_in: { type: 'integer' }, refresh_token: { type: 'string' }, scope: { type: 'string' }, id_token: { type: 'string' } },
  },
  Introspection: {
    type: 'object',
    required: ['active'],
    properties: {
      active: { type: 'boolean' },
      scope: { type: 'string' },
      client_id: { type: 'string' },
      username: { type: 'string' },
      sub: { type: 'string' },
      iss: { type: 'string' },
      token_type: { type: 'string' },
      exp: { type: 'integer' },
      iat: { type: 'integer' },
    },
  },
  Userinfo: {
    type: 'object',
    required: ['sub'],
    properties: { sub: { type: 'string' }, profile: { type: 'string' }, metabrainz_user_id: { type: 'integer' }, email: { type: 'string' }, email_verified: { type: 'boolean' }, zoneinfo: { type: 'string' } },
  },
  Metadata: {
    type: 'object',
    required: ['issuer', 'authorization_endpoint', 'token_endpoint', 'scopes_supported', 'response_types_supported'],
    properties: {
      issuer: { type: 'string', format: 'uri' },
      authorization_endpoint: { type: 'string', format: 'uri' },
      token_endpoint: { type: 'string', format: 'uri' },
      jwks_uri: { type: 'string', format: 'uri' },
      scopes_supported: { type: 'array', items: { type: 'string' } },
      response_types_supported: { type: 'array', items: { type: 'string' } },
    },
  },
  Jwks: {
    type: 'object',
    required: ['keys'],
    properties: { keys: { type: 'array', items: { type: 'object', required: ['kty', 'kid'], properties: { kty: { type: 'string' }, kid: { type: 'string' }, alg: { type: 'string' }, use: { type: 'string' } } } } },
  },
};

/** The document, for the website's origin and the cover art listener's. */
function openApiDocument(websiteUrl: string, coverArtUrl: string): Record<string, unknown> {
  const coverArt = [{ url: coverArtUrl, description: 'The cover art API (the cover art listener)' }];
  return {
    openapi: '3.1.0',
    info: {
      title: 'sleeve',
      version: '1',
      summary: 'A self-hosted Cover Art Archive with a MusicBrainz-style OAuth 2.0 authorization server',
      description: "The cover art read API and the Event Art Archive's, the write API for tools (docs/api.md) and the OAuth 2.0 and OpenID Connect endpoints.",
    },
    servers: [{ url: websiteUrl, description: 'The website: the write API and the authorization service' }, ...coverArt],
    paths: { ...coverArtReadPaths(coverArt), ...eventReadPaths(coverArt), ...writePaths(), ...oauthPaths() },
    components: {
      schemas: SCHEMAS,
      securitySchemes: {
        bearer: {
          type: 'oauth2',
          description: 'An access token from this authorization server (Authorization: Bearer; a DPoP-bound one as Authorization: DPoP with a DPoP proof header, RFC 9449)',
          flows: {
            authorizationCode: {
              authorizationUrl: `${websiteUrl}/oauth2/authorize`,
              tokenUrl: `${websiteUrl}/oauth2/token`,
              refreshUrl: `${websiteUrl}/oauth2/token`,
              scopes: { cover_art: 'Add, edit and reorder cover art', profile: 'View your public account information', openid: 'Know who you are (your account name)' },
            },
          },
        },
        clientBasic: { type: 'http', scheme: 'basic', description: 'client_id and client_secret (or in the form)' },
      },
    },
    security: [],
  };
}

export async function openApiRoute(app: FastifyInstance, deps: WebsiteDeps): Promise<void> {
  const body = JSON.stringify(openApiDocument(deps.pages.deps.authUrl, deps.api.urls.baseUrl));
  app.get('/api/openapi.json', async function openApi(_req, reply) {
    return reply.headers({ 'cache-control': 'public, max-age=3600', 'access-control-allow-origin': '*' }).type('application/json; charset=utf-8').send(body);
  });
}
