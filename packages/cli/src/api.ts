// Paging of the listing routes. Each call itself goes through the client's
// typed route calls (`queen.api.<route>`), named and typed by the protocol's
// route table.

/** Page size for the paged listings (the route's default). */
export const PAGE = 1000;

/** Every item of a listing paged with `limit`/`offset`: pages until one comes back short. */
export async function allPages<T>(fetchPage: (query: { limit: number; offset: number }) => Promise<T[]>): Promise<T[]> {
  const out: T[] = [];
  for (let offset = 0; ; offset += PAGE) {
    const page = await fetchPage({ limit: PAGE, offset });
    out.push(...page);
    if (page.length < PAGE) return out;
  }
}
