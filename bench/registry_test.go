package bench_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/bench"
	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/internal/testkit/long"
)

// raceSample are the experiments -short runs under the race detector: one
// sweep of each kind (the SBRP apps' parallel sweep, the re-study's). The
// race detector makes a simulated kernel ten times slower and every
// experiment together takes over ten minutes there; without -short or
// -race every experiment runs.
var raceSample = map[string]bool{"sbrp-fig9": true, "lin-fig4": true}

// skipSlow skips experiment name where -short asks for speed.
// longExperiments are the experiments whose quick runs take longest (8 to
// 33 s each on the 2-core development machine, crash checking and sweeps):
// go test ./... leaves them, with their golden files, to the long run
// (internal/testkit/long), which CI runs in a step of its own. sbrp-fig6
// (42 s of go test ./... on 2 shared cores) and sbrp-fig7 (8 s) are there
// because they cost the long run next to nothing: sbrp-fig8 runs every
// (app, configuration) of sbrp-fig6 and four of sbrp-fig7's six, and a
// process simulates each such run once (bench's runApp keeps them).
// sbrp-fig9, sbrp-fig11, lin-fig2 and lin-fig3 (6 to 8 s each) went there
// to keep go test ./... within minutes from an empty build cache.
var longExperiments = map[string]bool{
	"lin-table5": true, "sbrp-fig10a": true, "sbrp-fig10b": true, "sbrp-fig10c": true, "sbrp-fig8": true,
	"sbrp-fig6": true, "sbrp-fig7": true,
	"sbrp-fig9": true, "sbrp-fig11": true, "lin-fig2": true, "lin-fig3": true,
}

func skipSlow(t *testing.T, name string) {
	t.Helper()
	switch {
	case testing.Short() && notGolden[name]:
		t.Skip("wall-clock disk benchmark; runs without -short")
	case !testing.Short() && longExperiments[name]:
		long.Skip(t, name+" takes over 8 s at quick size")
	case testing.Short() && raceOn && !raceSample[name]:
		t.Skip("minutes under the race detector; runs without -short or -race")
	}
}

// Every registered experiment runs at quick size (under -short, the SBRP
// figures at smoke size) and gives well-formed rows: its own name, one
// value per (workload, config, metric), finite and not negative; the
// configs and metrics the papers' values name exist in its output; its
// figure draws. TestGolden checks that simulated experiments are
// deterministic.
func TestEveryExperiment(t *testing.T) {
	all := bench.All()
	require.NotEmpty(t, all)
	for _, e := range all {
		t.Run(e.Name, func(t *testing.T) {
			skipSlow(t, e.Name)
			require.NotEmpty(t, e.Description)
			if e.Paper != "" {
				require.NotEmpty(t, e.Figure, "an experiment of a paper names its figure")
			}
			q := quickRun(e.Name)
			require.NoError(t, q.err)
			rows := q.rows
			require.NotEmpty(t, rows)
			require.False(t, q.late, "work announced after some was done: the progress bar would go backwards")
			require.Equal(t, q.total, q.done, "progress: done %d of %d", q.done, q.total)
			type key struct{ w, c, m string }
			seen := map[key]bool{}
			configs, metrics := map[string]bool{}, map[string]bool{}
			for _, r := range rows {
				require.Equal(t, e.Name, r.Experiment, "%+v", r)
				require.NotEmpty(t, r.Workload, "%+v", r)
				require.NotEmpty(t, r.Config, "%+v", r)
				require.NotEmpty(t, r.Metric, "%+v", r)
				require.False(t, math.IsNaN(r.Value) || math.IsInf(r.Value, 0), "%+v", r)
				require.GreaterOrEqual(t, r.Value, 0.0, "%+v", r)
				k := key{r.Workload, r.Config, r.Metric}
				require.False(t, seen[k], "duplicate row %+v", r)
				seen[k] = true
				configs[r.Config], metrics[r.Metric] = true, true
			}
			vals, err := bench.PaperValuesFor(e.Name)
			require.NoError(t, err)
			for _, v := range vals {
				require.True(t, configs[v.Config], "paper value %+v: no config %q in the output", v, v.Config)
				require.True(t, v.Over == "" || configs[v.Over], "paper value %+v: no config %q in the output", v, v.Over)
				require.True(t, metrics[v.Metric], "paper value %+v: no metric %q in the output", v, v.Metric)
			}
			require.NoError(t, bench.WriteFigure(filepath.Join(t.TempDir(), e.Name+".svg"), e.Name, rows, true))
			// Determinism: TestGolden compares every simulated
			// experiment's quick rows with a file an earlier process wrote
			// (and -update writes only what two runs agree on).
		})
	}
}

// quickResult is one quick run of an experiment, with what its progress
// reports said.
type quickResult struct {
	rows        []bench.Row
	err         error
	total, done int
	late        bool // work announced after some was done
}

// quickRuns caches each experiment's quick (or smoke) run, so that the
// registry test, the golden test and the experiment's own test share it
// (the tests run one at a time).
var quickRuns = map[runKey]*quickResult{}

