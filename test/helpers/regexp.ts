/**
 * Text a test expects verbatim inside a pattern: a version ("20.10.24+dfsg1"),
 * an image reference, a path.
 */

/** `text` with every character a RegExp gives a meaning escaped, so it matches only itself. */
export function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
}
