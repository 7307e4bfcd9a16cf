/**
 * `text` (latin1: every character under 256, as an HTTP head's are) as one sequential string.
 * A string made by joining others (`+`, a template) is a tree of its parts, and V8 walks the
 * tree and copies it into a new string each time Node writes it to a buffer (`latin1Write`
 * flattens first): for a head's text kept and written again at every answer (a kept file's
 * header lines, the lane's closing lines), made flat once instead of at every write.
 */
export function flatLatin1(text: string): string {
  return Buffer.from(text, 'latin1').toString('latin1');
}
