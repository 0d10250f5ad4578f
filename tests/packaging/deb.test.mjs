// The Debian package (CPack, packaging/CMakeLists.txt): built from the current build tree with
// cpack, inspected with dpkg-deb (control fields, the exact file list with owners and modes),
// unpacked into a scratch root whose binary must run (--version, doctor --json, a daemon
// answering a real MCP call), and checked against apt: `apt-get install --simulate` resolves
// its dependencies on this machine, and — as root — a real `apt-get install ./toolwarden_*.deb`
// runs inside a throwaway mount namespace whose /usr, /var and /etc are overlays, so the
// machine the suite runs on (shared, possibly a developer's) is never changed.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { initializeMsg, post, sleep } from '../e2e/lib/daemon.mjs';
import { BIN, BUILD_DIR, SOURCE_DIR, have, mustRun, run } from './lib/pkg.mjs';

const FILES = {
  './usr/bin/toolwarden': { mode: '-rwxr-xr-x' },
  './usr/lib/systemd/user/toolwarden.service': { mode: '-rw-r--r--', source: 'packaging/toolwarden.service' },
  './usr/lib/systemd/user/toolwarden.socket': { mode: '-rw-r--r--', source: 'packaging/toolwarden.socket' },
  './usr/share/man/man1/toolwarden.1.gz': { mode: '-rw-r--r--' },
  './usr/share/bash-completion/completions/toolwarden': { mode: '-rw-r--r--', source: 'packaging/toolwarden.bash' },
};

const tools = ['cpack', 'dpkg-deb'].filter((t) => !have(t));
const skip = tools.length > 0 && `${tools.join(', ')} not installed`;
const version = mustRun(BIN, ['--version']).trim().replace(/^toolwarden /, '');

let work;
let deb;
let root;
before(async () => {
  if (skip) return;
  work = await fsp.mkdtemp(path.join(os.tmpdir(), 'tw-deb-'));
  await fsp.chmod(work, 0o755); // apt's _apt user reads the .deb from here
  // -B keeps cpack's staging and output out of the build tree (tests may run in parallel).
  mustRun('cpack', ['-G', 'DEB', '--config', path.join(BUILD_DIR, 'CPackConfig.cmake'), '-B', work], { cwd: BUILD_DIR });
  const debs = fs.readdirSync(work).filter((f) => /^toolwarden_.*\.deb$/.test(f));
  assert.equal(debs.length, 1, `one .deb expected in ${work}: ${debs}`);
  deb = path.join(work, debs[0]);
  root = path.join(work, 'root');
  mustRun('dpkg-deb', ['-x', deb, root]);
});
after(async () => {
  if (work) await fsp.rm(work, { recursive: true, force: true });
});

