import { describe, expect, it } from 'vitest';
import { chooseToken, demoForced, engineBaseUrl, saveToken, TOKEN_KEY, type KeyValueStore } from './config';

class MemoryStore implements KeyValueStore {
  readonly data = new Map<string, string>();
  getItem(k: string) {
    return this.data.get(k) ?? null;
  }
  setItem(k: string, v: string) {
    this.data.set(k, v);
  }
  removeItem(k: string) {
    this.data.delete(k);
  }
}

describe('token', () => {
  it('takes ?token=, remembers it, and removes it from the URL', () => {
    const store = new MemoryStore();
    const c = chooseToken('http://h:5174/?token=abc&demo=0#x', store);
    expect(c.token).toBe('abc');
    expect(c.cleanedUrl).toBe('http://h:5174/?demo=0#x');
    expect(store.data.get(TOKEN_KEY)).toBe('abc');
    expect(chooseToken('http://h:5174/', store)).toEqual({ token: 'abc', cleanedUrl: null });
  });

  it('is null with neither, and survives a storage that throws', () => {
    expect(chooseToken('http://h/', new MemoryStore()).token).toBeNull();
    const broken: KeyValueStore = {
      getItem: () => {
        throw new Error('denied');
      },
      setItem: () => {
        throw new Error('denied');
      },
      removeItem: () => {},
    };
    expect(chooseToken('http://h/', broken).token).toBeNull();
    expect(chooseToken('http://h/?token=t', broken).token).toBe('t');
    expect(() => saveToken(broken, 'x')).not.toThrow();
  });

  it('saveToken stores and forgets', () => {
    const store = new MemoryStore();
    saveToken(store, 'x');
    expect(store.data.get(TOKEN_KEY)).toBe('x');
    saveToken(store, null);
    expect(store.data.has(TOKEN_KEY)).toBe(false);
  });
});

describe('engine URL and demo switch', () => {
  it('defaults to the same origin and trims a configured URL', () => {
    expect(engineBaseUrl(undefined)).toBe('');
    expect(engineBaseUrl('http://engine:8100/')).toBe('http://engine:8100');
  });

  it('?demo turns the demo on unless 0/false/no', () => {
    expect(demoForced('http://h/?demo')).toBe(true);
    expect(demoForced('http://h/?demo=1')).toBe(true);
    expect(demoForced('http://h/?demo=false')).toBe(false);
    expect(demoForced('http://h/')).toBe(false);
  });
});
