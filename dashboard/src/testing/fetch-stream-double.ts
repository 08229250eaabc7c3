// A fetch double for the event stream (imported by *.test.ts only): each request is recorded
// and answered with a response whose body the test writes, chunk by chunk, and ends; the
// request's abort signal errors the body as a browser's fetch does.
import type { FetchLike } from '../api';

export interface StreamCall {
  url: string;
  headers: Record<string, string>;
  init: RequestInit | undefined;
  write(text: string): void;
  writeBytes(bytes: Uint8Array): void;
  end(): void;
  readonly aborted: boolean;
}

export interface Answer {
  status?: number;
  contentType?: string;
}

export function fetchStreamDouble(answer: (url: string) => Answer | Error = () => ({})) {
  const calls: StreamCall[] = [];
  const encoder = new TextEncoder();
  const fetcher: FetchLike = async (url, init) => {
    let controller!: ReadableStreamDefaultController<Uint8Array>;
    let open = true;
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        controller = c;
      },
    });
    const signal = init?.signal ?? undefined;
    const call: StreamCall = {
      url,
      headers: { ...((init?.headers ?? {}) as Record<string, string>) },
      init,
      write: (text) => call.writeBytes(encoder.encode(text)),
      writeBytes: (bytes) => {
        if (open) controller.enqueue(bytes);
      },
      end: () => {
        if (open) controller.close();
        open = false;
      },
      get aborted() {
        return signal?.aborted ?? false;
      },
    };
    calls.push(call);
    signal?.addEventListener('abort', () => {
      if (open) controller.error(new DOMException('The operation was aborted.', 'AbortError'));
      open = false;
    });
    const a = answer(url);
    if (a instanceof Error) throw a;
    return new Response(body, {
      status: a.status ?? 200,
      headers: { 'Content-Type': a.contentType ?? 'text/event-stream; charset=utf-8' },
    });
  };
  const latest = (): StreamCall => {
    const last = calls.at(-1);
    if (!last) throw new Error('no request was made');
    return last;
  };
  return { fetcher, calls, latest };
}

/** Let promise chains and stream reads run (real timers). */
export async function settle(rounds = 5): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise((resolve) => setTimeout(resolve, 0));
}
