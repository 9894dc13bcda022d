package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/internal/testkit/long"
)

// The tests run the cheapest experiments (sbrp-fig9, sbrp-fig7: two
// configs of six apps), at smoke size where they check the harness, not
// the numbers; the engine's 1M-thread run is left out of -short.

func TestPmbenchCSV(t *testing.T) {
	var out, errb bytes.Buffer
	require.NoError(t, run([]string{"-exp", "sbrp-fig9,sbrp-fig7", "-smoke", "-format", "csv"}, &out, &errb))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Equal(t, "experiment,workload,config,metric,value,size", lines[0])
	exps := map[string]int{}
	for _, l := range lines[1:] {
		f := strings.Split(l, ",")
		require.Len(t, f, 6, l)
		require.Equal(t, "smoke", f[5], "every row says its size")
		exps[f[0]]++
	}
	require.Equal(t, 7, exps["sbrp-fig9"], "six apps and the geomean, one config")
	require.Positive(t, exps["sbrp-fig7"])
	require.Len(t, exps, 2, "one header for both experiments")
	// Each experiment's wall and CPU time go to stderr, never into the CSV.
	for _, e := range []string{"sbrp-fig9", "sbrp-fig7"} {
		require.Regexp(t, `(?m)^`+e+` \[smoke size\]: [0-9]+\.[0-9] s wall, [0-9]+\.[0-9] s CPU$`, errb.String())
	}
	require.NotContains(t, out.String(), " s CPU")
}

func TestPmbenchEngine(t *testing.T) {
	if testing.Short() {
		t.Skip("launches 1M threads")
	}
	var out, errb bytes.Buffer
	require.NoError(t, run([]string{"-exp", "engine", "-quick", "-format", "csv"}, &out, &errb))
	var sawRate bool
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n")[1:] {
		f := strings.Split(l, ",")
		require.Equal(t, "engine", f[0])
		if f[1] == "vector-add" && f[3] == "verbs_per_s" {
			sawRate = true
		}
		if f[1] == "vector-add" && f[3] == "threads" {
			require.Equal(t, "1048576", f[4], "the engine experiment launches at least 1M threads")
		}
	}
	require.True(t, sawRate)
}

func TestPmbenchFlags(t *testing.T) {
	var out, errb bytes.Buffer
	require.NoError(t, run([]string{"-list"}, &out, &errb))
	require.Contains(t, out.String(), "engine")
	require.Error(t, run([]string{"-exp", "nope"}, &out, &errb))
	require.Error(t, run([]string{"-format", "xml"}, &out, &errb))
	require.Error(t, run([]string{"stray"}, &out, &errb))
}

func TestPmbenchOutAndShard(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	require.NoError(t, run([]string{"-exp", "sbrp-fig9", "-smoke", "-out", dir, "-set", "persist.window=4"}, &out, &errb))
	csv, err := os.ReadFile(filepath.Join(dir, "sbrp-fig9.csv"))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(csv), "experiment,workload,config,metric,value,size,overrides\n"), "%s", csv)
	svg, err := os.ReadFile(filepath.Join(dir, "sbrp-fig9.svg"))
	require.NoError(t, err)
	require.Contains(t, string(svg), "<svg")
	png, err := os.ReadFile(filepath.Join(dir, "sbrp-fig9.png"))
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(png, []byte("\x89PNG")))

	// The shards of a sweep together give the unsharded rows, minus the
	// summary rows.
	var all, s0, s1 bytes.Buffer
	require.NoError(t, run([]string{"-exp", "sbrp-fig9", "-smoke", "-format", "csv"}, &all, &errb))
	require.NoError(t, run([]string{"-exp", "sbrp-fig9", "-smoke", "-format", "csv", "-shard", "0/2"}, &s0, &errb))
	require.NoError(t, run([]string{"-exp", "sbrp-fig9", "-smoke", "-format", "csv", "-shard", "1/2"}, &s1, &errb))
	var want []string
	for _, l := range strings.Split(strings.TrimSpace(all.String()), "\n")[1:] {
		if !strings.Contains(l, ",geomean,") {
			want = append(want, l)
		}
	}
	var got []string
	for _, s := range []string{s0.String(), s1.String()} {
		lines := strings.Split(strings.TrimSpace(s), "\n")
		require.Equal(t, "experiment,workload,config,metric,value,size,shard,value_exact", lines[0])
		for _, l := range lines[1:] {
			f := strings.Split(l, ",")
			got = append(got, strings.Join(f[:6], ","))
		}
	}
	require.ElementsMatch(t, want, got)
	require.Error(t, run([]string{"-exp", "sbrp-fig6", "-shard", "2/2"}, &out, &errb))
	require.Error(t, run([]string{"-exp", "micro-persist", "-quick", "-set", "nope=1"}, &out, &errb))
}

