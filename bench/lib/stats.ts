/** Small statistics and formatting helpers for the benchmark reports. */

export function median(values: number[]): number {
  if (values.length === 0) return Number.NaN;
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

export function min(values: number[]): number {
  return values.length === 0 ? Number.NaN : Math.min(...values);
}

export function max(values: number[]): number {
  return values.length === 0 ? Number.NaN : Math.max(...values);
}

/** 12345.6 → "12,346". */
export function fmtInt(n: number): string {
  return Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '–';
}

/** Milliseconds with a sensible number of decimals; below 1 ms shown in µs. */
export function fmtMs(ms: number): string {
  if (!Number.isFinite(ms)) return '–';
  if (ms < 1) return `${Math.round(ms * 1000)} µs`;
  if (ms < 10) return `${ms.toFixed(2)} ms`;
  if (ms < 100) return `${ms.toFixed(1)} ms`;
  return `${Math.round(ms)} ms`;
}

export function fmtRatio(r: number): string {
  return Number.isFinite(r) ? r.toFixed(3) : '–';
}

export function fmtMiB(kb: number): string {
  return Number.isFinite(kb) ? `${(kb / 1024).toFixed(1)} MiB` : '–';
}

/** "median [min–max]" of a series, formatted by `f`. */
export function summary(values: number[], f: (n: number) => string): string {
  return `${f(median(values))} [${f(min(values))}–${f(max(values))}]`;
}

/** A GitHub-flavoured markdown table; columns whose header starts with ">" are right-aligned. */
export function table(header: string[], rows: string[][]): string {
  const right = header.map((h) => h.startsWith('>'));
  const head = header.map((h) => (h.startsWith('>') ? h.slice(1) : h));
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length), 3));
  const cell = (text: string, i: number) => (right[i] ? text.padStart(widths[i] as number) : text.padEnd(widths[i] as number));
  const line = (cells: string[]) => `| ${cells.map(cell).join(' | ')} |`;
  const rule = `|${widths.map((w, i) => (right[i] ? `${'-'.repeat(w + 1)}:` : `${'-'.repeat(w + 2)}`)).join('|')}|`;
  return [line(head), rule, ...rows.map(line)].join('\n');
}

export function passFail(ok: boolean): string {
  return ok ? 'MET' : 'MISSED';
}
