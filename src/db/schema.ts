import type { ColumnType, Generated, Kysely } from 'kysely';

/*
 * Stored forms are the same on SQLite and PostgreSQL: booleans are 0/1 integers,
 * times are epoch milliseconds, BIGINT columns come back as JS numbers (ids fit
 * well inside 2^53). See db/connect.ts for the type parsers that make pg agree.
 */

export interface ReleaseGroupTable {
  id: Generated<number>;
  gid: string;
  name: string;
  /** 1 when the row came from a MusicBrainz dump (sleeve import), 0 when made here. */
  imported: Generated<number>;
}

export interface ReleaseTable {
  id: Generated<number>;
  gid: string;
  release_group: number;
  name: string;
  /** Earliest release event; NULLs rank last in the release-group choice. */
  date_year: number | null;
  date_month: number | null;
  date_day: number | null;
  /** When (epoch ms) the release last changed while its index.json may not match yet; 0 when it matches. */
  index_dirty: Generated<number>;
  /** The version of the published URLs its index.json was written with (null: never written since 20261124T0300). */
  index_urls: Generated<number | null>;
  imported: Generated<number>;
  /** Moved by every change to the release's art and by every edit of it opened or closed (migration 20261125T0400). */
  revision: Generated<number>;
}

export interface GidRedirectTable {
  gid: string;
  new_id: number;
  imported: Generated<number>;
}

export interface ReleaseGroupCoverArtTable {
  release_group: number;
  release: number;
}

export interface ArtTypeTable {
  id: number;
  name: string;
  parent: number | null;
  child_order: number;
  description: string;
  gid: string | null;
}

export interface ImageTypeTable {
  mime_type: string;
  suffix: string;
}

export interface CoverArtTable {
  id: number;
  release: number;
  comment: string;
  edit: number;
  ordering: number;
  approved: number;
  mime_type: string;
  date_uploaded: number;
  filesize: number | null;
  thumb_250_filesize: number | null;
  thumb_500_filesize: number | null;
  thumb_1200_filesize: number | null;
  imported: Generated<number>;
  /** Measured by sleeve from the stored files (null: not measured; db/migrations/20261206T0200_image_measures.ts). */
  width: ColumnType<number | null, number | null | undefined, number | null>;
  height: ColumnType<number | null, number | null | undefined, number | null>;
  stored_size: ColumnType<number | null, number | null | undefined, number | null>;
  /** JSON: `{"250": {"width": w, "height": h}, …}` of the thumbnails measured. */
  thumbnail_dimensions: ColumnType<string | null, string | null | undefined, string | null>;
}

export interface CoverArtTypeTable {
  id: number;
  type_id: number;
}

/** A listing rewritten with new measures (db/migrations/20261207T0200_listing_refresh.ts). */
export interface ListingRefreshTable {
  seq: number;
  gid: string;
}

/** An event of the Event Art Archive (migration 20261207T0500): as a release, without a group or date. */
export interface EventTable {
  id: Generated<number>;
  gid: string;
  name: string;
  index_dirty: Generated<number>;
  index_urls: Generated<number | null>;
  revision: Generated<number>;
  imported: Generated<number>;
}

/** An image of an event: cover_art's columns with `event` for `release`. */
export interface EventArtTable extends Omit<CoverArtTable, 'release'> {
  event: number;
}

export interface CounterTable {
  name: string;
  value: number;
}

/** One run of `sleeve import musicbrainz` (a serving process may report them). */
export interface ImportRunTable {
  id: Generated<number>;
  source: string;
  /** The mbdump/ folder read. */
  dir: string;
  /** The dump's TIMESTAMP file, when it has one. */
  dump_timestamp: string | null;
  replication_sequence: number | null;
  started_at: number;
  finished_at: number | null;
  status: 'running' | 'succeeded' | 'failed' | 'interrupted';
  rows_read: number;
  rows_skipped: number;
  /** JSON: per-file counts and, on success, what was added, changed, removed and left out. */
  details: string | null;
  message: string | null;
}