// Every bad flag or combination is an error before anything runs (exit
// status 2 in main), and results are printed before files are written.
func TestPmbenchStrictFlags(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-exp", "micro-persist", "-quick", "-shard", "1/2junk"}, "bad -shard"},
		{[]string{"-exp", "micro-persist", "-quick", "-shard", "2/2"}, "bad -shard"},
		{[]string{"-exp", "micro-persist", "-quick", "-shard", "1"}, "bad -shard"},
		{[]string{"-exp", "engine", "-quick", "-set", "nvm.write_latency_cycles=500"}, "-set does not apply to experiment engine"},
		{[]string{"-exp", "micro-persist", "-quick", "-cpuprofile", t.TempDir(), "-memprofile", t.TempDir()}, "exclude each other"},
		{[]string{"-exp", "micro-persist", "-quick", "-out", filepath.Join(file, "sub")}, "-out"},
		{[]string{"-exp", "micro-persist", "-quick", "-cpuprofile", filepath.Join(file, "sub")}, "-cpuprofile"},
		{[]string{"-exp", "micro-persist", "-quick", "-set", "nvm.write_lat=3"}, "keys of nvm: nvm.read_latency_cycles"},
		{[]string{"-exp", "micro-persist", "-quick", "-set", "bogus=3"}, "every key: pmbench keys"},
		{[]string{"-exp", "micro-persist", "-quick", "-set", "persist.window=-1"}, "persist.window"},
		{[]string{"-exp", "micro-persist", "-quick", "-set", "persist.window"}, "not key=value"},
		{[]string{"-exp", "micro-persist", "-format", "xml"}, "unknown -format"},
		{[]string{"-exp", "cosplay-fig8", "-quick", "-window", "4,x"}, "bad -window"},
		{[]string{"-exp", "cosplay-fig8", "-quick", "-window", "0"}, "bad -window"},
		{[]string{"-exp", "cosplay-fig8", "-quick", "-set", "cpu.bmo_cycles=-1"}, "cpu.bmo_cycles"},
		{[]string{"-exp", "nope"}, "unknown experiment"},
		{[]string{"-exp", "micro-persist", "stray"}, "unexpected arguments"},
		{[]string{"keys", "stray"}, "keys takes no arguments"},
		{[]string{"-nope"}, "flag provided but not defined"},
		{[]string{"-exp"}, "flag needs an argument"},
		{[]string{"-exp", "micro-persist,"}, "an empty name"},
		{[]string{"-exp", "sbrp-fig10a", "-quick", "-set", "persist.buffer_entries=256"}, "sweeps persist.buffer_entries itself"},
		{[]string{"-exp", "sbrp-fig10c", "-quick", "-sweep", "persist.window=2,4"}, "sweeps it itself"},
		{[]string{"-exp", "micro-persist", "-quick", "-sweep", "nvm.write_latency_cycles"}, "bad -sweep"},
		{[]string{"-exp", "micro-persist", "-quick", "-sweep", "nvm.write_latency_cycles=200,"}, "an empty value"},
		{[]string{"-exp", "micro-persist", "-quick", "-sweep", "nvm.write_latency_cycles=200,x"}, "-sweep"},
		{[]string{"-exp", "micro-persist", "-quick", "-sweep", "bogus=1,2"}, "every key: pmbench keys"},
		{[]string{"-exp", "sbrp-fig9", "-quick", "-paper", "-sweep", "nvm.write_latency_cycles=200,400"}, "exclude each other"},
		{[]string{"-exp", "micro-persist", "-quick", "-set", "nvm.write_latency_cycles=100", "-sweep", "nvm.write_latency_cycles=200,400"}, "name the same key"},
		{[]string{"-exp", "engine", "-quick", "-sweep", "nvm.write_latency_cycles=200,400"}, "does not apply to experiment engine"},
		{[]string{"-exp", "micro-persist,cosplay-fig8", "-quick", "-set", "cpu.bmo_cycles=700"}, "sweeps cpu.bmo_cycles itself"},
		{[]string{"-exp", ",engine"}, "an empty name"},
		// -set and -sweep are checked against every preset the experiments use.
		{[]string{"-exp", "micro-persist,lin-fig1", "-quick", "-set", "l2.size_bytes=1048576"}, "on preset volta (experiment lin-fig1)"},
		{[]string{"-exp", "sbrp-fig6,gope-fig5", "-quick", "-set", "persist.sector_bytes=128"}, "on preset gope (experiment gope-fig5)"},
		{[]string{"-exp", "lin-fig1", "-quick", "-sweep", "l2.size_bytes=1048576"}, "on preset volta"},
	} {
		var out, errb bytes.Buffer
		err := run(tc.args, &out, &errb)
		require.ErrorContains(t, err, tc.msg, "%v", tc.args)
		require.NotContains(t, err.Error(), "\n", "%v: a one-line error", tc.args)
		require.Empty(t, errb.String(), "%v: the error is the one line main prints, no usage", tc.args)
		require.Equal(t, 2, exitCode(err), "%v", tc.args)
		require.Empty(t, out.String(), "%v: nothing ran", tc.args)
	}
}

