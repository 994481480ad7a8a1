import { useEffect, useState } from 'preact/hooks';

/**
 * Hash routes (`#/keys`, `#/agents/agt_…`): the server serves one page at `/`, so no path of the
 * console can meet a path of `/v1`, `/api`, `/channels` or `/widget`, and a reload needs no
 * fallback route on the server.
 */
export interface Route {
  page: string;
  id: string | undefined;
}

export function parseRoute(hash: string): Route {
  const [page, id] = hash.replace(/^#\/?/, '').split('/');
  return { page: page || 'overview', id: id ? decodeURIComponent(id) : undefined };
}

export function href(page: string, id?: string): string {
  return id ? `#/${page}/${encodeURIComponent(id)}` : `#/${page}`;
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.hash));
  useEffect(() => {
    const changed = () => setRoute(parseRoute(location.hash));
    addEventListener('hashchange', changed);
    return () => removeEventListener('hashchange', changed);
  }, []);
  return route;
}