describe('Debian package', { skip }, () => {
  test('is named toolwarden_VERSION_ARCH.deb', () => {
    const arch = mustRun('dpkg', ['--print-architecture']).trim();
    assert.equal(path.basename(deb), `toolwarden_${version}_${arch}.deb`);
  });

  test('control: package, version, architecture, maintainer, description, and Depends from dpkg-shlibdeps', () => {
    const field = (f) => mustRun('dpkg-deb', ['-f', deb, f]).trim();
    assert.equal(field('Package'), 'toolwarden');
    assert.equal(field('Version'), version);
    assert.equal(field('Architecture'), mustRun('dpkg', ['--print-architecture']).trim());
    assert.match(field('Maintainer'), /^[^<>]+ <[^<>@\s]+@[^<>@\s]+>$/);
    assert.equal(field('Section'), 'devel');
    assert.equal(field('Priority'), 'optional');
    const description = field('Description').split('\n');
    assert.ok(description[0].length > 10 && description[0].length <= 80, 'a one-line synopsis');
    assert.ok(description.length > 3, 'and an extended description');
    for (const line of description.slice(1)) assert.ok(line.length <= 80, `description line too long: ${line}`);
    // Every shared library the binary needs belongs to a package Depends names.
    const depends = field('Depends');
    const binary = path.join(root, 'usr/bin/toolwarden');
    const needed = [...mustRun('readelf', ['-d', binary]).matchAll(/\(NEEDED\).*\[(.+)\]/g)].map((m) => m[1]);
    const interp = /\bINTERP\b/.test(mustRun('readelf', ['-lW', binary]));
    if (needed.length === 0) {
      // The default build (TOOLWARDEN_STATIC_PIE): a static PIE, glibc included, needs no
      // loader and no shared library, so dpkg-shlibdeps rightly adds nothing.
      assert.equal(interp, false, 'no NEEDED library but a program interpreter');
      assert.match(mustRun('readelf', ['-hW', binary]), /Type:\s+DYN \(Position-Independent Executable file\)/);
      assert.equal(depends, '');
      return;
    }
    assert.equal(interp, true, 'NEEDED libraries but no program interpreter');
    assert.match(depends, /\blibc6 \(>= [\d.]+\)/);
    const ldd = mustRun('ldd', [binary]);
    for (const lib of needed) {
      // "libm.so.6 => /lib/x86_64-linux-gnu/libm.so.6 (0x…)" or "/lib64/ld-linux-x86-64.so.2 (0x…)"
      const line = ldd.split('\n').find((l) => l.includes(lib));
      const file = /=>\s*(\/\S+)/.exec(line ?? '')?.[1] ?? /^\s*(\/\S+)/.exec(line ?? '')?.[1];
      assert.ok(file, `${lib} not resolved by ldd:\n${ldd}`);
      // dpkg knows a file by the path its package ships (/lib/..., not usrmerge's /usr/lib/...).
      const owner = [file, fs.realpathSync(file)].map((f) => run('dpkg', ['-S', f])).find((r) => r.code === 0);
      assert.ok(owner, `no package owns ${file}`);
      const pkg = owner.stdout.split(':')[0];
      assert.match(depends, new RegExp(`(^|, )${pkg} `), `${lib} comes from ${pkg}, which Depends lacks`);
    }
  });

  test('holds exactly the binary, the two units, the man page and the completion, root-owned', () => {
    const listing = mustRun('dpkg-deb', ['-c', deb]).split('\n').filter(Boolean);
    const files = new Map();
    for (const line of listing) {
      const [mode, owner, , , , ...rest] = line.split(/\s+/);
      const name = rest.join(' ');
      assert.equal(owner, 'root/root', line);
      if (mode.startsWith('d')) assert.equal(mode, 'drwxr-xr-x', line);
      else files.set(name, mode);
    }
    assert.deepEqual([...files.keys()].sort(), Object.keys(FILES).sort());
    for (const [name, { mode }] of Object.entries(FILES)) assert.equal(files.get(name), mode, name);
  });

  test('ships the units and the completion as they are in packaging/, and the man page as built', () => {
    for (const [name, { source }] of Object.entries(FILES)) {
      if (!source) continue;
      assert.ok(fs.readFileSync(path.join(root, name)).equals(fs.readFileSync(path.join(SOURCE_DIR, source))), name);
    }
    const page = mustRun('sh', ['-c', `gzip -dc '${path.join(root, 'usr/share/man/man1/toolwarden.1.gz')}'`]);
    assert.equal(page, fs.readFileSync(path.join(BUILD_DIR, 'packaging', 'toolwarden.1'), 'utf8'));
    const rendered = run('man', ['-l', path.join(root, 'usr/share/man/man1/toolwarden.1.gz')], { env: { ...process.env, MANWIDTH: '100' } });
    if (rendered.code !== null) assert.match(rendered.stdout, /NAME\s+toolwarden - policy-checked/);
  });

  test('the unpacked binary is stripped and runs: --version and doctor --json', () => {
    const installed = path.join(root, 'usr/bin/toolwarden');
    assert.doesNotMatch(mustRun('readelf', ['-S', installed]), /\.debug_info/, 'debug info in the package');
    assert.equal(mustRun(installed, ['--version']), `toolwarden ${version}\n`);
    const mine = run(installed, ['doctor', '--json']);
    const built = run(BIN, ['doctor', '--json']);
    assert.ok([0, 1, 2].includes(mine.code), `doctor exit ${mine.code}: ${mine.stderr}`);
    assert.equal(mine.code, built.code, 'the packaged and the built binary judge this kernel alike');
    const report = JSON.parse(mine.stdout);
    assert.deepEqual(Object.keys(report).sort(), Object.keys(JSON.parse(built.stdout)).sort());
  });

  test('the unpacked binary serves MCP: job create, initialize with its token, clean SIGTERM', async () => {
    const installed = path.join(root, 'usr/bin/toolwarden');
    const dirs = path.join(work, 'daemon');
    const env = {
      ...process.env,
      TOOLWARDEN_RUNTIME_DIR: path.join(dirs, 'run'),
      TOOLWARDEN_STATE_DIR: path.join(dirs, 'state'),
      TOOLWARDEN_CONFIG: path.join(dirs, 'config.json'),
    };
    delete env.NOTIFY_SOCKET;
    await fsp.mkdir(path.join(dirs, 'run'), { recursive: true, mode: 0o700 });
    await fsp.chmod(path.join(dirs, 'run'), 0o700);
    await fsp.mkdir(path.join(dirs, 'wt'));
    const proc = spawn(installed, ['serve', '--listen', '127.0.0.1:0'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    proc.stderr.on('data', (b) => (stderr += b));
    const exited = new Promise((r) => proc.on('exit', (code, signal) => r({ code, signal })));
    try {
      const endpointFile = path.join(dirs, 'run', 'endpoint.json');
      for (let i = 0; !fs.existsSync(endpointFile); i++) {
        assert.ok(i < 200, `no endpoint.json after 10 s:\n${stderr}`);
        await sleep(50);
      }
      const job = JSON.parse(mustRun(installed, ['job', 'create', '--worktree', path.join(dirs, 'wt')], { env }));
      const res = await post(job.mcp_url, initializeMsg(1), {
        'Content-Type': 'application/json',
        Accept: 'application/json, text/event-stream',
        Authorization: `Bearer ${job.token}`,
      });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.json().result.serverInfo, { name: 'toolwarden', version });
    } finally {
      proc.kill('SIGTERM');
    }
    assert.deepEqual(await exited, { code: 0, signal: null }, stderr);
  });

  test('apt-get resolves its dependencies on this machine (install --simulate)', { skip: !have('apt-get') && 'no apt-get' }, () => {
    const r = run('apt-get', ['install', '--simulate', '--no-install-recommends', deb], { env: { ...process.env, LC_ALL: 'C' } });
    assert.equal(r.code, 0, r.stderr + r.stdout);
    assert.match(r.stdout, new RegExp(`^Inst toolwarden \\(${version.replace(/\./g, '\\.')} `, 'm'));
    assert.doesNotMatch(r.stdout, /^Inst (?!toolwarden )/m, 'needs nothing a Debian 12 system lacks');
  });
});

// A real `apt-get install ./toolwarden_*.deb`, then what an installed system offers: the binary
// on PATH, `man toolwarden`, the units at their real paths verified by systemd-analyze
// (ExecStart=/usr/bin/toolwarden and man:toolwarden(1) resolve), the completion, and a clean
// purge. Root only (dpkg writes root-owned files); inside `unshare --mount` with overlays, so
// every change vanishes with the namespace.
const realInstallSkip =
  skip ||
  (process.getuid() !== 0 && 'not root: a real apt-get install needs root (the scratch-root checks above ran)') ||
  (!have('unshare') && 'unshare (util-linux) is not installed');

describe('apt-get install ./toolwarden_*.deb in a throwaway mount namespace', { skip: realInstallSkip }, () => {
  test('installs, works from its installed paths, and purges cleanly', async (t) => {
    const hostState = () => ({
      binary: fs.existsSync('/usr/bin/toolwarden'),
      dpkg: run('dpkg-query', ['-W', '-f', '${Status}', 'toolwarden']).stdout,
    });
    const before = hostState();
    const ovl = path.join(work, 'overlay');
    await fsp.mkdir(ovl);
    const script = `
      set -u
      mount --make-rprivate / || exit 90
      for d in usr var etc; do
        mkdir -p "$OVL/$d.up" "$OVL/$d.work"
        mount -t overlay overlay -o "lowerdir=/$d,upperdir=$OVL/$d.up,workdir=$OVL/$d.work" "/$d" || exit 91
      done
      step() { name=$1; shift; out=$("$@" 2>&1); echo "@@ $name $?"; printf '%s\\n' "$out"; }
      export DEBIAN_FRONTEND=noninteractive LC_ALL=C
      step install apt-get install -y --no-install-recommends "$DEB"
      step status dpkg-query -W -f '\${Status} \${Version}' toolwarden
      step files dpkg -L toolwarden
      step version toolwarden --version
      step which sh -c 'command -v toolwarden'
      step man sh -c 'MANWIDTH=100 man toolwarden | head -5'
      mkdir -m 700 "$OVL/run"
      if command -v systemd-analyze >/dev/null; then
        step verify env XDG_RUNTIME_DIR="$OVL/run" systemd-analyze --user verify \\
          /usr/lib/systemd/user/toolwarden.service /usr/lib/systemd/user/toolwarden.socket
      fi
      step completion bash --noprofile --norc -c '. /usr/share/bash-completion/completions/toolwarden && complete -p toolwarden'
      step purge apt-get purge -y toolwarden
      step gone sh -c 'test ! -e /usr/bin/toolwarden && ! dpkg-query -W toolwarden 2>/dev/null | grep -q .'
    `;
    const r = run('unshare', ['--mount', 'sh', '-c', script], { env: { ...process.env, OVL: ovl, DEB: deb } });
    if (r.code === 90 || r.code === 91) {
      t.skip(`cannot set up the overlay mount namespace: ${r.stderr.trim()}`);
      return;
    }
    assert.equal(r.code, 0, r.stderr + r.stdout);
    const steps = {};
    for (const block of r.stdout.split(/^@@ /m).slice(1)) {
      const nl = block.indexOf('\n');
      const [name, rc] = block.slice(0, nl).split(' ');
      steps[name] = { rc: Number(rc), out: block.slice(nl + 1) };
    }
    const ok = (name) => {
      assert.ok(steps[name], `step ${name} did not run:\n${r.stdout}`);
      assert.equal(steps[name].rc, 0, `${name}:\n${steps[name].out}`);
      return steps[name].out;
    };
    assert.match(ok('install'), /Setting up toolwarden/);
    assert.equal(ok('status').trim(), `install ok installed ${version}`);
    const listed = new Set(ok('files').split('\n').filter(Boolean));
    for (const name of Object.keys(FILES)) assert.ok(listed.has(name.slice(1)), `dpkg -L lacks ${name}`);
    assert.equal(ok('version').trim(), `toolwarden ${version}`);
    assert.equal(ok('which').trim(), '/usr/bin/toolwarden');
    assert.match(ok('man'), /TOOLWARDEN\(1\)/);
    if (steps.verify) assert.equal(ok('verify'), '\n', 'systemd-analyze had something to say');
    assert.match(ok('completion'), /complete -F \S+ toolwarden/);
    ok('purge');
    ok('gone');
    // And the machine itself never saw any of it.
    assert.deepEqual(hostState(), before);
  });
});