// The run says what it runs and at which size, on stderr and in every
// table header; -list names each experiment's paper and figure.
func TestPmbenchSizeLabels(t *testing.T) {
	for _, tc := range []struct {
		args         []string
		stderr, head string
	}{
		{[]string{"-exp", "sbrp-fig9", "-quick", "-shard", "0/6"}, "running sbrp-fig9 at quick size (small inputs", "== sbrp-fig9 [quick size]: SBRP Fig. 9:"},
		// A changed machine says so on stderr, in the header and beside
		// the papers' values.
		{[]string{"-exp", "sbrp-fig9", "-smoke", "-paper", "-set", "nvm.write_latency_cycles=500"},
			"running sbrp-fig9 at smoke size, on a machine changed by -set nvm.write_latency_cycles=500",
			"== sbrp-fig9 [smoke size, on a machine changed by -set nvm.write_latency_cycles=500]"},
	} {
		var out, errb bytes.Buffer
		require.NoError(t, run(tc.args, &out, &errb), "%v", tc.args)
		require.Contains(t, errb.String(), tc.stderr, "%v", tc.args)
		require.Contains(t, out.String(), tc.head, "%v", tc.args)
		if slices.Contains(tc.args, "-set") {
			require.Contains(t, out.String(), "-- ours ran on a machine changed by -set nvm.write_latency_cycles=500: the ratios are not against the papers' machine")
		}
	}
	var out, errb bytes.Buffer
	require.NoError(t, run([]string{"-list"}, &out, &errb))
	for _, s := range []string{"SBRP Fig. 6", "GPM Fig. 11", "scoped persist barrier paper Table 3", "(scopedpm itself)"} {
		require.Contains(t, out.String(), s)
	}
}

