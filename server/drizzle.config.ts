import { defineConfig } from 'drizzle-kit';

export default defineConfig({
  dialect: 'postgresql',
  schema: './src/infra/schema/index.ts',
  out: './src/infra/migrations',
  casing: 'snake_case',
});
