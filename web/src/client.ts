// The one Herald client of the app. Same origin as the page by default (the service serves the app, and the
// development server proxies the API); VITE_HERALD_API_URL points a separately deployed build at its API.
import { createHeraldClient, type HeraldClient } from '@herald/client';

export function apiBaseUrl(): string {
  const configured = import.meta.env.VITE_HERALD_API_URL;
  return typeof configured === 'string' && configured !== ''
    ? configured.replace(/\/+$/, '')
    : window.location.origin;
}

export function createClient(): HeraldClient {
  return createHeraldClient({ baseURL: apiBaseUrl() });
}
