import { defineConfig } from 'vitest/config';

// 5174 is the Aquarium's fixed port (docs and compose point at it); strictPort makes a
// clash fail loudly instead of silently moving to another port.
export default defineConfig({
  server: { port: 5174, strictPort: true },
  preview: { port: 5174, strictPort: true },
  test: {
    environment: 'node',
    include: ['src/**/*.test.ts'],
  },
});
