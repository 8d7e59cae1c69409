// The app's pages are exactly the pages of the service's table of paths (@herald/server/site-paths): the service
// answers HTML navigations to them with the app and the development proxy leaves them to Vite, so a page added
// to one side only would be a 404 (or a JSON answer) in the browser. The typecheck catches it at the page table;
// this catches a table widened past its keys.
import { SITE_PATHS } from '@herald/server/site-paths';
import { describe, expect, it } from 'vitest';
import { PAGES } from '../src/App';

describe('pages', () => {
  it('the app renders exactly the pages of the table of paths', () => {
    const tablePages = SITE_PATHS.filter((p) => p.page).map((p) => p.path);
    expect(Object.keys(PAGES).sort()).toEqual([...tablePages].sort());
  });

  it('no page lies where the API takes every path (the app would never be served there)', () => {
    const hidden = Object.keys(PAGES).filter((page) =>
      SITE_PATHS.some((p) => p.api === 'all' && (page === p.path || page.startsWith(`${p.path}/`))),
    );
    expect(hidden).toEqual([]);
  });
});
