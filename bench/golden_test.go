package bench_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/bench"
)

// update rewrites the golden files from this run:
//
//	go test ./bench -run TestGolden -update
var update = flag.Bool("update", false, "rewrite bench/testdata/golden/*.csv from this run (TestGolden)")

// goldenDir holds one CSV per experiment: its quick-size rows as
// `pmbench -exp NAME -quick -format csv` prints them, less the values that
// are not deterministic by design (goldenDrop).
var goldenDir = filepath.Join("testdata", "golden")

// notGolden are the experiments that measure the host, not the simulated
// machine: every value of kvs-vs-pebble, btree-vs-pebble, txn-vs-pebble and
// load-vs-pebble is wall-clock time, disk bytes, memory or CPU share of
// real runs.
var notGolden = map[string]bool{"kvs-vs-pebble": true, "btree-vs-pebble": true, "txn-vs-pebble": true, "load-vs-pebble": true}

// goldenDrop are the metrics of an experiment left out of its golden
// file: engine's verbs_per_s is wall-clock speed, and its coroutines counts
// how the engine implements a launch (the peak of suspended threads), which
// a faster engine may change without changing anything simulated. Its
// threads and verbs stay: they are what the kernels do.
var goldenDrop = map[string][]string{"engine": {"verbs_per_s", "coroutines"}}

// goldenShort are the experiments TestGolden runs under -short: one sweep
// of each kind at a fraction of the cost. Every quick set together takes
// 135 to 175 CPU-seconds on the shared 2-core development machine
// (sbrp-fig10c alone 36, the SBRP sweeps 115 of them), over the 60 that
// suit a routine check; this subset 20 to 23: the SBRP
// apps under every model (sbrp-fig6), hwmodel's micro-benchmarks on every
// preset (micro-persist), the re-study's kernels (lin-fig1, lin-fig4, the
// latter the race detector's sample), the B+tree of the scoped persist
// barrier paper (gope-fig5), GPM's logging (gpm-fig11) and the engine's
// verb counts (engine). Without -short every experiment runs; in a run of
// the whole package the quick runs are shared with TestEveryExperiment, so
// the golden comparison costs nothing more.
var goldenShort = map[string]bool{
	"sbrp-fig6": true, "micro-persist": true, "lin-fig1": true, "lin-fig4": true,
	"gope-fig5": true, "gpm-fig11": true, "engine": true,
}

// goldenCSV is what the golden file of an experiment holds: rows as
// pmbench's CSV at quick size, less goldenDrop's metrics.
func goldenCSV(t *testing.T, name string, rows []bench.Row) []byte {
	t.Helper()
	drop := goldenDrop[name]
	rows = slices.DeleteFunc(slices.Clone(rows), func(r bench.Row) bool { return slices.Contains(drop, r.Metric) })
	var b bytes.Buffer
	require.NoError(t, bench.WriteCSV(&b, rows, bench.Format{Header: true, Size: "quick"}))
	return b.Bytes()
}

// Every experiment's quick-size CSV is byte for byte its golden file in
// testdata/golden: a change of the engine or of hwmodel's speed must not
// change one simulated cycle (issue 11). A change that is meant to change
// results regenerates the files with -update and shows the difference in
// its diff; -update first runs each experiment a second time and refuses
// to write output that is not deterministic.
func TestGolden(t *testing.T) {
	all := bench.All()
	if *update && !testing.Short() {
		// Files of experiments no longer registered go.
		old, err := filepath.Glob(filepath.Join(goldenDir, "*.csv"))
		require.NoError(t, err)
		for _, f := range old {
			name := strings.TrimSuffix(filepath.Base(f), ".csv")
			if _, ok := bench.Lookup(name); !ok || notGolden[name] {
				require.NoError(t, os.Remove(f))
			}
		}
	}
	for _, e := range all {
		t.Run(e.Name, func(t *testing.T) {
			if notGolden[e.Name] {
				t.Skip("wall-clock measurements of the host: not deterministic by design")
			}
			if testing.Short() && !goldenShort[e.Name] {
				t.Skip("-short runs a subset (goldenShort); runs without -short")
			}
			skipSlow(t, e.Name)
			q := quickRunAt(e.Name, false) // quick size, even under -short
			require.NoError(t, q.err)
			got := goldenCSV(t, e.Name, q.rows)
			file := filepath.Join(goldenDir, e.Name+".csv")
			if *update {
				// Simulated again, not the runs this process keeps.
				bench.ForgetRuns()
				again, err := e.Run(context.Background(), bench.Options{Quick: true})
				require.NoError(t, err)
				require.Equal(t, string(got), string(goldenCSV(t, e.Name, again)), "%s is not deterministic: not written", e.Name)
				require.NoError(t, os.MkdirAll(goldenDir, 0o755))
				require.NoError(t, os.WriteFile(file, got, 0o644))
				return
			}
			want, err := os.ReadFile(file)
			require.NoError(t, err, "no golden file: go test ./bench -run TestGolden -update")
			require.Equal(t, string(want), string(got),
				"%s differs from %s: a speed change must not change simulated results (regenerate with -update only for a deliberate modeling change)", e.Name, file)
		})
	}
	if !testing.Short() && !*update {
		// No golden file is left without its experiment.
		files, err := filepath.Glob(filepath.Join(goldenDir, "*.csv"))
		require.NoError(t, err)
		for _, f := range files {
			name := strings.TrimSuffix(filepath.Base(f), ".csv")
			_, ok := bench.Lookup(name)
			require.True(t, ok && !notGolden[name], "%s has no experiment to compare: regenerate with -update", f)
		}
	}
}
