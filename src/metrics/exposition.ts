/**
 * Prometheus text exposition format (version 0.0.4), written by hand for the families sleeve
 * keeps itself (see http-metrics.ts for why): HELP and TYPE lines, then one line per sample.
 */
/** Content type of the text format. */
export const METRICS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

export type MetricType = 'counter' | 'gauge' | 'histogram';

function escapeLabelValue(value: string): string {
  return value.replace(/[\\"\n]/g, (c) => (c === '\n' ? '\\n' : `\\${c}`));
}

function escapeHelp(text: string): string {
  return text.replace(/[\\\n]/g, (c) => (c === '\n' ? '\\n' : '\\\\'));
}

/** `{a="1",b="2"}` for the given pairs, in their order; empty for none. */
export function formatLabels(pairs: readonly (readonly [string, string])[]): string {
  if (pairs.length === 0) return '';
  return `{${pairs.map(([k, v]) => `${k}="${escapeLabelValue(v)}"`).join(',')}}`;
}

function formatValue(value: number): string {
  if (Number.isNaN(value)) return 'NaN';
  if (value === Infinity) return '+Inf';
  if (value === -Infinity) return '-Inf';
  return String(value);
}

/** Collects families and renders them as one text. */
export class Exposition {
  private readonly lines: string[] = [];

  /** Starts a family; its samples follow with `sample`. */
  family(name: string, type: MetricType, help: string): this {
    this.lines.push(`# HELP ${name} ${escapeHelp(help)}`, `# TYPE ${name} ${type}`);
    return this;
  }

  /** One sample line; `labels` as made by formatLabels. */
  sample(name: string, labels: string, value: number): this {
    this.lines.push(`${name}${labels} ${formatValue(value)}`);
    return this;
  }

  /** A family of one unlabelled sample. */
  single(name: string, type: 'counter' | 'gauge', help: string, value: number): this {
    return this.family(name, type, help).sample(name, '', value);
  }

  toString(): string {
    return this.lines.length === 0 ? '' : `${this.lines.join('\n')}\n`;
  }
}
