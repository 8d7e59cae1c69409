// The web app's entry: one Herald client for the page, its provider around the page table, and the SDK's
// stylesheet before the app's own.
import { HeraldProvider } from '@herald/client/react';
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { App } from './App';
import { createClient } from './client';
import '@herald/client/styles.css';
import './styles.css';

const root = document.getElementById('root');
if (!root) throw new Error('index.html has no #root element');
const client = createClient();
createRoot(root).render(
  <StrictMode>
    <HeraldProvider client={client}>
      <App />
    </HeraldProvider>
  </StrictMode>,
);
