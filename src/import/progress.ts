import type { ImportReporter } from './musicbrainz.js';

function mib(bytes: number): string {
  return `${(bytes / 1048576).toFixed(bytes < 10 * 1048576 ? 1 : 0)} MiB`;
}

function duration(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = String(s % 60).padStart(2, '0');
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${sec}` : `${m}:${sec}`;
}

function count(n: number): string {
  return n.toLocaleString('en-US');
}

interface Out {
  write(text: string): unknown;
  columns?: number;
}

/** One line per file and per phase: for logs and pipes. */
export function plainReporter(out: Out): ImportReporter {
  return {
    note: (m) => out.write(`${m}\n`),
    fileStart() {},
    fileProgress() {},
    fileDone: (file, rows, skipped, ms) =>
      out.write(`mbdump/${file}: ${count(rows)} rows read${skipped > 0 ? `, ${count(skipped)} malformed rows skipped` : ''} in ${(ms / 1000).toFixed(1)} s\n`),
    applyStart() {
      out.write("applying the staged rows to sleeve's catalogue (one transaction)\n");
    },
    applyStep() {},
    applyDone: (ms) => out.write(`applied in ${(ms / 1000).toFixed(1)} s\n`),
    end() {},
  };
}

/**
 * A progress bar redrawn in place on a terminal: the file, bytes done of its size, rows
 * per second and the time left; a line stays behind for each finished file.
 */
export function ttyReporter(out: Out, now: () => number = Date.now): ImportReporter {
  let file = '';
  let size = 0;
  let fromByte = 0;
  let started = 0;
  let applyStarted = 0;
  let step = '';
  let spinner: ReturnType<typeof setInterval> | undefined;
  const width = () => Math.max(40, Math.min(out.columns || 100, 120));
  const draw = (line: string) => out.write(`\r\x1b[2K${line.slice(0, width() - 1)}`);
  return {
    note(m) {
      out.write(`\r\x1b[2K${m}\n`);
    },
    fileStart(name, total, from) {
      file = name.replace(/^cover_art_archive\./, '');
      size = total;
      fromByte = from;
      started = now();
    },
    fileProgress(bytes, rows) {
      const elapsed = now() - started;
      const share = size > 0 ? bytes / size : 1;
      const barWidth = 24;
      const filled = Math.round(share * barWidth);
      const rate = elapsed > 0 ? (rows / elapsed) * 1000 : 0;
      const byteRate = elapsed > 0 ? (bytes - fromByte) / elapsed : 0;
      const eta = byteRate > 0 ? (size - bytes) / byteRate : Number.NaN;
      // The bar itself only where there is room for it.
      const bar = width() >= 100 ? ` ${'█'.repeat(filled)}${'░'.repeat(barWidth - filled)}` : '';
      draw(
        `${file.padEnd(24)}${bar} ${String(Math.floor(share * 100)).padStart(3)}%  ${mib(bytes)}/${mib(size)}  ${count(Math.round(rate))} rows/s  ETA ${Number.isFinite(eta) ? duration(eta) : '?'}`,
      );
    },
    fileDone(name, rows, skipped, ms) {
      out.write(
        `\r\x1b[2K✓ mbdump/${name}: ${count(rows)} rows${skipped > 0 ? ` (${count(skipped)} malformed skipped)` : ''} in ${duration(ms)} (${count(Math.round(ms > 0 ? (rows / ms) * 1000 : rows))} rows/s)\n`,
      );
    },
    applyStart() {
      applyStarted = now();
      const frames = '⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏';
      let i = 0;
      spinner = setInterval(() => draw(`${frames[i++ % frames.length]} applying to sleeve's catalogue: ${step}  ${duration(now() - applyStarted)}`), 200);
      spinner.unref();
    },
    applyStep(s) {
      step = s;
    },
    applyDone(ms) {
      if (spinner !== undefined) clearInterval(spinner);
      spinner = undefined;
      out.write(`\r\x1b[2K✓ applied to sleeve's catalogue in ${duration(ms)}\n`);
    },
    end() {
      if (spinner !== undefined) clearInterval(spinner);
      spinner = undefined;
      // Leave the cursor at the start of a clean line for whatever is printed next.
      out.write('\r\x1b[2K');
    },
  };
}