export interface AccountTable {
  id: Generated<number>;
  name: string;
  /** Lower-cased name, unique: names differ by more than case. */
  name_key: string;
  email: string | null;
  email_verified: number;
  password_hash: string;
  website: string | null;
  gender: string | null;
  zoneinfo: string;
  birth_date: string | null;
  country: string | null;
  created_at: number;
  /** `editor` or `approver` (migration 20261125T0400). */
  role: Generated<string>;
}

export interface WebSessionTable {
  id_hash: string;
  account_id: number;
  created_at: number;
  expires_at: number;
}

/** Sign-in attempts per key (`account:…`, `address:…`, `device:…`) in a fixed window. */
export interface LoginThrottleTable {
  key: string;
  /** Failures in the window plus password checks in progress (each reserved before it runs). */
  attempts: number;
  window_start: number;
}

/** A device cookie: a browser that signed in to this account before (its nonce, hashed). */
export interface SigninDeviceTable {
  token_hash: string;
  account_id: number;
  created_at: number;
  expires_at: number;
}

export interface OAuthApplicationTable {
  id: Generated<number>;
  /** Null for a client known from its Client ID Metadata Document (its client_id is the document's https URL; migration 20261207T0100). */
  owner_id: number | null;
  name: string;
  kind: 'confidential' | 'public';
  client_id: string;
  secret_hash: string;
  redirect_uri: string | null;
  created_at: number;
  /** 1 when the operator lets this client introspect every application's tokens (a resource server). */
  resource_server: Generated<number>;
  /** The algorithm of its id_tokens (OpenID Connect's `id_token_signed_response_alg`). */
  id_token_alg: Generated<'ES256' | 'RS256'>;
  /** 1 when every refresh gives a new refresh token (`sleeve app add|edit --rotate-refresh-tokens`; migration 20261125T0100). */
  rotate_refresh: Generated<number>;
  /** 1 when every token request of this client must carry a DPoP proof (migration 20261125T0300). */
  require_dpop: Generated<number>;
}

/** A refresh token a rotating application already used (its hash), kept to recognise a second use (auth/grants/refresh-token.ts). */
export interface OAuthRefreshUsedTable {
  token_hash: string;
  grant_id: number;
  used_at: number;
  /** The pair its first use gave, AES-256-GCM-sealed under this refresh token's random bytes, while the grace window lasts (auth/grants/refresh-token.ts); else null. */
  successor_sealed: string | null;
}

export interface OAuthGrantTable {
  id: Generated<number>;
  account_id: number;
  application_id: number;
  scope: number;
  offline: number;
  refresh_hash: string | null;
  access_hash: string | null;
  access_created_at: number | null;
  access_expires_at: number | null;
  created_at: number;
  revoked_at: number | null;
  /** The scope list as the client wrote it with MetaBrainz names, echoed in token responses (null: classic names; migration 20261124T0410). */
  scope_text: Generated<string | null>;
  /** The JWK SHA-256 thumbprint the access token is DPoP-bound to (null: a bearer token; migration 20261125T0300). */
  access_jkt: Generated<string | null>;
  /** The same for the refresh token (public applications that sent a proof at the code exchange). */
  refresh_jkt: Generated<string | null>;
}

export interface OAuthCodeTable {
  code_hash: string;
  account_id: number;
  application_id: number;
  scope: number;
  offline: number;
  redirect_uri: string;
  code_challenge: string | null;
  code_challenge_method: 'plain' | 'S256' | null;
  expires_at: number;
  used_at: number | null;
  grant_id: number | null;
  /** As oauth_grant.scope_text. */
  scope_text: Generated<string | null>;
  /** The authorization request's OpenID Connect nonce, for the id_token. */
  nonce: Generated<string | null>;
  /** When the user signed in (epoch ms): the id_token's `auth_time`. */
  auth_time: Generated<number | null>;
  /** The SHA-256 of the Client ID Metadata Document the code was issued under, or null for a registered client (migration 20261207T0100). */
  document_hash: Generated<string | null>;
}

