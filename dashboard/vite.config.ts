import type { ProxyOptions } from 'vite';
import { defineConfig } from 'vitest/config';

// 5174 is the Aquarium's fixed port (docs and compose point at it); strictPort makes a
// clash fail loudly instead of silently moving to another port.
//
// The page talks to its own origin; /v1 is proxied to the context engine (the event stream
// included: the proxy passes SSE through unbuffered). HER_OS_ENGINE_URL points the proxy
// elsewhere (`her-os up` sets it from its context-engine port; the browser tests to theirs).
declare const process: { env: Record<string, string | undefined> }; // Node's, without @types/node
const engine = process.env['HER_OS_ENGINE_URL'] || 'http://127.0.0.1:8100';
// The few Node shapes used below (this config is type-checked without @types/node).
interface Emitter {
  on(event: string, listener: (...args: never[]) => void): unknown;
}
interface Upstream {
  readonly complete: boolean;
  on(event: 'close', listener: () => void): unknown;
}
interface Downstream {
  readonly writableEnded: boolean;
  destroy(): void;
}

const proxy: Record<string, ProxyOptions> = {
  '/v1': {
    target: engine,
    changeOrigin: true,
    ws: false,
    // When the engine goes away mid-response (a restart, a crash), its socket closes without
    // ending the chunked body, and the proxy alone would keep the browser's side open for
    // ever: the event stream would never notice. End the browser's side too, so EventSource
    // errors and the dashboard reconnects.
    configure: (server) => {
      (server as unknown as Emitter).on('proxyRes', (upstream: Upstream, _req: unknown, res: Downstream) => {
        upstream.on('close', () => {
          if (!upstream.complete && !res.writableEnded) res.destroy();
        });
      });
    },
  },
};

export default defineConfig({
  server: { port: 5174, strictPort: true, proxy },
  preview: { port: 5174, strictPort: true, proxy },
  test: {
    environment: 'node',
    include: ['src/**/*.test.ts'],
  },
});
