import { randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, readdir, readFile, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import busboy from 'busboy';
import type { FastifyInstance, FastifyRequest } from 'fastify';

/*
 * Multipart bodies (image uploads, from the write API and the upload page) are read as a
 * stream: each file part goes straight to a private temporary file (mode 0600, in a 0700
 * folder of the data directory), its byte limit (SLEEVE_UPLOAD_MAX_BYTES) enforced while it
 * streams, so a request never holds more than one chunk of it in memory. The file is read
 * back only once whole and within the limit, for the same add path as the CLI's; it is
 * removed whatever happens (answered, refused, or the client gone). See docs/decisions.md,
 * "The write API and uploads".
 */

/** A refusal of the body itself: the status and the text the client is shown. */
export class BodyRefused extends Error {
  constructor(
    readonly status: 400 | 413 | 415,
    message: string,
    /** The body was not read to its end: the answer closes the connection. */
    readonly unread = false,
  ) {
    super(message);
    this.name = 'BodyRefused';
  }
}

export interface StreamedFile {
  /** The form field's name. */
  field: string;
  /** The name the client gave the file (for messages only). */
  filename: string;
  /** The temporary file holding its bytes. */
  path: string;
  bytes: number;
}

export interface StreamedForm {
  /** The text fields, each name with its values in order. */
  fields: Map<string, string[]>;
  files: StreamedFile[];
}

export interface StreamLimits {
  /** Largest file part, in bytes. */
  maxFileBytes: number;
  /** Most file parts. */
  maxFiles: number;
  /** Most text fields, and the largest one in bytes. */
  maxFields: number;
  maxFieldBytes: number;
}

/** Where uploads are streamed to, and how long a leftover (a process killed mid-upload) may stay. */
export class UploadFolder {
  private made: Promise<void> | undefined;

  constructor(
    readonly dir: string,
    private readonly maxAgeMs = 3_600_000,
  ) {}

  /** Makes the folder (0700) and removes leftovers older than an hour: other processes sharing the data directory may be streaming the newer ones. */
  ready(): Promise<void> {
    this.made ??= (async () => {
      await mkdir(this.dir, { recursive: true, mode: 0o700 });
      const cutoff = Date.now() - this.maxAgeMs;
      for (const name of await readdir(this.dir)) {
        if (!name.endsWith('.part')) continue;
        const file = path.join(this.dir, name);
        const info = await stat(file).catch(() => undefined);
        if (info !== undefined && info.mtimeMs < cutoff) await rm(file, { force: true });
      }
    })();
    return this.made;
  }

  fresh(): string {
    return path.join(this.dir, `${randomUUID()}.part`);
  }
}

/**
 * Lets the routes of this (encapsulated) plugin read multipart bodies themselves, as a
 * stream: the listener's own parser would buffer them.
 */
export function streamMultipart(app: FastifyInstance): void {
  app.addContentTypeParser('multipart/form-data', function leaveForTheRoute(_req, _payload, done) {
    done(null, undefined);
  });
}

/**
 * Reads a multipart body, streaming its files to temporary files. On any refusal or failure
 * (a part too large, the client gone) every temporary file is removed before it throws; on
 * success the caller removes them with `discard` once done.
 */
export async function readStreamedForm(req: FastifyRequest, folder: UploadFolder, limits: StreamLimits): Promise<StreamedForm> {
  const type = req.headers['content-type'] ?? '';
  if (!/^multipart\/form-data\s*;/i.test(type)) throw new BodyRefused(415, 'Send the image as multipart/form-data');
  await folder.ready();
  let parser: busboy.Busboy;
  try {
    parser = busboy({
      headers: req.headers,
      limits: { fileSize: limits.maxFileBytes, files: limits.maxFiles, fields: limits.maxFields, fieldSize: limits.maxFieldBytes, parts: limits.maxFiles + limits.maxFields },
    });
  } catch (err) {
    throw new BodyRefused(400, `The multipart body cannot be read: ${(err as Error).message}`);
  }
  const form: StreamedForm = { fields: new Map(), files: [] };
  const writes: Promise<void>[] = [];
  const streaming = new Set<NodeJS.ReadableStream & { destroy(err?: Error): void }>();
  let refused: BodyRefused | undefined;
  let stopped: ((err: BodyRefused) => void) | undefined;
  const refuse = (err: BodyRefused, now = false): void => {
    refused ??= err;
    // Past a file's limit, the rest of the body is not read: the answer closes the connection.
    if (now) stopped?.(err);
  };

  parser.on('field', (name, value, info) => {
    if (info.valueTruncated) refuse(new BodyRefused(400, `The field ${JSON.stringify(name.slice(0, 40))} is longer than ${limits.maxFieldBytes} bytes`));
    else if (name.includes('\0') || value.includes('\0')) refuse(new BodyRefused(400, 'The request holds a NUL character'));
    const values = form.fields.get(name) ?? [];
    values.push(value);
    form.fields.set(name, values);
  });
  parser.on('file', (name, stream, info) => {
    if (refused !== undefined) {
      stream.resume();
      return;
    }
    const file: StreamedFile = { field: name, filename: info.filename ?? '', path: folder.fresh(), bytes: 0 };
    form.files.push(file);
    streaming.add(stream);
    stream.on('data', (chunk: Buffer) => {
      file.bytes += chunk.length;
    });
    stream.on('limit', () => {
      refuse(new BodyRefused(413, `The file ${JSON.stringify(file.filename.slice(0, 80))} is larger than the limit of ${limits.maxFileBytes} bytes (SLEEVE_UPLOAD_MAX_BYTES)`, true), true);
    });
    writes.push(pipeline(stream, createWriteStream(file.path, { flags: 'wx', mode: 0o600 })).finally(() => streaming.delete(stream)));
  });
  parser.on('filesLimit', () => refuse(new BodyRefused(400, `At most ${limits.maxFiles} files at once`)));
  parser.on('fieldsLimit', () => refuse(new BodyRefused(400, `At most ${limits.maxFields} fields`)));
  parser.on('partsLimit', () => refuse(new BodyRefused(400, 'Too many parts in the multipart body')));

  const body = req.raw;
  try {
    await new Promise<void>((resolve, reject) => {
      stopped = (err) => {
        body.unpipe(parser);
        for (const s of streaming) s.destroy(err);
        reject(err);
      };
      parser.once('finish', resolve);
      parser.once('error', (err: Error) => reject(new BodyRefused(400, `The multipart body cannot be read: ${err.message}`)));
      // The client gone mid-body (ECONNRESET, 'aborted'): its fault, not a server failure to log.
      body.once('error', () => reject(new BodyRefused(400, 'The upload was interrupted', true)));
      body.once('close', () => {
        if (!body.complete) {
          for (const s of streaming) s.destroy();
          reject(new BodyRefused(400, 'The upload was interrupted', true));
        }
      });
      body.pipe(parser);
    });
    const settled = await Promise.allSettled(writes);
    if (refused !== undefined) throw refused;
    const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
  } catch (err) {
    // The client gone, a malformed body, a refusal: nothing of it stays.
    await Promise.allSettled(writes);
    await discard(form);
    throw err;
  }
  return form;
}

/** Removes a form's temporary files. */
export async function discard(form: StreamedForm): Promise<void> {
  await Promise.all(form.files.map((f) => rm(f.path, { force: true })));
}

/** A streamed file's bytes (it is within the byte limit: the stream stopped it otherwise). */
export function readStreamed(file: StreamedFile): Promise<Buffer> {
  return readFile(file.path);
}

/** Why an upload was not let in: its user has their share in progress already, or the process has every slot taken. */
export type UploadRefusal = 'user' | 'full';

export interface UploadSlotLimits {
  /** Uploads in progress at once in this process (a body being read, or its image checked and stored). */
  max: number;
  /** Of those, the most of one account: one user's slow bodies never hold every slot. */
  perUser: number;
  /** Of those, the most decoded and stored at a time (each holds its file and decoded pixels in memory). */
  working: number;
}

/**
 * Bounds on uploads in progress: more than `max` at once, or more than `perUser` of one
 * account, are refused at once. A body is read inside its slot but outside the `working`
 * ones (it arrives at the client's pace, within the request timeout); only a whole body, on
 * disk, waits for one of those. The count per user is kept only while it is not zero, so
 * the map holds at most `max` entries.
 */
export class UploadSlots {
  private used = 0;
  private readonly byUser = new Map<number, number>();
  private busy = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(readonly limits: UploadSlotLimits) {}

  /** Runs `fn` when fewer than `working` others run (inside a slot). */
  async work<T>(fn: () => Promise<T>): Promise<T> {
    if (this.busy >= this.limits.working) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.busy++;
    try {
      return await fn();
    } finally {
      const next = this.waiting.shift();
      if (next !== undefined) next();
      else this.busy--;
    }
  }

  /** Runs `fn` in a slot of `user`'s, or says at once why not. */
  async run<T>(user: number, fn: () => Promise<T>): Promise<{ value: T } | { refused: UploadRefusal }> {
    const theirs = this.byUser.get(user) ?? 0;
    if (theirs >= this.limits.perUser) return { refused: 'user' };
    if (this.used >= this.limits.max) return { refused: 'full' };
    this.used++;
    this.byUser.set(user, theirs + 1);
    try {
      return { value: await fn() };
    } finally {
      this.used--;
      const left = (this.byUser.get(user) ?? 1) - 1;
      if (left === 0) this.byUser.delete(user);
      else this.byUser.set(user, left);
    }
  }
}
