// workload.js — FoundationDB's own Node.js binding (npm `foundationdb`, its prebuilt N-API addon,
// unmodified) running on reclayer's libfdb_c.so. The addon links libfdb_c.so
// by name; the test runs with LD_LIBRARY_PATH=build/fdb so reclayer's library is the one found.
// The database is the cluster file in argv[2] (a reclayer cluster, or RL_FDBC_URL names an
// embedded database). Every step asserts its outcome; the process exits 1 on the first failure.
'use strict';
const assert = require('assert');
const fdb = require('foundationdb');

fdb.setAPIVersion(710);
// The library the addon bound: reclayer's, not some other libfdb_c.so on the system.
const maps = require('fs').readFileSync('/proc/self/maps', 'utf8').split('\n').filter(l => l.includes('libfdb_c.so'));
assert.ok(maps.length > 0, 'libfdb_c.so is not mapped');
if (process.env.RL_FDBC_LIB) {
  const want = require('fs').realpathSync(process.env.RL_FDBC_LIB);
  assert.ok(maps.every(l => l.trim().endsWith(want)), `the addon bound ${maps[0].trim().split(/\s+/).pop()}, not ${want}`);
}
const db = fdb.open(process.argv[2]);
const steps = [];
const step = (name, fn) => steps.push([name, fn]);
const le64 = n => { const b = Buffer.alloc(8); b.writeBigInt64LE(BigInt(n)); return b; };

step('set, get, clear', async () => {
  await db.clearRange('', '\xff');
  await db.set('hello', 'world');
  assert.strictEqual((await db.get('hello')).toString(), 'world');
  await db.clear('hello');
  assert.strictEqual(await db.get('hello'), undefined);
});

step('ranges and selectors', async () => {
  await db.doTransaction(async tn => { for (let i = 0; i < 100; i++) tn.set('k' + String(i).padStart(3, '0'), 'v' + i); });
  const all = await db.getRangeAll('k', 'l');
  assert.strictEqual(all.length, 100);
  all.forEach(([k, v], i) => { assert.strictEqual(k.toString(), 'k' + String(i).padStart(3, '0')); assert.strictEqual(v.toString(), 'v' + i); });
  const rev = await db.getRangeAll('k', 'l', { reverse: true, limit: 5 });
  assert.deepStrictEqual(rev.map(([k]) => k.toString()), ['k099', 'k098', 'k097', 'k096', 'k095']);
  assert.strictEqual((await db.getKey(fdb.keySelector.firstGreaterThan('k010'))).toString(), 'k011');
  assert.strictEqual((await db.getKey(fdb.keySelector.lastLessThan('k010'))).toString(), 'k009');
  assert.strictEqual((await db.getKey(fdb.keySelector(fdb.keySelector.firstGreaterOrEqual('k010').key, false, 5))).toString(), 'k014');
  await db.clearRange('k050', 'k060');
  assert.strictEqual((await db.getRangeAll('k', 'l')).length, 90);
});

step('read-your-writes inside a transaction', async () => {
  await db.doTransaction(async tn => {
    tn.set('ryw', 'a');
    assert.strictEqual((await tn.get('ryw')).toString(), 'a');
    tn.clear('ryw');
    assert.strictEqual(await tn.get('ryw'), undefined);
  });
});

step('conflicts retried through on_error', async () => {
  await db.set('counter', '0');
  let tries = 0;
  const n = 8;
  await Promise.all(Array.from({ length: n }, () => db.doTransaction(async tn => {
    tries++;
    const x = parseInt((await tn.get('counter')).toString(), 10);
    await new Promise(r => setTimeout(r, 2));
    tn.set('counter', String(x + 1));
  })));
  assert.strictEqual((await db.get('counter')).toString(), String(n));
  assert.ok(tries >= n);
  console.log(`  ${n} increments in ${tries} attempts`);
});

step('not_committed (1020) from a raw transaction', async () => {
  const t1 = db.rawCreateTransaction();
  await t1.get('cx');
  await db.set('cx', 'other');
  t1.set('cy', '1');
  let code = 0;
  try { await t1.rawCommit(); } catch (e) { code = e.code; }
  assert.strictEqual(code, 1020);
});

step('atomic add', async () => {
  await db.clear('sum');
  for (let i = 1; i <= 10; i++) await db.add('sum', le64(i));
  assert.strictEqual((await db.get('sum')).readBigInt64LE(), 55n);
});

