/**
 * Preloaded with `node --import` when /usr/bin/time is missing: prints the process's
 * peak RSS (KiB) on stderr as it exits.
 */
import { writeSync } from 'node:fs';

process.on('exit', () => {
  writeSync(2, `\nBENCH_MAX_RSS_KB=${process.resourceUsage().maxRSS}\n`);
});
