/** Debian's nginx as a benchmark's server: one process in the foreground, pinned to the server core. */
import { writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { cleanEnv, cpuOf, pinned, startServer, type Server } from './proc.js';
import { SERVER_CORE } from './servers.js';

export const NGINX = '/usr/sbin/nginx';

/** A free TCP port on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const addr = s.address();
      s.close(() => (typeof addr === 'object' && addr !== null ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

/** The main configuration around `http` (the http block's contents): one process, no daemon, files in `prefix`. */
export function nginxMain(prefix: string, http: string): string {
  const p = (n: string) => path.join(prefix, n);
  return `daemon off;
master_process off;
pid ${p('nginx.pid')};
error_log ${p('error.log')} warn;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 10000000;
  client_body_temp_path ${p('body')};
  proxy_temp_path ${p('proxy')};
  fastcgi_temp_path ${p('fastcgi')};
  uwsgi_temp_path ${p('uwsgi')};
  scgi_temp_path ${p('scgi')};
${http}
}
`;
}

/**
 * nginx with the configuration `conf` (listening on 127.0.0.1:`port`) on the server core,
 * ready once the port accepts; its CPU is nginx's, not the waiting shell's.
 */
export async function startNginx(opts: { prefix: string; conf: string; port: number; scheme?: 'http' | 'https'; name?: string }): Promise<Server> {
  const file = path.join(opts.prefix, `${opts.name ?? 'nginx'}.conf`);
  writeFileSync(file, opts.conf);
  const url = `${opts.scheme ?? 'http'}://127.0.0.1:${opts.port}`;
  // A shell that starts nginx, waits for the port, says where it is, then waits on nginx (nginx itself prints nothing).
  const script = `"$@" & pid=$!; for i in $(seq 1 100); do (exec 3<>/dev/tcp/127.0.0.1/${opts.port}) 2>/dev/null && break; sleep 0.05; done; echo "listening ${url} pid $pid"; trap 'kill -QUIT $pid; wait $pid; exit 0' TERM; wait $pid`;
  const [cmd, args] = pinned(SERVER_CORE, '/bin/bash', ['-c', script, 'nginx', NGINX, '-p', opts.prefix, '-c', file, '-e', path.join(opts.prefix, 'error.log')]);
  const server = await startServer({ name: opts.name ?? 'nginx', cmd, args, env: cleanEnv({}), ready: /listening (https?:\/\/\S+) pid \d+/ });
  const pid = Number(/listening \S+ pid (\d+)/.exec(server.output())?.[1]);
  server.cpuSeconds = () => cpuOf(pid);
  return server;
}
