#!/usr/bin/env python3
# Takes a campaign's adaptive/best apart, per case, from its results.json (docs/benchmarks.md,
# "The embedded misses taken apart"): the share of rows ADAPTIVE fetched with SCAN_AND_FETCH (its
# record loads against the SCAN_AND_FETCH arm's), the ratio those shares alone give with the fixed
# arms' own times ("choice": what ADAPTIVE would cost if deciding were free), and the rest
# ("residual" = adaptive/best over choice: ADAPTIVE's own cost per query, and noise). Record loads
# count chunks, so on split rows1000 the share and the choice do not mean that; read those rows apart.
#
# usage: scripts/adaptive-decompose.py RESULTS.json [EARLIER.json ...]
#   prints a markdown table; each EARLIER results.json adds a column with its adaptive/best.
#   A ratio is bold where the goal holds (mean <= 1.05, interval's upper end <= 1.10).
import json
import math
import sys


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
        sys.exit('usage: adaptive-decompose.py RESULTS.json [EARLIER.json ...]')
    results = json.load(open(argv[1]))
    earlier = [summary(json.load(open(p))) for p in argv[2:]]
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
        times = [geomean([block_median(case, arm, b) for b in blocks])
                 for arm in ('ordinary', 'remote', 'adaptive')]
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
                                     mean(case, 'remote', 'mapped_requests_per_op'))]
        print('| %s | %s |' % (case, ' | '.join(columns)))
    print('\nwithin the goal: %d of %d cases' % (met, len(cases)))


if __name__ == '__main__':
    main(sys.argv)
