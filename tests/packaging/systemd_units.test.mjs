// The systemd user units of packaging/ (shipped in the Debian package as
// /usr/lib/systemd/user/toolwarden.{service,socket}): what they must say, what they must not
// say (nothing that blocks the sandbox's own namespaces), and `systemd-analyze --user verify`
// without a single message.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { BIN, BUILD_DIR, SOURCE_DIR, have, mustRun, run } from './lib/pkg.mjs';

const SERVICE = path.join(SOURCE_DIR, 'packaging', 'toolwarden.service');
const SOCKET = path.join(SOURCE_DIR, 'packaging', 'toolwarden.socket');
const MAN_GZ = path.join(BUILD_DIR, 'packaging', 'toolwarden.1.gz');

/** A unit file as {section: [[key, value], ...]} (comments and blank lines dropped). */
function parseUnit(file) {
  const out = {};
  let section = null;
  for (const raw of fs.readFileSync(file, 'utf8').split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const m = /^\[(.+)\]$/.exec(line);
    if (m) {
      section = m[1];
      out[section] ??= [];
      continue;
    }
    const i = line.indexOf('=');
    assert.ok(section && i > 0, `${path.basename(file)}: stray line ${JSON.stringify(line)}`);
    out[section].push([line.slice(0, i), line.slice(i + 1)]);
  }
  return out;
}

function values(unit, section, key) {
  return (unit[section] ?? []).filter(([k]) => k === key).map(([, v]) => v);
}

describe('toolwarden.service', () => {
  const unit = parseUnit(SERVICE);

  test('is a notify service running /usr/bin/toolwarden serve, restarted on failure', () => {
    assert.deepEqual(values(unit, 'Service', 'Type'), ['notify']);
    assert.deepEqual(values(unit, 'Service', 'ExecStart'), ['/usr/bin/toolwarden serve']);
    assert.deepEqual(values(unit, 'Service', 'Restart'), ['on-failure']);
    assert.deepEqual(values(unit, 'Unit', 'Documentation'), ['man:toolwarden(1)']);
    assert.deepEqual(values(unit, 'Install', 'WantedBy'), ['default.target']);
  });

  test('carries the hardening that works in a user manager', () => {
    for (const [key, value] of [
      ['NoNewPrivileges', 'yes'],
      ['LockPersonality', 'yes'],
      ['RestrictRealtime', 'yes'],
      ['SystemCallArchitectures', 'native'],
      ['UMask', '0077'],
    ]) {
      assert.deepEqual(values(unit, 'Service', key), [value], key);
    }
  });

  test('has nothing that would block the sandbox namespaces, mounts or programs', () => {
    // These need or restrict user/mount namespaces (which a user manager can only get by
    // putting the daemon in a user namespace of its own), hide the user's files from the
    // daemon, cut the loopback clients off, or install seccomp filters every sandboxed
    // program inherits (SystemCallFilter would stop the sandbox's own mount/unshare setup).
    const forbidden = /^(RestrictNamespaces|PrivateUsers|Private[A-Z]\w*|Protect[A-Z]\w*|SystemCallFilter|MemoryDenyWriteExecute|RestrictAddressFamilies|RestrictFileSystems|IPAddressDeny|DynamicUser|CapabilityBoundingSet|AmbientCapabilities|ReadOnlyPaths|InaccessiblePaths|TemporaryFileSystem|RootDirectory|RootImage|MountAPIVFS|BindPaths|BindReadOnlyPaths|NoExecPaths)$/;
    for (const [section, entries] of Object.entries(unit)) {
      for (const [key] of entries) assert.doesNotMatch(key, forbidden, `[${section}] ${key}= is there`);
    }
  });
});

describe('toolwarden.socket', () => {
  const unit = parseUnit(SOCKET);

  test('listens on one fixed loopback TCP address, which serve accepts and the man page names', () => {
    const listen = values(unit, 'Socket', 'ListenStream');
    assert.equal(listen.length, 1, 'serve takes exactly one socket');
    assert.match(listen[0], /^127\.0\.0\.1:\d+$/);
    for (const other of ['ListenDatagram', 'ListenSequentialPacket', 'Accept', 'Service']) {
      assert.deepEqual(values(unit, 'Socket', other), [], `${other}= would break the pairing with serve`);
    }
    assert.deepEqual(values(unit, 'Install', 'WantedBy'), ['sockets.target']);
    const man = mustRun('sh', ['-c', `gzip -dc '${MAN_GZ}'`]);
    assert.ok(man.includes(listen[0]), `the man page does not name ${listen[0]}`);
  });
});

describe('systemd-analyze --user verify', { skip: !have('systemd-analyze') && 'systemd-analyze is not installed (Debian package systemd)' }, () => {
  // verify checks that ExecStart= is executable and that `man toolwarden(1)` resolves, so the
  // check runs on copies whose one difference is ExecStart= pointing at the built binary (the
  // Debian package test checks /usr/bin/toolwarden itself), with MANPATH at the built page.
  let dir;
  before(async () => {
    dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'tw-units-'));
    await fsp.mkdir(path.join(dir, 'units'));
    await fsp.mkdir(path.join(dir, 'man', 'man1'), { recursive: true });
    await fsp.mkdir(path.join(dir, 'run'), { mode: 0o700 });
    await fsp.copyFile(MAN_GZ, path.join(dir, 'man', 'man1', 'toolwarden.1.gz'));
    const service = await fsp.readFile(SERVICE, 'utf8');
    const rewritten = service.replace(/^ExecStart=\/usr\/bin\/toolwarden /m, `ExecStart=${BIN} `);
    assert.notEqual(rewritten, service, 'ExecStart=/usr/bin/toolwarden not found');
    await fsp.writeFile(path.join(dir, 'units', 'toolwarden.service'), rewritten);
    await fsp.copyFile(SOCKET, path.join(dir, 'units', 'toolwarden.socket'));
  });
  after(async () => {
    if (dir) await fsp.rm(dir, { recursive: true, force: true });
  });

  function verify(...units) {
    return run('systemd-analyze', ['--user', 'verify', ...units.map((u) => path.join(dir, 'units', u))], {
      env: { ...process.env, XDG_RUNTIME_DIR: path.join(dir, 'run'), MANPATH: path.join(dir, 'man'), SYSTEMD_LOG_COLOR: '0' },
    });
  }

  test('is clean: exit 0 and not one message', () => {
    const r = verify('toolwarden.service', 'toolwarden.socket');
    assert.equal(r.code, 0, r.stderr + r.stdout);
    assert.equal(r.stderr + r.stdout, '', 'systemd-analyze had something to say');
  });

  test('would catch a mistake (the check can fail)', async () => {
    const broken = path.join(dir, 'units', 'toolwarden-broken.service');
    const text = await fsp.readFile(path.join(dir, 'units', 'toolwarden.service'), 'utf8');
    await fsp.writeFile(broken, text.replace('LockPersonality=yes', 'LockPersonalty=yes'));
    const r = verify('toolwarden-broken.service');
    assert.match(r.stderr + r.stdout, /Unknown key.*LockPersonalty/);
  });
});