step('versionstamps', async () => {
  await db.clearRange('vs', 'vt');
  const vs = await db.doTransaction(async tn => {
    tn.setVersionstampSuffixedKey('vs', 'x');
    return tn.getVersionstamp();
  });
  const stamp = await vs.promise;
  assert.strictEqual(stamp.length, 10);
  const rows = await db.getRangeAll('vs', 'vt');
  assert.strictEqual(rows.length, 1);
  assert.ok(rows[0][0].equals(Buffer.concat([Buffer.from('vs'), stamp])), 'the key carries the committed versionstamp');
});

step('the special-key space: status json and the cluster file', async () => {
  const sk = name => Buffer.concat([Buffer.from([0xff, 0xff]), Buffer.from(name)]);
  const doc = JSON.parse((await db.get(sk('/status/json'))).toString());
  assert.strictEqual(doc.client.database_status.available, true);
  assert.strictEqual(doc.cluster.database_available, true);
  assert.ok(Number.isInteger(doc.client.timestamp));
  const conn = await db.get(sk('/connection_string'));
  if (process.env.RL_FDBC_URL) {
    assert.strictEqual(conn, undefined, 'an embedded database has no connection string');
  } else {
    const file = require('fs').readFileSync(process.argv[2], 'utf8').split('\n').find(l => l && !l.startsWith('#'));
    assert.strictEqual(conn.toString(), file.trim());
    assert.strictEqual((await db.get(sk('/cluster_file_path'))).toString(), process.argv[2]);
    assert.ok(Object.values(doc.cluster.processes).some(p => p.roles[0].role === 'storage'));
  }
});

step('read version and snapshot', async () => {
  const t = db.rawCreateTransaction();
  const rv = await t.getReadVersion();
  const v = Buffer.isBuffer(rv) ? rv.readBigUInt64BE() : BigInt(rv);
  assert.ok(v > 0n, `read version ${v}`);
  const t2 = db.rawCreateTransaction();
  t2.setReadVersion(rv);
  assert.strictEqual((await t2.get('counter')).toString(), '8');
  assert.strictEqual((await t.snapshot().get('counter')).toString(), '8');
});

step('size estimates: getEstimatedRangeSizeBytes and getRangeSplitPoints', async () => {
  // 40 pairs of 30,006 bytes, each above the sampling threshold 250 * (6 + 100): the byte sample
  // holds each with its exact size, so the answers are exact (docs/design.md §4, "Size estimates").
  const v = Buffer.alloc(30000, 'v');
  await db.doTransaction(async tn => { for (let i = 0; i < 40; i++) tn.set(`est/${String(i).padStart(2, '0')}`, v); });
  await db.get('est/00'); // a read at a fresh version: the storage server has applied the write
  assert.strictEqual(await db.getEstimatedRangeSizeBytes('est/', 'est0'), 40 * 30006);
  const keys = (await db.getRangeSplitPoints('est/', 'est0', 100000)).map(k => k.toString());
  const want = ['est/'];
  for (let i = 3; i < 40; i += 3) want.push(`est/${String(i).padStart(2, '0')}`);
  want.push('est0');
  assert.deepStrictEqual(keys, want);
  let code = 0;
  try { await db.getRangeSplitPoints('est0', 'est/', 100000); } catch (e) { code = e.code; }
  assert.strictEqual(code, 2005, 'inverted_range');
  await db.clearRange('est/', 'est0');
  await db.get('est/00');
  assert.strictEqual(await db.getEstimatedRangeSizeBytes('est/', 'est0'), 0);
});

// The key as a Buffer: binding 2.0.1's watch asserts in its native code with a string key.
step('watches: a change fires one, a cancel ends another', async () => {
  const w = await db.doTransaction(async tn => tn.watch(Buffer.from('watched')));
  await db.doTransaction(async tn => tn.set('watched', 'changed'));
  assert.strictEqual(await w.promise, true);
  const w2 = await db.doTransaction(async tn => tn.watch(Buffer.from('watched')));
  w2.cancel();
  assert.strictEqual(await w2.promise, false);
});

(async () => {
  let failed = 0;
  for (const [name, fn] of steps) {
    try { await fn(); console.log(`ok   ${name}`); }
    catch (e) { failed++; console.log(`FAIL ${name}: ${e && e.stack || e}`); }
  }
  db.close();
  console.log(failed ? `${failed} of ${steps.length} steps failed` : `all ${steps.length} steps passed`);
  process.exit(failed ? 1 : 0);
})();
