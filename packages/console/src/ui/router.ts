import { useEffect, useState } from 'preact/hooks';

/** Where the page is: `#/queues/orders?partition=p1` → `{ parts: ['queues', 'orders'], query: {partition: 'p1'} }`. */
interface Location {
  parts: string[];
  query: URLSearchParams;
}

function read(): Location {
  const hash = window.location.hash.replace(/^#\/?/, '');
  const [path = '', search = ''] = hash.split('?', 2);
  return { parts: path.split('/').filter(Boolean).map(decodeURIComponent), query: new URLSearchParams(search) };
}

export function useLocation(): Location {
  const [loc, setLoc] = useState(read);
  useEffect(() => {
    const on = () => setLoc(read());
    window.addEventListener('hashchange', on);
    return () => window.removeEventListener('hashchange', on);
  }, []);
  return loc;
}

/** The hash of a page: `href('queues', 'a/b', {partition: 'x'})` → `#/queues/a%2Fb?partition=x`. */
export function href(...args: (string | Record<string, string | undefined>)[]): string {
  const parts: string[] = [];
  const query = new URLSearchParams();
  for (const a of args) {
    if (typeof a === 'string') parts.push(encodeURIComponent(a));
    else for (const [k, v] of Object.entries(a)) if (v !== undefined && v !== '') query.set(k, v);
  }
  return `#/${parts.join('/')}${query.size ? `?${query}` : ''}`;
}

export function navigate(to: string): void {
  window.location.hash = to;
}