type runKey struct {
	name  string
	smoke bool
}

// quickRun runs experiment name at quick size once per test binary. Under
// -short it runs the experiments that can (the SBRP figures) on their
// smallest inputs (bench.Options.Smoke): the registry test and the
// experiments' own tests check the harness and the rows' form, not the
// numbers. The wall-clock comparisons with Pebble (notGolden) run at smoke
// size outside the long run too: at quick size they take 12 to 25 s each
// of real time. quickRunAt(name, false) is always the quick size.
func quickRun(name string) *quickResult {
	return quickRunAt(name, testing.Short() || notGolden[name] && !long.Enabled())
}

func quickRunAt(name string, smoke bool) *quickResult {
	k := runKey{name, smoke}
	if q, ok := quickRuns[k]; ok {
		return q
	}
	q := &quickResult{}
	e, ok := bench.Lookup(name)
	if !ok {
		q.err = fmt.Errorf("no experiment %q", name)
		return q
	}
	var mu sync.Mutex
	progress := func(tot, d int) {
		mu.Lock()
		defer mu.Unlock()
		q.late = q.late || tot > 0 && q.done > 0
		q.total += tot
		q.done += d
	}
	q.rows, q.err = e.Run(context.Background(), bench.Options{Quick: true, Smoke: smoke, Progress: progress})
	quickRuns[k] = q
	return q
}

// quickRows returns the rows of experiment name's quick run.
func quickRows(t *testing.T, name string) []bench.Row {
	t.Helper()
	skipSlow(t, name)
	q := quickRun(name)
	require.NoError(t, q.err, name)
	return q.rows
}

// Every key an experiment says it sweeps is a hwmodel key, so pmbench's
// refusal of a -set of it cannot be disabled by a misspelt name.
func TestSweptKeysExist(t *testing.T) {
	known := map[string]bool{}
	for _, k := range hwmodel.KeyInfos() {
		known[k.Key] = true
	}
	swept := 0
	for _, e := range bench.All() {
		for _, k := range e.Sweeps {
			require.True(t, known[k], "%s sweeps %q, not a key (pmbench keys)", e.Name, k)
			swept++
		}
	}
	require.Positive(t, swept)
}

// Every experiment that runs hwmodel configurations declares the presets it
// builds them from, and each is a preset hwmodel has: pmbench checks a
// -set against them before anything runs.
func TestExperimentsDeclarePresets(t *testing.T) {
	for _, e := range bench.All() {
		if e.NoSet {
			require.Empty(t, e.Presets, "%s runs no hwmodel configuration", e.Name)
			continue
		}
		require.NotEmpty(t, e.Presets, "%s: Experiment.Presets", e.Name)
		for _, p := range e.Presets {
			require.Contains(t, hwmodel.Presets(), p, e.Name)
		}
	}
}

// CheckSet checks a -set against every preset the chosen experiments use:
// a value that pm-near takes but volta or gope does not is refused before
// anything runs, naming the preset.
func TestCheckSetEveryPreset(t *testing.T) {
	get := func(names ...string) []bench.Experiment {
		var out []bench.Experiment
		for _, n := range names {
			e, ok := bench.Lookup(n)
			require.True(t, ok, n)
			out = append(out, e)
		}
		return out
	}
	for _, tc := range []struct {
		exps []string
		set  string
		msg  string // "" for none
	}{
		{[]string{"micro-persist"}, "l2.size_bytes=1048576", ""},
		{[]string{"micro-persist", "lin-fig1"}, "l2.size_bytes=1048576", "on preset volta (experiment lin-fig1)"},
		{[]string{"sbrp-fig6"}, "persist.sector_bytes=128", ""},
		{[]string{"sbrp-fig6", "gope-fig5"}, "persist.sector_bytes=128", "on preset gope (experiment gope-fig5)"},
		{[]string{"cosplay-fig1"}, "nvm.write_latency_cycles=-1", "on preset cosplay"},
		{[]string{"engine"}, "nvm.write_latency_cycles=500", "does not apply to experiment engine"},
		{[]string{"sbrp-fig10c"}, "persist.window=4", "sweeps persist.window itself"},
		{[]string{"lin-fig1"}, "restudy.channels=8", ""},
	} {
		err := bench.CheckSet(get(tc.exps...), []string{tc.set})
		if tc.msg == "" {
			require.NoError(t, err, "%v %s", tc.exps, tc.set)
		} else {
			require.ErrorContains(t, err, tc.msg, "%v %s", tc.exps, tc.set)
		}
	}
	require.NoError(t, bench.CheckSet(get("engine"), nil))
	// Whether PM is timed as DRAM goes with the model, which the
	// experiments choose: -set persist.none is refused before anything runs.
	for _, set := range []string{"persist.none=true", "persist.none=false", " persist.none =1"} {
		require.ErrorIs(t, bench.CheckSet(get("sbrp-fig6"), []string{set}), hwmodel.ErrPMAsDRAM, set)
		require.ErrorIs(t, bench.CheckPresets(get("gope-fig5"), []string{set}), hwmodel.ErrPMAsDRAM, set)
	}
}
