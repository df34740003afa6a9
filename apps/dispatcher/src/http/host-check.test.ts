import { describe, expect, it } from 'vitest';
import { resolveDoorOptions } from './door-options.js';
import { HostCheck } from './host-check.js';

describe('HostCheck', () => {
  const loopback = new HostCheck(resolveDoorOptions({ listenHost: '127.0.0.1' }));

  it('on a loopback listener serves localhost, 127.0.0.1 and [::1] on any port, and refuses other hosts with 421', () => {
    for (const host of ['127.0.0.1:8080', 'localhost:1', 'LOCALHOST', '[::1]:9']) expect(() => loopback.check(host, undefined), host).not.toThrow();
    for (const host of ['evil.example.com', 'evil.example.com:8080', '127.0.0.1.nip.io', '', 'a b', undefined]) {
      expect(() => loopback.check(host, undefined), String(host)).toThrow(expect.objectContaining({ code: 'HOST_NOT_ALLOWED', httpStatus: 421 }) as Error);
    }
  });

  it('accepts no Origin (not a browser) and the same origin; refuses a foreign one with 403', () => {
    expect(() => loopback.check('127.0.0.1:8080', 'http://127.0.0.1:8080')).not.toThrow();
    for (const origin of ['http://evil.example.com', 'null', 'http://127.0.0.1:9999', 'http://localhost:8080']) {
      expect(() => loopback.check('127.0.0.1:8080', origin), origin).toThrow(expect.objectContaining({ code: 'ORIGIN_NOT_ALLOWED', httpStatus: 403 }) as Error);
    }
  });

  it('on any other listener serves any Host unless hosts are configured, and takes configured origins', () => {
    const open = new HostCheck(resolveDoorOptions({ listenHost: '0.0.0.0', allowedOrigins: ['https://console.example.com'] }));
    expect(() => open.check('fleet.internal:8080', undefined)).not.toThrow();
    expect(() => open.check('fleet.internal:8080', 'https://console.example.com')).not.toThrow();
    expect(() => open.check('fleet.internal:8080', 'https://evil.example.com')).toThrow(expect.objectContaining({ code: 'ORIGIN_NOT_ALLOWED' }) as Error);
    const named = new HostCheck(resolveDoorOptions({ listenHost: '0.0.0.0', allowedHosts: ['fleet.internal', 'other:443'] }));
    expect(() => named.check('fleet.internal:8080', undefined)).not.toThrow();
    expect(() => named.check('other:443', undefined)).not.toThrow();
    expect(() => named.check('other:444', undefined)).toThrow(expect.objectContaining({ code: 'HOST_NOT_ALLOWED' }) as Error);
  });

  it('answers a Host the same every time it is asked, through a flood of distinct ones', () => {
    for (let round = 0; round < 3; round++) {
      expect(() => loopback.check('127.0.0.1:8080', undefined)).not.toThrow();
      expect(() => loopback.check('evil.example.com', undefined)).toThrow(expect.objectContaining({ code: 'HOST_NOT_ALLOWED' }) as Error);
      for (let i = 0; i < 300; i++) expect(() => loopback.check(`evil${i}.example.com`, undefined)).toThrow(expect.objectContaining({ code: 'HOST_NOT_ALLOWED' }) as Error);
    }
    expect(() => loopback.check('localhost:1', undefined)).not.toThrow();
  });
});

describe('door options', () => {
  it('default the unauthenticated cap under the overall one, and refuse it above', () => {
    const o = resolveDoorOptions({ maxConnections: 100 });
    expect(o.maxUnauthenticatedConnections).toBe(100);
    expect(() => resolveDoorOptions({ maxConnections: 10, maxUnauthenticatedConnections: 11 })).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID' }) as Error);
  });
});
