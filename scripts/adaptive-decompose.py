#!/usr/bin/env python3
# Takes a campaign's adaptive/best apart, per case, from its results (docs/benchmarks.md, "ADAPTIVE
# against the better fixed method"): the share of rows ADAPTIVE fetched with SCAN_AND_FETCH (its
# record loads against the SCAN_AND_FETCH arm's), the ratio those shares alone give with the fixed
# arms' own times ("choice": what ADAPTIVE would cost if deciding were free), and the rest
# ("residual" = adaptive/best over choice: ADAPTIVE's own cost per query, and noise). Where the
# remote-grouped arm runs, "remote" is the faster of it and remote (ADAPTIVE reads grouped). Record loads
# count chunks, so on split rows1000 the share and the choice do not mean that; read those rows apart.
#
# usage: scripts/adaptive-decompose.py RESULTS [EARLIER ...]
#   RESULTS and EARLIER are a campaign's output directory (its results.json.zst, else its
#   results.json) or a results file, zstd-compressed or not (told by its first bytes).
#   Prints a markdown table; each EARLIER run adds a column with its adaptive/best.
#   A ratio is bold where the goal holds (mean <= 1.05, interval's upper end <= 1.10).
import json
import math
import os
import subprocess
import sys

ZSTD_MAGIC = b'\x28\xb5\x2f\xfd'


def unzstd(data):
    """The decompressed bytes of zstd data (every frame, sized or not)."""
    try:
        import zstandard
        return zstandard.ZstdDecompressor().decompressobj().decompress(data)
    except ImportError:
        pass
    try:
        from compression import zstd  # Python 3.14
        return zstd.decompress(data)
    except ImportError:
        pass
    try:
        return subprocess.run(['zstd', '-dc'], input=data, stdout=subprocess.PIPE, check=True).stdout
    except FileNotFoundError:
        sys.exit('adaptive-decompose.py: reading .zst needs the zstd program or the zstandard module')


def load_results(path):
    """A campaign's results document from its directory or a results file, compressed or not."""
    if os.path.isdir(path):
        zst = os.path.join(path, 'results.json.zst')
        path = zst if os.path.exists(zst) else os.path.join(path, 'results.json')
    with open(path, 'rb') as f:
        data = f.read()
    if data.startswith(ZSTD_MAGIC):
        data = unzstd(data)
    return json.loads(data)


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


def summary(results):
    return {s['case']: s for s in results['summary']
            if s['comparison'] == 'adaptive/best' and s['metric'] == 'ns_per_op'}


def ratio_text(s):
    text = '%.3f [%.3f, %.3f]' % (s['ratio'], s['ci_low'], s['ci_high'])
    return '**%s**' % text if s['ratio'] <= 1.05 and s['ci_high'] <= 1.10 else text


def time_text(ns):
    return '%.3g µs' % (ns / 1e3) if ns < 1e6 else '%.3g ms' % (ns / 1e6)


def main(argv):
    if len(argv) < 2:
        sys.exit('usage: adaptive-decompose.py RESULTS [EARLIER ...]')
    results = load_results(argv[1])
    earlier = [summary(load_results(p)) for p in argv[2:]]
    samples = {}
    for x in results['samples']:
        samples.setdefault((x['case'], x['arm'], x['block']), []).append(x)

    def block_median(case, arm, block):
        v = sorted(y['ns_per_op'] for y in samples[(case, arm, block)])
        return v[len(v) // 2]

    def mean(case, arm, key):
        v = [y[key] for (c, a, _), l in samples.items() if c == case and a == arm for y in l]
        return sum(v) / len(v)

    print('| case | adaptive/best |' + ' earlier |' * len(earlier) +
          ' ordinary | remote | adaptive | rows by SCAN_AND_FETCH | choice | residual |'
          ' mapped reads / query (remote arm) |')
    print('|---|---|' + '---|' * len(earlier) + '---|---|---|---:|---:|---:|---:|')
    met = 0
    cases = summary(results)
    for case, s in cases.items():
        met += s['ratio'] <= 1.05 and s['ci_high'] <= 1.10
        blocks = sorted({b for (c, _, b) in samples if c == case})
        # ADAPTIVE's remote pages read grouped secondaries where the remote-grouped arm runs (multi
        # topologies, since 2026-12-07): that arm is its alternative to SCAN_AND_FETCH there.
        grouped = any(c == case and a == 'remote-grouped' for (c, a, _) in samples)
        remote_arm = 'remote-grouped' if grouped else 'remote'
        times = [geomean([block_median(case, arm, b) for b in blocks])
                 for arm in ('ordinary', remote_arm, 'adaptive')]
        if grouped:
            times[1] = min(times[1], geomean([block_median(case, 'remote', b) for b in blocks]))
        loads_fixed = mean(case, 'ordinary', 'record_loads_per_op')
        share = min(1.0, mean(case, 'adaptive', 'record_loads_per_op') / loads_fixed) \
            if loads_fixed > 0 else float('nan')
        best = min(times[0], times[1])
        choice = (share * times[0] + (1 - share) * times[1]) / best
        residual = times[2] / best / choice
        columns = [ratio_text(s)] + [ratio_text(e[case]) if case in e else '-' for e in earlier]
        columns += [time_text(t) for t in times]
        columns += ['%.1f %%' % (100 * share), '%.3f' % choice, '%.3f' % residual,
                    '%.2f (%.2f)' % (mean(case, 'adaptive', 'mapped_requests_per_op'),
                                     mean(case, remote_arm, 'mapped_requests_per_op'))]
        print('| %s | %s |' % (case, ' | '.join(columns)))
    print('\nwithin the goal: %d of %d cases' % (met, len(cases)))


if __name__ == '__main__':
    main(sys.argv)
