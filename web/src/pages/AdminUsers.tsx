// Users (better-auth admin plugin): list with search and pages, ban/unban, change role.
import { useHeraldClient } from '@herald/client/react';
import { type FormEvent, useCallback, useEffect, useState } from 'react';
import { Alert } from '../components/Form';
import { errorMessage } from '../format';
import { useTexts } from '../locale';
import { useCurrentUser } from '../session';

interface AdminUser {
  id: string;
  name: string;
  email: string;
  role?: string | null;
  banned?: boolean | null;
  emailVerified: boolean;
}

const PAGE_SIZE = 20;

export function AdminUsersPage() {
  const { auth } = useHeraldClient();
  const { user: me } = useCurrentUser();
  const t = useTexts();
  const [users, setUsers] = useState<AdminUser[]>([]);
  const [total, setTotal] = useState(0);
  const [confirmBan, setConfirmBan] = useState<string | null>(null);
  const [offset, setOffset] = useState(0);
  const [searchInput, setSearchInput] = useState('');
  const [search, setSearch] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [loaded, setLoaded] = useState(false);

  const load = useCallback(async () => {
    const result = await auth.admin.listUsers({
      query: {
        limit: PAGE_SIZE,
        offset,
        sortBy: 'createdAt',
        sortDirection: 'desc',
        ...(search
          ? { searchField: 'email' as const, searchOperator: 'contains' as const, searchValue: search }
          : {}),
      },
    });
    setLoaded(true);
    if (result.error) {
      setError(errorMessage(result.error, t.users.listFailed, t));
      return;
    }
    const data = result.data as { users: AdminUser[]; total: number };
    setUsers(data.users);
    setTotal(data.total);
  }, [auth, offset, search, t]);

  useEffect(() => {
    void load();
  }, [load]);

  const run = async (work: () => Promise<{ error: unknown }>) => {
    setError(null);
    const result = await work();
    if (result.error) setError(errorMessage(result.error, undefined, t));
    await load();
  };

  const submitSearch = (event: FormEvent) => {
    event.preventDefault();
    setOffset(0);
    setSearch(searchInput.trim());
  };

  return (
    <section className="card">
      <h1>{t.users.title}</h1>
      <search>
        <form className="search" onSubmit={submitSearch}>
          <label className="inline-field">
            <span>{t.users.search}</span>
            <input type="search" value={searchInput} onChange={(e) => setSearchInput(e.target.value)} />
          </label>
          <button type="submit" className="button secondary">
            {t.users.searchButton}
          </button>
        </form>
      </search>
      <Alert>{error}</Alert>
      {!loaded ? <p className="muted">{t.common.loading}</p> : null}
      <div className="table-wrap">
        <table className="stack-table">
          <thead>
            <tr>
              <th scope="col">{t.users.colName}</th>
              <th scope="col">{t.users.colEmail}</th>
              <th scope="col">{t.users.colRole}</th>
              <th scope="col">{t.users.colStatus}</th>
              <th scope="col">{t.users.colActions}</th>
            </tr>
          </thead>
          <tbody>
            {users.map((u) => (
              <tr key={u.id}>
                <td data-label={t.users.colName}>{u.name}</td>
                <td data-label={t.users.colEmail}>{u.email}</td>
                <td data-label={t.users.colRole}>
                  <label className="sr-only" htmlFor={`role-${u.id}`}>
                    {t.users.roleOf(u.email)}
                  </label>
                  <select
                    id={`role-${u.id}`}
                    value={u.role ?? 'user'}
                    disabled={u.id === me?.id}
                    onChange={(e) =>
                      void run(() =>
                        auth.admin.setRole({ userId: u.id, role: e.target.value as 'user' | 'admin' }),
                      )
                    }
                  >
                    <option value="user">user</option>
                    <option value="admin">admin</option>
                  </select>
                </td>
                <td data-label={t.users.colStatus}>
                  {u.banned ? t.users.banned : u.emailVerified ? t.users.active : t.users.unverified}
                </td>
                <td data-label={t.users.colActions}>
                  {u.id === me?.id ? (
                    <span className="muted">{t.users.you}</span>
                  ) : u.banned ? (
                    <button
                      type="button"
                      className="button small secondary"
                      aria-label={t.users.unbanLabel(u.email)}
                      onClick={() => void run(() => auth.admin.unbanUser({ userId: u.id }))}
                    >
                      {t.users.unban}
                    </button>
                  ) : confirmBan === u.id ? (
                    // Banning ends the user's sessions, streams and sockets at once: asked twice.
                    <span className="confirm">
                      <button
                        type="button"
                        className="button small danger"
                        aria-label={t.users.confirmBanLabel(u.email)}
                        onClick={() => {
                          setConfirmBan(null);
                          void run(() => auth.admin.banUser({ userId: u.id }));
                        }}
                      >
                        {t.users.yesBan}
                      </button>
                      <button
                        type="button"
                        className="button small secondary"
                        onClick={() => setConfirmBan(null)}
                      >
                        {t.common.cancel}
                      </button>
                    </span>
                  ) : (
                    <button
                      type="button"
                      className="button small danger"
                      aria-label={t.users.banLabel(u.email)}
                      onClick={() => setConfirmBan(u.id)}
                    >
                      {t.users.ban}
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <nav className="pagination" aria-label={t.users.pages}>
        <button
          type="button"
          className="button secondary"
          disabled={offset === 0}
          onClick={() => setOffset(Math.max(0, offset - PAGE_SIZE))}
        >
          {t.users.previous}
        </button>
        <span>
          {total === 0 ? t.users.none : t.users.range(offset + 1, Math.min(offset + PAGE_SIZE, total), total)}
        </span>
        <button
          type="button"
          className="button secondary"
          disabled={offset + PAGE_SIZE >= total}
          onClick={() => setOffset(offset + PAGE_SIZE)}
        >
          {t.users.next}
        </button>
      </nav>
    </section>
  );
}
