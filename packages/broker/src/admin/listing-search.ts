/**
 * The `?search=` filter of the name listings (queues, consumer groups, the
 * console's queues): `column` contains the text bound at `param` (a plain
 * substring, no wildcards to escape), or every row when that text is null.
 */
export const NAME_MATCHES = (column: string, param: string): string => `(${param}::text is null or strpos(${column}, ${param}::text) > 0)`;
