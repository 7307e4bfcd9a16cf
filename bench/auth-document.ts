/**
 * auth's Client ID Metadata Document case: the document a metadata-document client publishes,
 * served over HTTPS on 127.0.0.1 with a certificate of a local CA (made as `sleeve tls init`
 * makes one), which the benchmark's sleeve trusts through NODE_EXTRA_CA_CERTS and may fetch from
 * loopback (SLEEVE_CLIENT_METADATA_ALLOW_PRIVATE). Its Cache-Control keeps it in sleeve's cache
 * for the whole run: the case measures the exchange with the document cached.
 */
import { readFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { checkDocument, type ClientDocument } from '../src/auth/client-metadata.js';
import { initLocalCa } from '../src/auth/local-ca.js';

export const DOCUMENT_REDIRECT = 'http://127.0.0.1/callback';

export interface DocumentHost {
  /** The client_id: the document's URL. */
  clientId: string;
  /** The document as sleeve checks it (its hash is what a code records). */
  document: ClientDocument;
  /** The CA certificate file, for NODE_EXTRA_CA_CERTS. */
  ca: string;
  /** How many times the document was fetched. */
  fetches(): number;
  close(): Promise<void>;
}

export async function startDocumentHost(dataDir: string): Promise<DocumentHost> {
  const files = await initLocalCa(path.join(dataDir, 'document-host'), ['127.0.0.1']);
  let body = '';
  let fetches = 0;
  const server = https.createServer({ cert: readFileSync(files.cert, 'utf8'), key: readFileSync(files.key, 'utf8') }, (_req, res) => {
    fetches++;
    res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'max-age=86400' }).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const clientId = `https://127.0.0.1:${(server.address() as AddressInfo).port}/bench/client.json`;
  body = JSON.stringify({ client_id: clientId, client_name: 'Bench Tagger', redirect_uris: [DOCUMENT_REDIRECT], token_endpoint_auth_method: 'none' });
  return {
    clientId,
    document: checkDocument(clientId, new URL(clientId), Buffer.from(body)),
    ca: files.ca,
    fetches: () => fetches,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