/** A device authorization request (RFC 8628; migration 20261125T0200): codes stored only hashed. */
export interface OAuthDeviceCodeTable {
  id: Generated<number>;
  device_hash: string;
  user_code_hash: string;
  application_id: number;
  scope: number;
  /** As oauth_grant.scope_text. */
  scope_text: string | null;
  created_at: number;
  expires_at: number;
  /** The polling interval in seconds (grown by 5 at each slow_down). */
  interval_s: number;
  polled_at: number | null;
  /** Null while pending. */
  decision: 'approved' | 'denied' | null;
  /** Who decided, and when they signed in (the id_token's auth_time). */
  account_id: number | null;
  auth_time: number | null;
  /** When the device code was exchanged (it works once). */
  used_at: number | null;
}

/** A running `sleeve serve` with a cover art listener (migration 20261124T0300; cluster/registry.ts). */
export interface ServingProcessTable {
  id: string;
  host: string;
  pid: number;
  /** Its cover art listener, for messages. */
  address: string;
  /** SQLite: the loopback host:port where it takes change signals. */
  signal: string | null;
  /** PostgreSQL: the advisory lock its notification session holds while it lives. */
  lock_key: number | null;
  /** The catalogue mark its caches follow (PostgreSQL; SQLite servers answer the signal instead). */
  acked: number;
  started_at: number;
}

export interface SettingTable {
  name: string;
  value: string;
}

/** A key that signs OpenID Connect id_tokens (migration 20261124T0400; auth/signing-keys.ts). */
export interface SigningKeyTable {
  /** The RFC 7638 thumbprint of its public JWK. */
  kid: string;
  alg: 'ES256' | 'RS256';
  /** `alg` while the key signs, null once retired (unique: one signing key per algorithm). */
  active_alg: 'ES256' | 'RS256' | null;
  /** JSON: the private JWK. Never logged or printed. */
  private_jwk: string;
  /** JSON: the public JWK, as the JWKS serves it. */
  public_jwk: string;
  created_at: number;
  /** When it stopped signing. */
  retired_at: number | null;
  /** When every token it signed has expired: it leaves the JWKS then (null while it signs). */
  expires_at: number | null;
}

/** One change to cover art, applied or pending (migration 20261125T0400; cover-art/catalogue/edits.ts). */
export interface CoverArtEditTable {
  id: number;
  kind: 'add' | 'edit' | 'remove' | 'reorder' | 'set-cover';
  release_gid: string | null;
  release_group_gid: string | null;
  image: number | null;
  /** The account that made it; null: the operator (CLI). */
  editor_id: number | null;
  editor_name: string | null;
  created_at: number;
  /** JSON of what the change touches, before and after. */
  before: string | null;
  after: string | null;
  status: 'applied' | 'pending' | 'approved' | 'rejected';
  closed_by_id: number | null;
  closed_by_name: string | null;
  closed_at: number | null;
  /** The approver's (or withdrawing editor's) note on closing it. */
  note: string | null;
  /** The editor's own note on the change (migration 20261207T0300). */
  edit_note: string | null;
  /** The event an edit of the Event Art Archive is about (migration 20261208T0100); null for a release's. */
  event_gid: string | null;
}

export interface Database {
  cover_art_edit: CoverArtEditTable;
  serving_process: ServingProcessTable;
  setting: SettingTable;
  release_group: ReleaseGroupTable;
  release: ReleaseTable;
  release_gid_redirect: GidRedirectTable;
  release_group_gid_redirect: GidRedirectTable;
  release_group_cover_art: ReleaseGroupCoverArtTable;
  art_type: ArtTypeTable;
  image_type: ImageTypeTable;
  cover_art: CoverArtTable;
  cover_art_type: CoverArtTypeTable;
  event: EventTable;
  event_gid_redirect: GidRedirectTable;
  event_art_kind: ArtTypeTable;
  event_art: EventArtTable;
  event_art_type: CoverArtTypeTable;
  counter: CounterTable;
  listing_refresh: ListingRefreshTable;
  import_run: ImportRunTable;
  account: AccountTable;
  web_session: WebSessionTable;
  login_throttle: LoginThrottleTable;
  signin_device: SigninDeviceTable;
  oauth_application: OAuthApplicationTable;
  oauth_grant: OAuthGrantTable;
  oauth_code: OAuthCodeTable;
  oauth_refresh_used: OAuthRefreshUsedTable;
  oauth_device_code: OAuthDeviceCodeTable;
  signing_key: SigningKeyTable;
}

export type Db = Kysely<Database>;