// -paper puts the papers' values beside ours, with the ratio, in tables
// and CSV.
func TestPmbenchPaper(t *testing.T) {
	var out, errb bytes.Buffer
	require.NoError(t, run([]string{"-exp", "sbrp-fig6", "-smoke", "-paper"}, &out, &errb))
	require.Contains(t, out.String(), "the papers' values beside ours (smoke size; ratio = ours/paper)")
	require.Regexp(t, `geomean\s+sbrp-far\s+speedup\s+[0-9.]+\s+1\.14\s+[0-9.]+\s+SBRP §7.2, Fig. 6`, out.String())
	require.Regexp(t, `Red\s+sbrp-near over epoch-near\s+speedup\s+[0-9.]+\s+1\.68`, out.String())

	out.Reset()
	require.NoError(t, run([]string{"-exp", "sbrp-fig6", "-smoke", "-paper", "-format", "csv"}, &out, &errb))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Equal(t, "experiment,workload,config,metric,value,size,paper_value,ratio,paper_source", lines[0])
	var direct, relative bool
	for _, l := range lines[1:] {
		if strings.HasPrefix(l, "sbrp-fig6,geomean,sbrp-far,speedup,") {
			direct = true
			require.Contains(t, l, ",smoke,1.14,")
			require.Contains(t, l, `"SBRP §7.2, Fig. 6"`)
		}
		if strings.HasPrefix(l, "sbrp-fig6,geomean,sbrp-near over epoch-near,speedup,") {
			relative = true
			require.Contains(t, l, ",smoke,1.15,")
		}
	}
	require.True(t, direct && relative, out.String())
}

// pmbench keys and -set help list every hwmodel key with its unit, value
// and source.
func TestPmbenchKeys(t *testing.T) {
	for _, args := range [][]string{{"keys"}, {"-set", "help"}} {
		var out, errb bytes.Buffer
		require.NoError(t, run(args, &out, &errb), "%v", args)
		require.Regexp(t, `persist.window\s+count\s+6\s+sbrp\s+SBRP's flush window: the most lines`, out.String(), "%v", args)
		require.Regexp(t, `nvm.write_latency_cycles\s+cycles\s+400\s+pm-far-eadr=100 gope=250`, out.String(), "%v", args)
		require.Contains(t, out.String(), "SBRP Table 1")
	}
}

// -h says what the tool does (and main exits 2 on flag.ErrHelp).
func TestPmbenchHelp(t *testing.T) {
	var out, errb bytes.Buffer
	err := run([]string{"-h"}, &out, &errb)
	require.ErrorIs(t, err, flag.ErrHelp)
	require.Equal(t, 2, exitCode(err))
	require.Equal(t, 0, exitCode(nil))
	require.Contains(t, errb.String(), "pmbench runs")
	require.Contains(t, errb.String(), "<experiment>.svg and <experiment>.png", "-out says it writes SVG and PNG")
	require.Contains(t, errb.String(), "pmbench merge", "the usage names the merge subcommand")
}

// -sweep runs the experiments once per value and says in every row's
// config which value it ran at; a slower NVM is never faster.
func TestPmbenchSweep(t *testing.T) {
	if testing.Short() {
		t.Skip("runs micro-persist twice (82 s under the race detector); runs without -short")
	}
	var out, errb bytes.Buffer
	require.NoError(t, run([]string{"-exp", "micro-persist", "-quick", "-format", "csv", "-sweep", "nvm.write_latency_cycles=100,3200"}, &out, &errb))
	require.Contains(t, errb.String(), "swept over -sweep nvm.write_latency_cycles=100,3200")
	cycles := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n")[1:] {
		f := strings.Split(line, ",")
		require.Len(t, f, 7, line)
		require.Equal(t, strings.Fields(f[2])[1], f[6], "the overrides column names the sweep value")
		switch {
		case strings.HasSuffix(f[2], " nvm.write_latency_cycles=100"), strings.HasSuffix(f[2], " nvm.write_latency_cycles=3200"):
		default:
			t.Fatalf("row without its sweep value: %s", line)
		}
		if f[1] == "persist-dfence" && f[3] == "cycles" {
			cycles[f[2]] = f[4]
		}
	}
	fast, slow := cycles["pm-near/epoch nvm.write_latency_cycles=100"], cycles["pm-near/epoch nvm.write_latency_cycles=3200"]
	require.NotEmpty(t, fast)
	require.NotEmpty(t, slow)
	f, err := strconv.ParseFloat(fast, 64)
	require.NoError(t, err)
	sl, err := strconv.ParseFloat(slow, 64)
	require.NoError(t, err)
	require.GreaterOrEqual(t, sl, f, "a slower NVM write is not faster")
}

