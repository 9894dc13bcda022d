package main

import (
	"bytes"
	"flag"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPmcheck(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr error
		out     []string
	}{
		{[]string{"-workload", "reduction", "-states", "2000"}, nil, []string{"0 violations"}},
		{[]string{"-workload", "reduction-narrow", "-states", "2000", "-seed", "5"}, errViolations,
			[]string{"1 violations", "PRel.block at workloads/reduction.go:", "too narrow", "replay: pmcheck -workload reduction-narrow -size tiny -model sbrp -strategy mixed -states 2000 -seed 5"}},
		{[]string{"-workload", "reduction", "-model", "epoch", "-strategy", "random", "-states", "300"}, nil, []string{"checked 300 crash states, 0 violations"}},
		{[]string{"-workload", "reduction", "-mutate", "-states", "300"}, nil, []string{"killed   PRel at workloads/reduction.go:", "device -> block"}},
		{[]string{"-workload", "reduction", "-advise", "-states", "300"}, nil, []string{"device -> device keep", "block  -> block  keep"}},
		{[]string{"-list"}, nil, []string{"reduction-narrow"}},
	} {
		var out, errb bytes.Buffer
		err := run(tc.args, &out, &errb)
		if tc.wantErr != nil {
			require.ErrorIs(t, err, tc.wantErr, "%v", tc.args)
		} else {
			require.NoError(t, err, "%v: %s", tc.args, errb.String())
		}
		for _, s := range tc.out {
			require.Contains(t, out.String(), s, "%v", tc.args)
		}
	}
	for _, bad := range [][]string{{}, {"-workload", "nope"}, {"-workload", "reduction", "-model", "tso"}, {"-workload", "reduction", "-strategy", "x"}} {
		var out, errb bytes.Buffer
		require.Error(t, run(bad, &out, &errb), "%v", bad)
	}
}

func TestPmcheckTimed(t *testing.T) {
	var out, errb bytes.Buffer
	require.NoError(t, run([]string{"-workload", "reduction", "-timed", "pm-near", "-model", "epoch", "-states", "100"}, &out, &errb))
	require.Contains(t, out.String(), "reduction on hwmodel pm-near/epoch, seed 1: checked")
	require.Error(t, run([]string{"-workload", "reduction", "-timed", "pm-mars"}, &out, &errb))
}

// Every bad flag is a one-line error with exit status 2; 1 is kept for
// "violations found".
func TestPmcheckStrictFlags(t *testing.T) {
	file := t.TempDir() + "/file"
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"-workload", "reduction", "-states", "0"}, 2, "-states 0"},
		{[]string{"-workload", "reduction", "-states", "-1"}, 2, "-states -1"},
		{[]string{"-workload", "reduction", "stray"}, 2, "unexpected arguments"},
		{[]string{"-workload", "reduction", "-timed", "pm-near", "-mutate"}, 2, "exclude each other"},
		{[]string{"-workload", "reduction", "-mutate", "-advise"}, 2, "exclude each other"},
		{[]string{"-workload", "reduction", "-timed", "pm-near", "-advise"}, 2, "exclude each other"},
		{[]string{"-workload", "reduction", "-size", "huge"}, 2, `unknown -size "huge"`},
		{[]string{"-workload", "reduction", "-strategy", "x"}, 2, `unknown -strategy "x"`},
		{[]string{"-workload", "reduction", "-model", "tso"}, 2, "unknown model"},
		{[]string{"-workload", "nope"}, 2, "nope"},
		{[]string{}, 2, "-workload is required"},
		{[]string{"-workload", "reduction", "-timed", "pm-mars"}, 2, "pm-mars"},
		{[]string{"-nope"}, 2, "flag provided but not defined"},
		{[]string{"-workload", "reduction", "-cpuprofile", file + "/sub"}, 2, "-cpuprofile"},
		{[]string{"-workload", "reduction-narrow", "-mutate", "-states", "300"}, 2, "already fails"},
		{[]string{"-workload", "reduction-narrow", "-states", "2000", "-seed", "5"}, 1, ""},
		{[]string{"-h"}, 2, ""},
		{[]string{"-workload", "reduction", "-timed", "pm-near", "-states", "0"}, 0, ""},
	} {
		var out, errb bytes.Buffer
		err := run(tc.args, &out, &errb)
		require.Equal(t, tc.code, exitCode(err), "%v: %v", tc.args, err)
		if tc.msg != "" {
			require.ErrorContains(t, err, tc.msg, "%v", tc.args)
			require.NotContains(t, err.Error(), "\n", "one line")
		}
	}
	var out, errb bytes.Buffer
	require.ErrorIs(t, run([]string{"-h"}, &out, &errb), flag.ErrHelp)
	require.Contains(t, errb.String(), "pmcheck checks that a PM workload recovers from crashes")
}

// Call sites are the first frame outside the library: gpKVS's undo-log
// fences, issued inside txn, are sited at the kvs kernel lines that log,
// one mutant per line, and no report points into txn.
func TestPmcheckUserSites(t *testing.T) {
	var out, errb bytes.Buffer
	require.NoError(t, run([]string{"-workload", "gpkvs", "-mutate", "-states", "300"}, &out, &errb), errb.String())
	require.Regexp(t, `killed   drop OFence at kvs/kernels\.go:[0-9]+ `, out.String())
	require.NotContains(t, out.String(), "txn/")
	require.NotContains(t, out.String(), " exec.go:")
	out.Reset()
	require.ErrorIs(t, run([]string{"-workload", "gpkvs-no-ofence", "-states", "2000"}, &out, &errb), errViolations)
	require.Contains(t, out.String(), "at kvs/")
	require.NotContains(t, out.String(), "txn/")
}

// Long runs say what they do: a line per phase on stderr.
func TestPmcheckPhases(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		lines []string
	}{
		{[]string{"-workload", "reduction", "-states", "200"}, []string{"pmcheck: recording one run of reduction (tiny size)", "exploring up to 200 crash states under sbrp"}},
		{[]string{"-workload", "reduction", "-mutate", "-states", "100"}, []string{"checking the unmutated program under sbrp, then 8 mutants"}},
		{[]string{"-workload", "reduction", "-advise", "-states", "100"}, []string{"trying narrower scopes", "timing the recommended scopes on hwmodel pm-near"}},
		{[]string{"-workload", "reduction", "-timed", "pm-near", "-states", "50"}, []string{"crashing reduction (tiny size) on hwmodel pm-near"}},
	} {
		var out, errb bytes.Buffer
		require.NoError(t, run(tc.args, &out, &errb), "%v", tc.args)
		for _, l := range tc.lines {
			require.Contains(t, errb.String(), l, "%v", tc.args)
		}
	}
}
