// GET /client-config, once per page load, shared by every page that needs it: the social provider, where account
// emails go (SMTP or the service's log), and whether the service trusts this page's origin.
import type { OriginCheck } from '@herald/client';
import { useEffect, useState } from 'react';
import { apiBaseUrl } from './client';

export interface ClientConfig {
  socialProvider: { id: string; signInPath: '/auth/sign-in/social' | '/auth/sign-in/oauth2' } | null;
  emailDelivery?: 'smtp' | 'log' | 'disabled';
  origin?: OriginCheck;
}

let pending: Promise<ClientConfig | null> | undefined;

function load(): Promise<ClientConfig | null> {
  pending ??= fetch(`${apiBaseUrl()}/client-config`, { credentials: 'include' })
    .then((res) => (res.ok ? (res.json() as Promise<ClientConfig>) : null))
    .catch(() => {
      // Unreadable (network, or a cross-origin page CORS refuses): ask again next time.
      pending = undefined;
      return null;
    });
  return pending;
}

export function useClientConfig(): ClientConfig | null {
  const [config, setConfig] = useState<ClientConfig | null>(null);
  useEffect(() => {
    let live = true;
    void load().then((c) => {
      if (live) setConfig(c);
    });
    return () => {
      live = false;
    };
  }, []);
  return config;
}