// -set and -sweep are shown in the CSV (an overrides column, only then),
// in the figure's title, and a ratio to the papers' values measured on a
// changed machine is named so.
func TestPmbenchOverridesShown(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		header string
		row    string
		title  string
	}{
		{[]string{"-exp", "sbrp-fig9", "-smoke"}, "experiment,workload,config,metric,value,size", ",smoke", ""},
		{[]string{"-exp", "sbrp-fig9", "-smoke", "-paper"}, "experiment,workload,config,metric,value,size,paper_value,ratio,paper_source", ",smoke,", ""},
		{[]string{"-exp", "sbrp-fig9", "-smoke", "-paper", "-set", "nvm.write_latency_cycles=500"},
			"experiment,workload,config,metric,value,size,overrides,paper_value,ratio_changed_machine,paper_source",
			",smoke,nvm.write_latency_cycles=500,", "on a machine changed by -set nvm.write_latency_cycles=500"},
		{[]string{"-exp", "sbrp-fig9", "-smoke", "-set", "persist.window=4", "-sweep", "nvm.write_latency_cycles=200,400"},
			"experiment,workload,config,metric,value,size,overrides",
			",smoke,persist.window=4 nvm.write_latency_cycles=400", "swept over -sweep nvm.write_latency_cycles=200,400"},
	} {
		dir := t.TempDir()
		var out, errb bytes.Buffer
		require.NoError(t, run(append(tc.args, "-format", "csv", "-out", dir), &out, &errb), "%v", tc.args)
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		require.Equal(t, tc.header, lines[0], "%v", tc.args)
		require.Contains(t, lines[len(lines)-1], tc.row, "%v", tc.args)
		svg, err := os.ReadFile(filepath.Join(dir, "sbrp-fig9.svg"))
		require.NoError(t, err)
		if tc.title == "" {
			require.NotContains(t, string(svg), "changed by", "%v", tc.args)
			continue
		}
		require.Contains(t, string(svg), tc.title, "%v: the figure's title", tc.args)
		if slices.Contains(tc.args, "-paper") {
			require.Contains(t, string(svg), "the papers&#39; marks are for their own machine", "%v", tc.args)
		}
	}
}

// pmbench merge joins the CSVs of -shard runs into what one unsharded run
// prints, byte for byte: geomeans (sbrp-fig6), minima and maxima
// (cosplay-fig8), averages (lin-fig4), the papers' ratios, an experiment
// that does not shard (gpm-fig11), a shard with no rows of an experiment
// (gope-fig7), a -set and a -sweep. The cases marked long run in the long
// run (internal/testkit/long).
func TestPmbenchMerge(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		shards int
		long   bool
	}{
		{[]string{"-exp", "sbrp-fig6", "-smoke"}, 2, false},
		{[]string{"-exp", "cosplay-fig8,cosplay-fig11", "-smoke"}, 2, false},
		// cosplay-fig13's §6.2 gaps, from its rows' performance.
		{[]string{"-exp", "cosplay-fig13", "-smoke", "-paper"}, 3, false},
		{[]string{"-exp", "sbrp-fig6,cosplay-fig8,gpm-fig11", "-smoke", "-paper"}, 3, true},
		{[]string{"-exp", "sbrp-fig11", "-smoke", "-set", "persist.window=4", "-sweep", "nvm.write_latency_cycles=200,400"}, 2, false},
		// lin-fig4's averages; gope-fig7 is one tree, so shard 1 has none
		// of it (a row that says so) and lin-fig4 has one kernel group.
		{[]string{"-exp", "gope-fig7,lin-fig4", "-quick"}, 2, true},
	} {
		if testing.Short() && tc.shards != 2 || testing.Short() && tc.args[1] != "sbrp-fig6" {
			continue // the race run (-short): one case; every case runs without -short
		}
		if tc.long && !long.Enabled() {
			continue
		}
		dir := t.TempDir()
		args := append(slices.Clone(tc.args), "-format", "csv")
		var want, errb bytes.Buffer
		require.NoError(t, run(args, &want, &errb), "%v", args)
		var files []string
		for i := range tc.shards {
			var s bytes.Buffer
			require.NoError(t, run(append(slices.Clone(args), "-shard", strconv.Itoa(i)+"/"+strconv.Itoa(tc.shards)), &s, &errb))
			files = append(files, filepath.Join(dir, strconv.Itoa(i)+".csv"))
			require.NoError(t, os.WriteFile(files[i], s.Bytes(), 0o644))
		}
		slices.Reverse(files) // the order of the files does not matter
		var got bytes.Buffer
		out := filepath.Join(dir, "out")
		require.NoError(t, run(append([]string{"merge", "-format", "csv"}, append(files, "-out", out)...), &got, &errb), "%v", args)
		require.Equal(t, want.String(), got.String(), "%v: merged shards print what one run does", args)
		name := strings.Split(tc.args[1], ",")[0]
		csv, err := os.ReadFile(filepath.Join(out, name+".csv"))
		require.NoError(t, err)
		require.Contains(t, want.String(), strings.SplitN(string(csv), "\n", 2)[1], "%v: -out writes the merged CSV", args)
		_, err = os.Stat(filepath.Join(out, name+".png"))
		require.NoError(t, err, "%v: and the figure", args)
	}

	// Shards missing, given twice, of different runs, and files that are
	// not shard CSVs are one-line errors.
	dir := t.TempDir()
	write := func(name string, args ...string) string {
		var b, errb bytes.Buffer
		require.NoError(t, run(append(args, "-format", "csv"), &b, &errb))
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, b.Bytes(), 0o644))
		return p
	}
	s0 := write("s0.csv", "-exp", "sbrp-fig9", "-smoke", "-shard", "0/2")
	s1 := write("s1.csv", "-exp", "sbrp-fig9", "-smoke", "-shard", "1/2")
	t3 := write("t3.csv", "-exp", "sbrp-fig9", "-smoke", "-shard", "1/3")
	q1 := write("q1.csv", "-exp", "sbrp-fig9", "-quick", "-shard", "1/2")
	whole := write("whole.csv", "-exp", "sbrp-fig9", "-smoke")
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"merge", s0}, "shard 1/2 missing"},
		{[]string{"merge", s0, s0, s1}, "shard 0/2 given twice"},
		{[]string{"merge", s0, t3}, "split 2 and 3 ways"},
		{[]string{"merge", s0, q1}, "different sizes"},
		{[]string{"merge", whole}, "not the CSV of a -shard i/n run"},
		{[]string{"merge", filepath.Join(dir, "nope.csv")}, "no such file"},
		{[]string{"merge"}, "no files"},
		{[]string{"merge", "-bogus", s0}, "flag provided but not defined"},
		{[]string{"merge", "-format", "xml", s0, s1}, "unknown -format"},
	} {
		var out, errb bytes.Buffer
		err := run(tc.args, &out, &errb)
		require.ErrorContains(t, err, tc.msg, "%v", tc.args)
		require.NotContains(t, err.Error(), "\n", "%v", tc.args)
		require.Empty(t, out.String(), "%v", tc.args)
	}
}
